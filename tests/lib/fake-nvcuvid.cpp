// SPDX-License-Identifier: LGPL-2.1-or-later
// A stand-in libnvcuvid.so.1, beside the stand-in libcuda.so.1
// (tests/lib/driver/): GStreamer's nvcodec registers its CUDA elements
// (cudaupload, cudadownload) only where NVDEC or NVENC loads. Every call
// answers CUDA_ERROR_NOT_SUPPORTED, so nvcodec finds no codec and registers
// no decoder: decodebin never picks one.
#define FAKE_API extern "C" __attribute__((visibility("default"))) int

namespace {
constexpr int kNotSupported = 801;
}

FAKE_API cuvidCtxLockCreate(void **, void *) {
  return kNotSupported;
}
FAKE_API cuvidCtxLockDestroy(void *) {
  return kNotSupported;
}
FAKE_API cuvidCtxLock(void *, unsigned int) {
  return kNotSupported;
}
FAKE_API cuvidCtxUnlock(void *, unsigned int) {
  return kNotSupported;
}
FAKE_API cuvidCreateDecoder(void **, void *) {
  return kNotSupported;
}
FAKE_API cuvidDestroyDecoder(void *) {
  return kNotSupported;
}
FAKE_API cuvidDecodePicture(void *, void *) {
  return kNotSupported;
}
FAKE_API cuvidCreateVideoParser(void **, void *) {
  return kNotSupported;
}
FAKE_API cuvidParseVideoData(void *, void *) {
  return kNotSupported;
}
FAKE_API cuvidDestroyVideoParser(void *) {
  return kNotSupported;
}
FAKE_API cuvidMapVideoFrame64(void *, int, void *, void *, void *) {
  return kNotSupported;
}
FAKE_API cuvidUnmapVideoFrame64(void *, unsigned long long) {
  return kNotSupported;
}
// Optional for nvcodec; without it, it would register every decoder.
FAKE_API cuvidGetDecoderCaps(void *) {
  return kNotSupported;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
// NVDEC/NVENC support of a device, asked of the codec libraries themselves
// (loaded at run time like the driver): a data-centre GPU without NVENC, or a
// driver installed without its codec libraries, must not be offered to an
// encoding branch.
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "cuda-driver-private.h"

// clang-format off
#include <ffnvcodec/dynlink_cuviddec.h>
#include <ffnvcodec/nvEncodeAPI.h>
// clang-format on

namespace gpufan {
namespace cuda {
namespace internal {
namespace {

typedef NVENCSTATUS NVENCAPI
tNvEncodeAPICreateInstance(NV_ENCODE_API_FUNCTION_LIST *functions);
typedef NVENCSTATUS NVENCAPI
tNvEncodeAPIGetMaxSupportedVersion(uint32_t *version);

// Loaded once and never closed, like the driver.
struct CodecLibraries {
  tcuvidGetDecoderCaps *cuvidGetDecoderCaps = nullptr;
  tNvEncodeAPICreateInstance *NvEncodeAPICreateInstance = nullptr;
  tNvEncodeAPIGetMaxSupportedVersion *NvEncodeAPIGetMaxSupportedVersion =
      nullptr;
};

const CodecLibraries& Codecs() {
  static std::once_flag once;
  static CodecLibraries codecs;
  std::call_once(once, [] {
    if (void *nvcuvid = dlopen("libnvcuvid.so.1", RTLD_NOW | RTLD_LOCAL)) {
      codecs.cuvidGetDecoderCaps = reinterpret_cast<tcuvidGetDecoderCaps *>(
          dlsym(nvcuvid, "cuvidGetDecoderCaps"));
    }
    if (void *nvenc = dlopen("libnvidia-encode.so.1", RTLD_NOW | RTLD_LOCAL)) {
      codecs.NvEncodeAPICreateInstance =
          reinterpret_cast<tNvEncodeAPICreateInstance *>(
              dlsym(nvenc, "NvEncodeAPICreateInstance"));
      codecs.NvEncodeAPIGetMaxSupportedVersion =
          reinterpret_cast<tNvEncodeAPIGetMaxSupportedVersion *>(
              dlsym(nvenc, "NvEncodeAPIGetMaxSupportedVersion"));
    }
  });
  return codecs;
}

}  // namespace

Support ProbeNvdec(const Driver& driver, CUcontext context) {
  const CodecLibraries& codecs = Codecs();
  if (codecs.cuvidGetDecoderCaps == nullptr)
    return Support::kUnknown;
  // cuvidGetDecoderCaps answers for the current context's device.
  if (driver.cuCtxPushCurrent_v2(context) != CUDA_SUCCESS)
    return Support::kUnknown;
  CUVIDDECODECAPS caps;
  std::memset(&caps, 0, sizeof caps);
  caps.eCodecType = cudaVideoCodec_H264;
  caps.eChromaFormat = cudaVideoChromaFormat_420;
  caps.nBitDepthMinus8 = 0;
  const CUresult result = codecs.cuvidGetDecoderCaps(&caps);
  CUcontext popped = nullptr;
  driver.cuCtxPopCurrent_v2(&popped);
  if (result != CUDA_SUCCESS)
    return Support::kUnknown;
  return caps.bIsSupported ? Support::kYes : Support::kNo;
}

Support ProbeNvenc(CUcontext context) {
  const CodecLibraries& codecs = Codecs();
  if (codecs.NvEncodeAPICreateInstance == nullptr ||
      codecs.NvEncodeAPIGetMaxSupportedVersion == nullptr)
    return Support::kUnknown;
  // A driver older than our headers refuses every call with
  // NV_ENC_ERR_INVALID_VERSION: that says nothing about the hardware.
  uint32_t max_version = 0;
  if (codecs.NvEncodeAPIGetMaxSupportedVersion(&max_version) !=
          NV_ENC_SUCCESS ||
      max_version < ((NVENCAPI_MAJOR_VERSION << 4) | NVENCAPI_MINOR_VERSION))
    return Support::kUnknown;

  NV_ENCODE_API_FUNCTION_LIST api;
  std::memset(&api, 0, sizeof api);
  api.version = NV_ENCODE_API_FUNCTION_LIST_VER;
  if (codecs.NvEncodeAPICreateInstance(&api) != NV_ENC_SUCCESS ||
      api.nvEncOpenEncodeSessionEx == nullptr ||
      api.nvEncGetEncodeGUIDCount == nullptr ||
      api.nvEncDestroyEncoder == nullptr)
    return Support::kUnknown;

  NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS params;
  std::memset(&params, 0, sizeof params);
  params.version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER;
  params.deviceType = NV_ENC_DEVICE_TYPE_CUDA;
  params.device = context;
  params.apiVersion = NVENCAPI_VERSION;
  void *encoder = nullptr;
  const NVENCSTATUS status = api.nvEncOpenEncodeSessionEx(&params, &encoder);
  Support support = Support::kUnknown;
  if (status == NV_ENC_SUCCESS) {
    uint32_t count = 0;
    if (api.nvEncGetEncodeGUIDCount(encoder, &count) == NV_ENC_SUCCESS)
      support = count > 0 ? Support::kYes : Support::kNo;
  } else if (status == NV_ENC_ERR_NO_ENCODE_DEVICE ||
             status == NV_ENC_ERR_UNSUPPORTED_DEVICE) {
    support = Support::kNo;
  }
  // Other failures (session limit of consumer boards, out of memory) say
  // nothing about the hardware. NVENC wants the encoder destroyed even when
  // opening it failed.
  if (encoder != nullptr)
    api.nvEncDestroyEncoder(encoder);
  return support;
}

}  // namespace internal
}  // namespace cuda
}  // namespace gpufan

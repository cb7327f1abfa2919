// SPDX-License-Identifier: LGPL-2.1-or-later
// Inside the CUDA back end: the driver loaded at run time (as GStreamer's
// gstcudaloader and FFmpeg's ffnvcodec loader do it), the one checking helper
// for its calls, and the pure formatting functions. Not installed. The
// functions are exported only so that tests, the benchmark and
// examples/gpufan-devices can reach them.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "gpufan-config.h"
#include "gpufan/cuda.h"
#include "gpufan/prelude.h"

#if GPUFAN_HAVE_CUDA
#include <ffnvcodec/dynlink_cuda.h>
#endif

namespace gpufan {
namespace cuda {
namespace internal {

// What every entry point says in a build without the ffnvcodec headers.
inline constexpr const char kNotBuilt[] =
    "built without CUDA support (ffnvcodec headers not found)";

// The library loaded when $GPUFAN_LIBCUDA is unset or empty.
inline constexpr const char kDefaultLibrary[] = "libcuda.so.1";

// "0000:3B:00.0" or "00000000:3B:00.0" (the driver's forms) -> "0000:3b:00.0":
// lower case, the domain in 4 digits (more only when it needs them), as sysfs
// (/sys/bus/pci/devices) and hwloc spell it, so the ids compare as strings.
// Empty when `id` is not domain:bus:device.function in hex.
GPUFAN_API std::string NormalizePciBusId(const std::string& id);

// 16 bytes -> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the form nvidia-smi
// and CUDA_VISIBLE_DEVICES use.
GPUFAN_API std::string FormatUuid(const std::array<unsigned char, 16>& bytes);

// cuDriverGetVersion's number (1000 * major + 10 * minor) -> "12.2" for
// 12020. Empty for a number that is not positive.
GPUFAN_API std::string FormatDriverVersion(int version);

// The text of Error::what() for a failed call:
// "cuMemAlloc_v2(&ptr, n) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)
// at lib/devices/cuda.cpp:42". A null or empty `name` (the driver did not know the
// code) becomes "CUDA error <code>".
GPUFAN_API std::string FormatCallError(int code, const char *name,
                                       const char *description,
                                       const char *call, const char *file,
                                       int line);

#if GPUFAN_HAVE_CUDA

// Driver entry points missing from ffnvcodec's dynlink_cuda.h, declared from
// the driver API reference with that header's types.
typedef CUresult CUDAAPI tcuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
typedef CUresult CUDAAPI tcuDeviceGetPCIBusId(char *pci_bus_id, int len,
                                              CUdevice dev);
typedef CUresult CUDAAPI tcuDevicePrimaryCtxRelease_v2(CUdevice dev);
typedef CUresult CUDAAPI tcuMemGetInfo_v2(size_t *free, size_t *total);
typedef CUresult CUDAAPI tcuMemHostRegister_v2(void *p, size_t bytesize,
                                               unsigned int flags);
typedef CUresult CUDAAPI tcuMemHostUnregister(void *p);
typedef CUresult CUDAAPI tcuEventElapsedTime(float *milliseconds, CUevent start,
                                             CUevent end);
typedef CUresult CUDAAPI tcuDriverGetVersion(int *driver_version);
typedef CUresult CUDAAPI tcuDeviceCanAccessPeer(int *can_access, CUdevice dev,
                                                CUdevice peer);
typedef CUresult CUDAAPI tcuCtxEnablePeerAccess(CUcontext peer,
                                                unsigned int flags);
typedef CUresult CUDAAPI tcuStreamWaitEvent(CUstream stream, CUevent event,
                                            unsigned int flags);

// From cuda.h (driver API); not in dynlink_cuda.h.
inline constexpr unsigned int kMemHostRegisterPortable = 0x01;

// The driver's function table. Immutable once OpenDriver() returns it, so
// any thread may call through it.
struct GPUFAN_API Driver {
  Driver() = default;
  ~Driver();  // closes the library
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  void *library = nullptr;
  std::string path;

  tcuInit *cuInit = nullptr;
  // 1000 * major + 10 * minor: 12020 is CUDA 12.2, the newest CUDA version
  // the driver supports (not the driver's own release number).
  tcuDriverGetVersion *cuDriverGetVersion = nullptr;
  tcuGetErrorName *cuGetErrorName = nullptr;
  tcuGetErrorString *cuGetErrorString = nullptr;
  tcuDeviceGetCount *cuDeviceGetCount = nullptr;
  tcuDeviceGet *cuDeviceGet = nullptr;
  tcuDeviceGetName *cuDeviceGetName = nullptr;
  // cuDeviceGetUuid_v2 where the driver has it (the MIG-aware one).
  tcuDeviceGetUuid *cuDeviceGetUuid = nullptr;
  tcuDeviceGetAttribute *cuDeviceGetAttribute = nullptr;
  tcuDeviceTotalMem_v2 *cuDeviceTotalMem_v2 = nullptr;
  tcuDeviceGetPCIBusId *cuDeviceGetPCIBusId = nullptr;
  tcuDevicePrimaryCtxRetain *cuDevicePrimaryCtxRetain = nullptr;
  tcuDevicePrimaryCtxRelease_v2 *cuDevicePrimaryCtxRelease_v2 = nullptr;
  tcuCtxPushCurrent_v2 *cuCtxPushCurrent_v2 = nullptr;
  tcuCtxPopCurrent_v2 *cuCtxPopCurrent_v2 = nullptr;
  tcuMemGetInfo_v2 *cuMemGetInfo_v2 = nullptr;
  tcuStreamCreate *cuStreamCreate = nullptr;
  tcuStreamDestroy_v2 *cuStreamDestroy_v2 = nullptr;
  tcuStreamSynchronize *cuStreamSynchronize = nullptr;
  tcuMemHostRegister_v2 *cuMemHostRegister_v2 = nullptr;
  tcuMemHostUnregister *cuMemHostUnregister = nullptr;
  tcuMemAlloc_v2 *cuMemAlloc_v2 = nullptr;
  tcuMemFree_v2 *cuMemFree_v2 = nullptr;
  tcuMemcpyHtoD_v2 *cuMemcpyHtoD_v2 = nullptr;
  tcuMemcpyHtoDAsync_v2 *cuMemcpyHtoDAsync_v2 = nullptr;
  tcuMemcpyDtoDAsync_v2 *cuMemcpyDtoDAsync_v2 = nullptr;
  tcuMemcpy2D_v2 *cuMemcpy2D_v2 = nullptr;
  tcuMemcpy2DAsync_v2 *cuMemcpy2DAsync_v2 = nullptr;
  tcuDeviceCanAccessPeer *cuDeviceCanAccessPeer = nullptr;
  tcuCtxEnablePeerAccess *cuCtxEnablePeerAccess = nullptr;
  tcuStreamWaitEvent *cuStreamWaitEvent = nullptr;
  tcuEventCreate *cuEventCreate = nullptr;
  tcuEventRecord *cuEventRecord = nullptr;
  tcuEventSynchronize *cuEventSynchronize = nullptr;
  tcuEventElapsedTime *cuEventElapsedTime = nullptr;
  tcuEventDestroy_v2 *cuEventDestroy_v2 = nullptr;
};

// Opens the driver library at `path` (dlopen RTLD_NOW | RTLD_LOCAL), resolves
// every entry point and calls cuInit(0). nullptr on failure, the library
// closed again and *why_not saying why. No global state: tests call it with
// paths that must fail. Thread-safe.
GPUFAN_API std::unique_ptr<Driver> OpenDriver(const std::string& path,
                                              std::string *why_not);

// The process-wide driver, opened once from $GPUFAN_LIBCUDA or libcuda.so.1
// and never closed (contexts and pinned memory may outlive any owner we could
// name at exit). nullptr when unavailable, *why_not (when given) saying why.
// Thread-safe.
GPUFAN_API const Driver *GlobalDriver(std::string *why_not = nullptr);

// GlobalDriver(), or Error carrying the reason there is none.
GPUFAN_API const Driver& RequireDriver();

// The one checking helper behind GPUFAN_CU_CHECK: throws Error (code, the
// driver's name and text for it, the call, file and line) unless `result`
// is CUDA_SUCCESS.
GPUFAN_API void Check(const Driver& driver, CUresult result, const char *call,
                      const char *file, int line);

// Whether the device whose primary context is `context` can decode H.264
// 8-bit 4:2:0 (NVDEC, through libnvcuvid.so.1) and encode anything (NVENC,
// through libnvidia-encode.so.1). kUnknown when the codec library cannot be
// loaded or does not answer, kNo on a definite no. Never throws.
// Thread-safe (the caller makes sure `context` stays retained).
Support ProbeNvdec(const Driver& driver, CUcontext context);
Support ProbeNvenc(CUcontext context);

#endif  // GPUFAN_HAVE_CUDA

}  // namespace internal
}  // namespace cuda
}  // namespace gpufan

#if GPUFAN_HAVE_CUDA
// GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&ptr, bytes)): calls the entry point
// through `driver` and throws gpufan::cuda::Error on failure, naming the call
// as written and where it was made.
#define GPUFAN_CU_CHECK(driver, call)                                       \
  ::gpufan::cuda::internal::Check((driver), (driver).call, #call, __FILE__, \
                                  __LINE__)
#endif

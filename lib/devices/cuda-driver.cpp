// SPDX-License-Identifier: LGPL-2.1-or-later
// Loads the CUDA driver at run time, once, the way GStreamer's gstcudaloader
// and FFmpeg's ffnvcodec loader do: libgpufan links against no NVIDIA
// library, so it loads and runs CPU lanes on machines without a driver.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "cuda-driver-private.h"

namespace gpufan {
namespace cuda {
namespace internal {
namespace {

// Resolves `name` into `*fn`; false (and *why_not set) when it is missing.
template <typename Fn>
bool Resolve(void *library, const std::string& path, const char *name, Fn **fn,
             std::string *why_not) {
  *fn = reinterpret_cast<Fn *>(dlsym(library, name));
  if (*fn != nullptr)
    return true;
  *why_not = path + " has no " + name + " (not a CUDA driver, or one too old)";
  return false;
}

std::string ErrorName(const Driver& driver, CUresult result) {
  const char *name = nullptr;
  if (driver.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr)
    return "CUDA error " + std::to_string(static_cast<int>(result));
  return name;
}

}  // namespace

Driver::~Driver() {
  if (library != nullptr)
    dlclose(library);
}

std::unique_ptr<Driver> OpenDriver(const std::string& path,
                                   std::string *why_not) {
  std::string ignored;
  if (why_not == nullptr)
    why_not = &ignored;
  auto driver = std::make_unique<Driver>();
  driver->path = path;
  // RTLD_LOCAL: the driver's symbols must not satisfy other libraries' lookups
  // (a CUDA runtime linked into the application has its own loader).
  driver->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver->library == nullptr) {
    const char *detail = dlerror();
    *why_not = path + " not found (no NVIDIA driver): " +
               (detail != nullptr ? detail : "dlopen failed");
    return nullptr;
  }

  void *lib = driver->library;
  Driver& d = *driver;
  // The _v2 names are the ABI the driver exports for the 64-bit API; the
  // unsuffixed ones are kept only for old binaries.
  const bool resolved =
      Resolve(lib, path, "cuInit", &d.cuInit, why_not) &&
      Resolve(lib, path, "cuDriverGetVersion", &d.cuDriverGetVersion,
              why_not) &&
      Resolve(lib, path, "cuGetErrorName", &d.cuGetErrorName, why_not) &&
      Resolve(lib, path, "cuGetErrorString", &d.cuGetErrorString, why_not) &&
      Resolve(lib, path, "cuDeviceGetCount", &d.cuDeviceGetCount, why_not) &&
      Resolve(lib, path, "cuDeviceGet", &d.cuDeviceGet, why_not) &&
      Resolve(lib, path, "cuDeviceGetName", &d.cuDeviceGetName, why_not) &&
      Resolve(lib, path, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute,
              why_not) &&
      Resolve(lib, path, "cuDeviceTotalMem_v2", &d.cuDeviceTotalMem_v2,
              why_not) &&
      Resolve(lib, path, "cuDeviceGetPCIBusId", &d.cuDeviceGetPCIBusId,
              why_not) &&
      Resolve(lib, path, "cuDevicePrimaryCtxRetain",
              &d.cuDevicePrimaryCtxRetain, why_not) &&
      Resolve(lib, path, "cuDevicePrimaryCtxRelease_v2",
              &d.cuDevicePrimaryCtxRelease_v2, why_not) &&
      Resolve(lib, path, "cuCtxPushCurrent_v2", &d.cuCtxPushCurrent_v2,
              why_not) &&
      Resolve(lib, path, "cuCtxPopCurrent_v2", &d.cuCtxPopCurrent_v2,
              why_not) &&
      Resolve(lib, path, "cuMemGetInfo_v2", &d.cuMemGetInfo_v2, why_not) &&
      Resolve(lib, path, "cuStreamCreate", &d.cuStreamCreate, why_not) &&
      Resolve(lib, path, "cuStreamDestroy_v2", &d.cuStreamDestroy_v2,
              why_not) &&
      Resolve(lib, path, "cuStreamSynchronize", &d.cuStreamSynchronize,
              why_not) &&
      Resolve(lib, path, "cuMemHostRegister_v2", &d.cuMemHostRegister_v2,
              why_not) &&
      Resolve(lib, path, "cuMemHostUnregister", &d.cuMemHostUnregister,
              why_not) &&
      Resolve(lib, path, "cuMemAlloc_v2", &d.cuMemAlloc_v2, why_not) &&
      Resolve(lib, path, "cuMemFree_v2", &d.cuMemFree_v2, why_not) &&
      Resolve(lib, path, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD_v2, why_not) &&
      Resolve(lib, path, "cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync_v2,
              why_not) &&
      Resolve(lib, path, "cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync_v2,
              why_not) &&
      Resolve(lib, path, "cuMemcpy2D_v2", &d.cuMemcpy2D_v2, why_not) &&
      Resolve(lib, path, "cuMemcpy2DAsync_v2", &d.cuMemcpy2DAsync_v2,
              why_not) &&
      Resolve(lib, path, "cuDeviceCanAccessPeer", &d.cuDeviceCanAccessPeer,
              why_not) &&
      Resolve(lib, path, "cuCtxEnablePeerAccess", &d.cuCtxEnablePeerAccess,
              why_not) &&
      Resolve(lib, path, "cuStreamWaitEvent", &d.cuStreamWaitEvent, why_not) &&
      Resolve(lib, path, "cuEventCreate", &d.cuEventCreate, why_not) &&
      Resolve(lib, path, "cuEventRecord", &d.cuEventRecord, why_not) &&
      Resolve(lib, path, "cuEventSynchronize", &d.cuEventSynchronize,
              why_not) &&
      Resolve(lib, path, "cuEventElapsedTime", &d.cuEventElapsedTime,
              why_not) &&
      Resolve(lib, path, "cuEventDestroy_v2", &d.cuEventDestroy_v2, why_not);
  if (!resolved)
    return nullptr;  // the destructor closes the library

  // cuDeviceGetUuid_v2 (CUDA 11.4) tells MIG instances apart; fall back to
  // the original for older drivers.
  if (!Resolve(lib, path, "cuDeviceGetUuid_v2", &d.cuDeviceGetUuid, why_not) &&
      !Resolve(lib, path, "cuDeviceGetUuid", &d.cuDeviceGetUuid, why_not))
    return nullptr;

  const CUresult result = d.cuInit(0);
  if (result != CUDA_SUCCESS) {
    *why_not = "cuInit failed: " + ErrorName(d, result);
    return nullptr;
  }
  why_not->clear();
  return driver;
}

const Driver *GlobalDriver(std::string *why_not) {
  static std::once_flag once;
  // Never destroyed: see the header.
  static const Driver *driver = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    const char *env = std::getenv("GPUFAN_LIBCUDA");
    const std::string path =
        env != nullptr && env[0] != '\0' ? env : kDefaultLibrary;
    driver = OpenDriver(path, &reason).release();
  });
  if (driver == nullptr && why_not != nullptr)
    *why_not = reason;
  return driver;
}

const Driver& RequireDriver() {
  std::string why_not;
  const Driver *driver = GlobalDriver(&why_not);
  if (driver == nullptr)
    throw Error("CUDA unavailable: " + why_not);
  return *driver;
}

void Check(const Driver& driver, CUresult result, const char *call,
           const char *file, int line) {
  if (result == CUDA_SUCCESS)
    return;
  const char *name = nullptr;
  const char *description = nullptr;
  if (driver.cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (driver.cuGetErrorString(result, &description) != CUDA_SUCCESS)
    description = nullptr;
  throw Error(static_cast<int>(result), name != nullptr ? name : "",
              description != nullptr ? description : "", call, file, line);
}

}  // namespace internal
}  // namespace cuda
}  // namespace gpufan

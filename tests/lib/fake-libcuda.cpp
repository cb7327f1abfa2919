// SPDX-License-Identifier: LGPL-2.1-or-later
// A stand-in for libcuda.so.1, loaded through $GPUFAN_LIBCUDA, so that the
// GPU paths of the CUDA back end (and the benchmark) run on machines without
// a GPU. Two devices; device memory is host memory; contexts, streams and
// registrations are counted and checked the way the driver checks them (a
// current context where the driver needs one, release without retain, double
// registration), so misuse fails here as it would on a GPU. The
// gpufan_fake_cuda_* functions let tests look inside.
// Thread-safety: one mutex around the shared state; the context stack is per
// thread, as the driver's is.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <ffnvcodec/dynlink_cuda.h>

#define FAKE_API extern "C" __attribute__((visibility("default")))

// The driver's opaque context type, defined here.
struct CUctx_st {
  int device;
};

namespace {

constexpr int kDevices = 2;
constexpr int kInvalidValue = 1;
constexpr int kInvalidDevice = 101;
constexpr int kInvalidContext = 201;
constexpr int kInvalidHandle = 400;
constexpr int kAlreadyRegistered = 712;
constexpr int kNotRegistered = 713;
constexpr size_t kTotal = size_t{16} << 30;
constexpr int kDriverVersion = 12020;  // CUDA 12.2

std::mutex mutex;
CUctx_st contexts[kDevices] = {{0}, {1}};
int retains[kDevices] = {};                 // guarded by mutex
std::set<void *> streams;                   // guarded by mutex
std::vector<unsigned int> stream_flags;     // guarded by mutex; every create
std::map<void *, unsigned int> registered;  // guarded by mutex; p -> flags
// The context stack of each thread, as the driver keeps it. Not a
// thread_local: the dynamic TLS of a dlopen'ed library is allocated and freed
// inside ld.so, where ThreadSanitizer sees no order between one thread's use
// and the free by the thread that reuses its stack. A thread's entry goes
// when its stack is empty; one left behind is a push without its pop.
std::map<std::thread::id, std::vector<CUcontext>> stacks;  // guarded by mutex

// The top of this thread's stack, nullptr when it is empty.
CUcontext Current() {
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = stacks.find(std::this_thread::get_id());
  return it == stacks.end() ? nullptr : it->second.back();
}

CUresult R(int code) {
  return static_cast<CUresult>(code);
}

bool HasContext() {
  return Current() != nullptr;
}

// The null (legacy default) stream, or one created and not destroyed.
bool IsStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex);
  return stream == nullptr || streams.count(stream) != 0;
}

struct Event {
  std::chrono::steady_clock::time_point at;
};

// A device with a sticky error answers every call with its code. Tests set
// it with gpufan_fake_cuda_set_sticky while other threads call the driver,
// so it is atomic state, never the environment (setenv races with getenv).
// -1: no device is broken.
std::atomic<int> sticky_device{-1};
std::atomic<int> sticky_code{0};

int StickyCode() {
  const int device = sticky_device.load();
  const CUcontext context = Current();
  if (device < 0 || context == nullptr || device != context->device)
    return 0;
  return sticky_code.load();
}

}  // namespace

FAKE_API int gpufan_fake_cuda_retains(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  return device >= 0 && device < kDevices ? retains[device] : -1;
}

FAKE_API int gpufan_fake_cuda_live_streams() {
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<int>(streams.size());
}

// Flags of the n-th stream ever created; -1 past the end.
FAKE_API long gpufan_fake_cuda_stream_flags(int n) {
  std::lock_guard<std::mutex> lock(mutex);
  return n >= 0 && static_cast<size_t>(n) < stream_flags.size()
             ? static_cast<long>(stream_flags[static_cast<size_t>(n)])
             : -1;
}

// Flags p was registered with; -1 when it is not registered.
FAKE_API long gpufan_fake_cuda_registered_flags(void *p) {
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = registered.find(p);
  return it == registered.end() ? -1 : static_cast<long>(it->second);
}

FAKE_API int gpufan_fake_cuda_context_depth() {
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = stacks.find(std::this_thread::get_id());
  return it == stacks.end() ? 0 : static_cast<int>(it->second.size());
}

// Makes DEVICE's contexts answer every call with CODE, as a device with a
// sticky error does; DEVICE -1 heals them.
FAKE_API void gpufan_fake_cuda_set_sticky(int device, int code) {
  sticky_code.store(code);
  sticky_device.store(device);
}

FAKE_API CUresult cuInit(unsigned int flags) {
  return flags == 0 ? CUDA_SUCCESS : R(kInvalidValue);
}

// Like the driver's: needs no cuInit, refuses a null pointer.
FAKE_API CUresult cuDriverGetVersion(int *version) {
  if (version == nullptr)
    return R(kInvalidValue);
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **name) {
  switch (static_cast<int>(error)) {
    case 0:
      *name = "CUDA_SUCCESS";
      return CUDA_SUCCESS;
    case kInvalidValue:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case kInvalidDevice:
      *name = "CUDA_ERROR_INVALID_DEVICE";
      return CUDA_SUCCESS;
    case kInvalidContext:
      *name = "CUDA_ERROR_INVALID_CONTEXT";
      return CUDA_SUCCESS;
    case kInvalidHandle:
      *name = "CUDA_ERROR_INVALID_HANDLE";
      return CUDA_SUCCESS;
    case kAlreadyRegistered:
      *name = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
      return CUDA_SUCCESS;
    case kNotRegistered:
      *name = "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
      return CUDA_SUCCESS;
  }
  *name = nullptr;
  return R(kInvalidValue);
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **text) {
  *text = nullptr;
  return static_cast<int>(error) == kInvalidDevice
             ? (*text = "invalid device ordinal", CUDA_SUCCESS)
             : R(kInvalidValue);
}

FAKE_API CUresult cuDeviceGetCount(int *count) {
  *count = kDevices;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices)
    return R(kInvalidDevice);
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  const char *names[kDevices] = {"Fake GPU 0", "Fake GPU 1"};
  std::strncpy(name, names[device], static_cast<size_t>(len));
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  for (int i = 0; i < 16; ++i)
    uuid->bytes[i] = static_cast<char>(0xf0 + i + device);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice device) {
  return cuDeviceGetUuid(uuid, device);
}

FAKE_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                       CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *value = 0;  // default
      return CUDA_SUCCESS;
    default:
      return R(kInvalidValue);
  }
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  *bytes = kTotal;
  return CUDA_SUCCESS;
}

// The driver's own form: upper case, 8-digit domain.
FAKE_API CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  const char *ids[kDevices] = {"00000000:3B:00.0", "00000000:AF:00.0"};
  std::strncpy(id, ids[device], static_cast<size_t>(len));
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *context,
                                           CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  std::lock_guard<std::mutex> lock(mutex);
  ++retains[device];
  *context = &contexts[device];
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  std::lock_guard<std::mutex> lock(mutex);
  if (retains[device] == 0)
    return R(kInvalidContext);
  --retains[device];
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (context == nullptr)
    return R(kInvalidContext);
  std::lock_guard<std::mutex> lock(mutex);
  if (retains[context->device] == 0)  // pushing a released context
    return R(kInvalidContext);
  stacks[std::this_thread::get_id()].push_back(context);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = stacks.find(std::this_thread::get_id());
  if (it == stacks.end())
    return R(kInvalidContext);
  if (context != nullptr)
    *context = it->second.back();
  it->second.pop_back();
  if (it->second.empty())
    stacks.erase(it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  if (!HasContext())
    return R(kInvalidContext);
  if (const int sticky = StickyCode())
    return R(sticky);
  *total = kTotal;
  *free = kTotal - (size_t{1} << 30);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  if (!HasContext())
    return R(kInvalidContext);
  std::lock_guard<std::mutex> lock(mutex);
  *stream = reinterpret_cast<CUstream>(new int(0));
  streams.insert(*stream);
  stream_flags.push_back(flags);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex);
  if (streams.erase(stream) == 0)
    return R(kInvalidHandle);
  delete reinterpret_cast<int *>(stream);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamSynchronize(CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex);
  return streams.count(stream) != 0 ? CUDA_SUCCESS : R(kInvalidHandle);
}

FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t bytes,
                                       unsigned int flags) {
  if (!HasContext())
    return R(kInvalidContext);
  if (p == nullptr || bytes == 0)
    return R(kInvalidValue);
  std::lock_guard<std::mutex> lock(mutex);
  if (!registered.emplace(p, flags).second)
    return R(kAlreadyRegistered);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostUnregister(void *p) {
  if (!HasContext())
    return R(kInvalidContext);
  std::lock_guard<std::mutex> lock(mutex);
  return registered.erase(p) != 0 ? CUDA_SUCCESS : R(kNotRegistered);
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  if (!HasContext())
    return R(kInvalidContext);
  void *p = std::malloc(bytes);
  if (p == nullptr)
    return R(2);  // CUDA_ERROR_OUT_OF_MEMORY
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (!HasContext())
    return R(kInvalidContext);
  std::free(reinterpret_cast<void *>(ptr));
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src,
                                  size_t bytes) {
  if (!HasContext())
    return R(kInvalidContext);
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                       size_t bytes, CUstream stream) {
  if (!IsStream(stream))
    return R(kInvalidHandle);
  return cuMemcpyHtoD_v2(dst, src, bytes);
}

// Device memory is host memory, so a device-to-device copy is a memcpy.
FAKE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src,
                                       size_t bytes, CUstream stream) {
  if (!IsStream(stream))
    return R(kInvalidHandle);
  if (!HasContext())
    return R(kInvalidContext);
  std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
              bytes);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventCreate(CUevent *event, unsigned int) {
  if (!HasContext())
    return R(kInvalidContext);
  *event = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventRecord(CUevent event, CUstream) {
  reinterpret_cast<Event *>(event)->at = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventSynchronize(CUevent) {
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      reinterpret_cast<Event *>(end)->at -
      reinterpret_cast<Event *>(start)->at);
  *ms = static_cast<float>(ns.count()) / 1e6f;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent event) {
  delete reinterpret_cast<Event *>(event);
  return CUDA_SUCCESS;
}

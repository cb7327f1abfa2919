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
#include <algorithm>
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
constexpr int kPeerAccessUnsupported = 217;
constexpr int kPeerAccessNotEnabled = 705;
constexpr int kPeerAccessAlreadyEnabled = 704;
constexpr int kNotSupported = 801;
constexpr size_t kTotal = size_t{16} << 30;
constexpr int kDriverVersion = 12020;  // CUDA 12.2

std::mutex mutex;
CUctx_st contexts[kDevices] = {{0}, {1}};
int retains[kDevices] = {};                 // guarded by mutex
std::set<void *> streams;                   // guarded by mutex
std::vector<unsigned int> stream_flags;     // guarded by mutex; every create
std::map<void *, unsigned int> registered;  // guarded by mutex; p -> flags
// Contexts made by cuCtxCreate (GStreamer's gst_cuda_context_new) and not
// destroyed, and how many were ever made.
std::set<CUcontext> created;  // guarded by mutex
int created_ever = 0;         // guarded by mutex
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

// How many contexts cuCtxCreate ever made (GstCudaContexts that did not
// share the lanes' primary context).
FAKE_API int gpufan_fake_cuda_created_contexts() {
  std::lock_guard<std::mutex> lock(mutex);
  return created_ever;
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
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:  // GstCudaContext asks
      *value = 512;
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
  // a released primary context, or a destroyed created one
  if (retains[context->device] == 0 && created.count(context) == 0)
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
  return IsStream(stream) ? CUDA_SUCCESS : R(kInvalidHandle);
}

// GStreamer 1.22's loader takes the unversioned name.
FAKE_API CUresult cuStreamDestroy(CUstream stream) {
  return cuStreamDestroy_v2(stream);
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

// Copies here are done when their call returns: nothing to wait for.
FAKE_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event,
                                    unsigned int flags) {
  if (!IsStream(stream) || event == nullptr)
    return R(kInvalidHandle);
  return flags == 0 ? CUDA_SUCCESS : R(kInvalidValue);
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

// --- What GStreamer's own CUDA library (libgstcuda-1.0, 1.22) loads ---
// With these, the stand-in can also be libcuda.so.1 for libgstcuda and
// nvcodec (through LD_LIBRARY_PATH, tests/lib/meson.build): cudaupload and
// cudadownload then run, and frames in memory:CUDAMemory are host memory.
// Kernels and GL interop are not there: they answer errors.

// A context of its own, current on this thread, as the driver makes it.
FAKE_API CUresult cuCtxCreate_v2(CUcontext *context, unsigned int,
                                 CUdevice device) {
  if (device < 0 || device >= kDevices)
    return R(kInvalidDevice);
  std::lock_guard<std::mutex> lock(mutex);
  CUcontext made = new CUctx_st{device};
  created.insert(made);
  created_ever++;
  stacks[std::this_thread::get_id()].push_back(made);
  *context = made;
  return CUDA_SUCCESS;
}

// Leaves no trace on the calling thread's stack, as the driver's does (1.22's
// decoder probe pushes without popping where no codec is supported).
FAKE_API CUresult cuCtxDestroy_v2(CUcontext context) {
  std::lock_guard<std::mutex> lock(mutex);
  if (created.erase(context) == 0)
    return R(kInvalidContext);
  const auto it = stacks.find(std::this_thread::get_id());
  if (it != stacks.end()) {
    std::vector<CUcontext>& stack = it->second;
    stack.erase(std::remove(stack.begin(), stack.end(), context), stack.end());
    if (stack.empty())
      stacks.erase(it);
  }
  delete context;
  return CUDA_SUCCESS;
}

// Peer access between the two devices only with $GPUFAN_FAKE_CUDA_PEER=1
// (read once, at the first question): without it, copies between them go
// through the host.
bool PeerAccess() {
  static const bool peer = [] {
    const char *env = std::getenv("GPUFAN_FAKE_CUDA_PEER");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return peer;
}

FAKE_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice device,
                                        CUdevice peer) {
  if (device < 0 || device >= kDevices || peer < 0 || peer >= kDevices)
    return R(kInvalidDevice);
  *can = PeerAccess() && device != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

// Turns on access from the current context to `peer`'s device, once.
FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (!HasContext())
    return R(kInvalidContext);
  if (!PeerAccess() || peer == nullptr || flags != 0)
    return R(kPeerAccessUnsupported);
  std::lock_guard<std::mutex> lock(mutex);
  static std::set<std::pair<CUcontext, CUcontext>> enabled;
  const CUcontext mine = stacks[std::this_thread::get_id()].back();
  return enabled.emplace(mine, peer).second ? CUDA_SUCCESS
                                            : R(kPeerAccessAlreadyEnabled);
}

FAKE_API CUresult cuCtxDisablePeerAccess(CUcontext) {
  return R(kPeerAccessNotEnabled);
}

// Rows padded to 512 bytes, as a GPU's pitch is.
FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr *ptr, size_t *pitch,
                                     size_t width, size_t height,
                                     unsigned int element_size) {
  if (!HasContext())
    return R(kInvalidContext);
  if (element_size != 4 && element_size != 8 && element_size != 16)
    return R(kInvalidValue);
  const size_t padded = (width + 511) & ~size_t{511};
  void *p = std::calloc(1, std::max<size_t>(padded * height, 1));
  if (p == nullptr)
    return R(2);  // CUDA_ERROR_OUT_OF_MEMORY
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  *pitch = padded;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAllocHost_v2(void **p, size_t bytes) {
  if (!HasContext())
    return R(kInvalidContext);
  *p = std::malloc(std::max<size_t>(bytes, 1));
  return *p != nullptr ? CUDA_SUCCESS : R(2);
}

FAKE_API CUresult cuMemFreeHost(void *p) {
  std::free(p);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *copy) {
  if (!HasContext())
    return R(kInvalidContext);
  if (copy->srcMemoryType == CU_MEMORYTYPE_ARRAY ||
      copy->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return R(kInvalidValue);
  const auto *src =
      copy->srcMemoryType == CU_MEMORYTYPE_HOST
          ? static_cast<const unsigned char *>(copy->srcHost)
          : reinterpret_cast<const unsigned char *>(copy->srcDevice);
  auto *dst = copy->dstMemoryType == CU_MEMORYTYPE_HOST
                  ? static_cast<unsigned char *>(copy->dstHost)
                  : reinterpret_cast<unsigned char *>(copy->dstDevice);
  if (src == nullptr || dst == nullptr || copy->WidthInBytes > copy->srcPitch ||
      copy->WidthInBytes > copy->dstPitch)
    return R(kInvalidValue);
  for (size_t y = 0; y < copy->Height; y++)
    std::memcpy(dst + (copy->dstY + y) * copy->dstPitch + copy->dstXInBytes,
                src + (copy->srcY + y) * copy->srcPitch + copy->srcXInBytes,
                copy->WidthInBytes);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *copy,
                                     CUstream stream) {
  if (!IsStream(stream))
    return R(kInvalidHandle);
  return cuMemcpy2D_v2(copy);
}

FAKE_API CUresult cuModuleLoadData(CUmodule *, const void *) {
  return R(kNotSupported);
}

FAKE_API CUresult cuModuleUnload(CUmodule) {
  return R(kInvalidHandle);
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *) {
  return R(kInvalidHandle);
}

FAKE_API CUresult cuTexObjectCreate(void *, const void *, const void *,
                                    const void *) {
  return R(kNotSupported);
}

FAKE_API CUresult cuTexObjectDestroy(unsigned long long) {
  return R(kInvalidHandle);
}

FAKE_API CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int,
                                 unsigned int, unsigned int, unsigned int,
                                 unsigned int, unsigned int, CUstream, void **,
                                 void **) {
  return R(kInvalidHandle);
}

FAKE_API CUresult cuGraphicsMapResources(unsigned int, void *, CUstream) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsUnmapResources(unsigned int, void *, CUstream) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsResourceSetMapFlags_v2(void *, unsigned int) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsSubResourceGetMappedArray(void *, void *,
                                                      unsigned int,
                                                      unsigned int) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsResourceGetMappedPointer_v2(CUdeviceptr *, size_t *,
                                                        void *) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsUnregisterResource(void *) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsGLRegisterImage(void *, unsigned int, unsigned int,
                                            unsigned int) {
  return R(kNotSupported);
}

FAKE_API CUresult cuGraphicsGLRegisterBuffer(void *, unsigned int,
                                             unsigned int) {
  return R(kNotSupported);
}

// No GL context has a CUDA device behind it.
FAKE_API CUresult cuGLGetDevices_v2(unsigned int *count, CUdevice *,
                                    unsigned int, int) {
  *count = 0;
  return R(kNotSupported);
}

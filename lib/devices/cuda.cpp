// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA back end over the driver loaded at run time (cuda-driver.cpp).
// cuda-none.cpp stands in for this file in a build without CUDA.
//
// Lock order: the stream-pool cache, then the primary-context cache. A pool's
// own mutex and the host-registration table are never held while taking
// either cache's lock.
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "cuda-driver-private.h"

namespace gpufan {
namespace cuda {

// cuda.h's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED.
constexpr int kPeerAccessAlreadyEnabled = 704;

using internal::Driver;
using internal::GlobalDriver;
using internal::RequireDriver;

namespace {

int Attribute(const Driver& driver, CUdevice device,
              CUdevice_attribute attribute) {
  int value = 0;
  GPUFAN_CU_CHECK(driver, cuDeviceGetAttribute(&value, attribute, device));
  return value;
}

// From cuda.h (CUcomputemode); not in dynlink_cuda.h.
constexpr int kComputeModeProhibited = 2;

// One device's description. Throws Error when the driver cannot describe it;
// returns false for a device no context may be made on.
bool DescribeDevice(const Driver& driver, int ordinal, Device *out,
                    std::string *why_skipped) {
  CUdevice device = 0;
  GPUFAN_CU_CHECK(driver, cuDeviceGet(&device, ordinal));
  if (Attribute(driver, device, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE) ==
      kComputeModeProhibited) {
    *why_skipped = "CUDA device " + std::to_string(ordinal) +
                   " is in compute mode prohibited";
    return false;
  }

  Device d;
  d.kind = DeviceKind::kCuda;
  d.index = ordinal;

  char name[256] = {};
  GPUFAN_CU_CHECK(driver,
                  cuDeviceGetName(name, static_cast<int>(sizeof name), device));
  name[sizeof name - 1] = '\0';
  d.name = name;

  CUuuid uuid;
  GPUFAN_CU_CHECK(driver, cuDeviceGetUuid(&uuid, device));
  std::array<unsigned char, 16> bytes;
  std::copy(std::begin(uuid.bytes), std::end(uuid.bytes), bytes.begin());
  d.uuid = internal::FormatUuid(bytes);

  char bus_id[64] = {};
  GPUFAN_CU_CHECK(driver, cuDeviceGetPCIBusId(
                              bus_id, static_cast<int>(sizeof bus_id), device));
  bus_id[sizeof bus_id - 1] = '\0';
  d.pci_bus_id = internal::NormalizePciBusId(bus_id);

  size_t total = 0;
  GPUFAN_CU_CHECK(driver, cuDeviceTotalMem_v2(&total, device));
  d.total_memory = total;
  d.cc_major =
      Attribute(driver, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d.cc_minor =
      Attribute(driver, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);

  // The codec probes need a context; a device that will not give one (held
  // exclusively by another process, say) is still listed, codecs unknown.
  try {
    const std::shared_ptr<PrimaryContext> context =
        PrimaryContext::Retain(ordinal);
    const auto handle = static_cast<CUcontext>(context->handle());
    d.nvdec = internal::ProbeNvdec(driver, handle);
    d.nvenc = internal::ProbeNvenc(handle);
  } catch (const Error&) {}
  *out = std::move(d);
  return true;
}

void DiscoverNow(std::vector<Device> *devices, std::string *why_none) {
  const Driver *driver = GlobalDriver(why_none);
  if (driver == nullptr)
    return;
  try {
    int count = 0;
    GPUFAN_CU_CHECK(*driver, cuDeviceGetCount(&count));
    if (count <= 0) {
      *why_none = "the CUDA driver reports no device";
      return;
    }
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      // One device the driver cannot describe must not hide the others.
      try {
        Device device;
        if (DescribeDevice(*driver, ordinal, &device, why_none))
          devices->push_back(std::move(device));
      } catch (const Error& e) {
        *why_none = "CUDA device " + std::to_string(ordinal) + ": " + e.what();
      }
    }
  } catch (const Error& e) {
    *why_none = e.what();
  }
  if (!devices->empty())
    why_none->clear();
}

}  // namespace

bool Available(std::string *why_not) {
  return GlobalDriver(why_not) != nullptr;
}

std::vector<Device> Discover(std::string *why_none) {
  static std::once_flag once;
  static std::vector<Device> devices;
  static std::string reason;
  std::call_once(once, [] { DiscoverNow(&devices, &reason); });
  if (why_none != nullptr)
    *why_none = reason;
  return devices;
}

uint64_t FreeMemory(int ordinal) {
  const Driver& driver = RequireDriver();
  const std::shared_ptr<PrimaryContext> context =
      PrimaryContext::Retain(ordinal);
  PrimaryContext::ScopedPush push(*context);
  size_t free = 0;
  size_t total = 0;
  GPUFAN_CU_CHECK(driver, cuMemGetInfo_v2(&free, &total));
  return free;
}

bool EnablePeerAccess(int ordinal, int peer) {
  static std::mutex lock;
  static std::map<std::pair<int, int>, bool> known;  // guarded by lock
  const Driver *driver = GlobalDriver();
  if (driver == nullptr)
    return false;
  std::lock_guard<std::mutex> lk(lock);
  const auto it = known.find({ordinal, peer});
  if (it != known.end())
    return it->second;
  bool on = false;
  try {
    const std::shared_ptr<PrimaryContext> mine =
        PrimaryContext::Retain(ordinal);
    const std::shared_ptr<PrimaryContext> theirs = PrimaryContext::Retain(peer);
    int can = 0;
    if (driver->cuDeviceCanAccessPeer(&can, mine->device(), theirs->device()) ==
            CUDA_SUCCESS &&
        can) {
      PrimaryContext::ScopedPush push(*mine);
      const CUresult result = driver->cuCtxEnablePeerAccess(
          static_cast<CUcontext>(theirs->handle()), 0);
      on = result == CUDA_SUCCESS ||
           static_cast<int>(result) == kPeerAccessAlreadyEnabled;
    }
    // The contexts stay retained while peer access is on: releasing the
    // last hold would take it back.
    if (on) {
      static std::vector<std::shared_ptr<PrimaryContext>> kept;
      kept.push_back(mine);
      kept.push_back(theirs);
    }
  } catch (const Error&) {
    on = false;
  }
  known[{ordinal, peer}] = on;
  return on;
}

namespace {

CUDA_MEMCPY2D Copy2D(const Plane2D& plane, CUmemorytype src_type,
                     const void *src_host, CUmemorytype dst_type,
                     void *dst_host) {
  CUDA_MEMCPY2D copy = {};
  copy.srcMemoryType = src_type;
  copy.srcHost = src_host;
  copy.srcDevice = static_cast<CUdeviceptr>(plane.src);
  copy.srcPitch = plane.src_pitch;
  copy.dstMemoryType = dst_type;
  copy.dstHost = dst_host;
  copy.dstDevice = static_cast<CUdeviceptr>(plane.dst);
  copy.dstPitch = plane.dst_pitch;
  copy.WidthInBytes = plane.width_bytes;
  copy.Height = plane.height;
  return copy;
}

}  // namespace

void CopyPlanesOnDevice(int ordinal, void *stream,
                        const std::vector<Plane2D>& planes) {
  const Driver& driver = RequireDriver();
  const std::shared_ptr<PrimaryContext> context =
      PrimaryContext::Retain(ordinal);
  PrimaryContext::ScopedPush push(*context);
  for (const Plane2D& plane : planes) {
    const CUDA_MEMCPY2D copy = Copy2D(plane, CU_MEMORYTYPE_DEVICE, nullptr,
                                      CU_MEMORYTYPE_DEVICE, nullptr);
    GPUFAN_CU_CHECK(driver,
                    cuMemcpy2DAsync_v2(&copy, static_cast<CUstream>(stream)));
  }
  GPUFAN_CU_CHECK(driver, cuStreamSynchronize(static_cast<CUstream>(stream)));
}

namespace {

// A run of rows of one plane, and where it sits in the host buffer.
struct RowChunk {
  Plane2D part;        // the plane's rows [first, first + rows)
  size_t host_offset;  // packed rows in the host buffer
};

// The planes cut into runs of about kViaHostChunkBytes, in order.
constexpr size_t kViaHostChunkBytes = size_t{1} << 20;
std::vector<RowChunk> RowChunks(const std::vector<Plane2D>& planes) {
  std::vector<RowChunk> chunks;
  size_t host = 0;
  for (const Plane2D& plane : planes) {
    const size_t rows_per_chunk = std::max<size_t>(
        1, kViaHostChunkBytes / std::max<size_t>(plane.width_bytes, 1));
    for (size_t first = 0; first < plane.height; first += rows_per_chunk) {
      RowChunk chunk{plane, host};
      chunk.part.height = std::min(rows_per_chunk, plane.height - first);
      chunk.part.src = plane.src + first * plane.src_pitch;
      chunk.part.dst = plane.dst + first * plane.dst_pitch;
      chunks.push_back(chunk);
      host += chunk.part.width_bytes * chunk.part.height;
    }
  }
  return chunks;
}

}  // namespace

void CopyPlanesViaHost(int src_ordinal, void *src_stream, int dst_ordinal,
                       void *dst_stream, void *host,
                       const std::vector<Plane2D>& planes) {
  const Driver& driver = RequireDriver();
  auto *staged = static_cast<unsigned char *>(host);
  const std::shared_ptr<PrimaryContext> source =
      PrimaryContext::Retain(src_ordinal);
  const std::shared_ptr<PrimaryContext> destination =
      PrimaryContext::Retain(dst_ordinal);
  const auto up_stream = static_cast<CUstream>(dst_stream);
  const auto down_stream = static_cast<CUstream>(src_stream);
  // One event: each wait takes the state of the record made just before it.
  CUevent down_done = nullptr;
  {
    PrimaryContext::ScopedPush push(*source);
    GPUFAN_CU_CHECK(driver, cuEventCreate(&down_done, CU_EVENT_DISABLE_TIMING));
  }
  // Pipelined: run k goes up on the destination's stream while run k + 1
  // comes down on the source's (the two directions use separate engines).
  try {
    for (const RowChunk& chunk : RowChunks(planes)) {
      Plane2D down = chunk.part;
      down.dst_pitch = chunk.part.width_bytes;  // packed rows in the host
      Plane2D up = chunk.part;
      up.src_pitch = chunk.part.width_bytes;
      {
        PrimaryContext::ScopedPush push(*source);
        const CUDA_MEMCPY2D copy =
            Copy2D(down, CU_MEMORYTYPE_DEVICE, nullptr, CU_MEMORYTYPE_HOST,
                   staged + chunk.host_offset);
        GPUFAN_CU_CHECK(driver, cuMemcpy2DAsync_v2(&copy, down_stream));
        GPUFAN_CU_CHECK(driver, cuEventRecord(down_done, down_stream));
      }
      PrimaryContext::ScopedPush push(*destination);
      GPUFAN_CU_CHECK(driver, cuStreamWaitEvent(up_stream, down_done, 0));
      const CUDA_MEMCPY2D copy =
          Copy2D(up, CU_MEMORYTYPE_HOST, staged + chunk.host_offset,
                 CU_MEMORYTYPE_DEVICE, nullptr);
      GPUFAN_CU_CHECK(driver, cuMemcpy2DAsync_v2(&copy, up_stream));
    }
    PrimaryContext::ScopedPush push(*destination);
    GPUFAN_CU_CHECK(driver, cuStreamSynchronize(up_stream));
  } catch (...) {
    // both streams idle before the host buffer, the frames and the event go
    {
      PrimaryContext::ScopedPush push(*destination);
      driver.cuStreamSynchronize(up_stream);
    }
    PrimaryContext::ScopedPush push(*source);
    driver.cuStreamSynchronize(down_stream);
    driver.cuEventDestroy_v2(down_done);
    throw;
  }
  PrimaryContext::ScopedPush push(*source);
  driver.cuEventDestroy_v2(down_done);
}

std::string StickyError(int ordinal) {
  // cuda.h's errors after which the context is unusable for good.
  static constexpr int kSticky[] = {
      214,  // CUDA_ERROR_ECC_UNCORRECTABLE
      700,  // CUDA_ERROR_ILLEGAL_ADDRESS
      714,  // CUDA_ERROR_HARDWARE_STACK_ERROR
      715,  // CUDA_ERROR_ILLEGAL_INSTRUCTION
      716,  // CUDA_ERROR_MISALIGNED_ADDRESS
      717,  // CUDA_ERROR_INVALID_ADDRESS_SPACE
      718,  // CUDA_ERROR_INVALID_PC
      719,  // CUDA_ERROR_LAUNCH_FAILED
  };
  const Driver *driver = GlobalDriver();
  if (driver == nullptr)
    return "";
  try {
    const std::shared_ptr<PrimaryContext> context =
        PrimaryContext::Retain(ordinal);
    PrimaryContext::ScopedPush push(*context);
    // A call that does not wait for the device (a hung one must not hang
    // us): a context in a sticky error answers every call with it.
    size_t free = 0, total = 0;
    const CUresult result = driver->cuMemGetInfo_v2(&free, &total);
    const int code = static_cast<int>(result);
    if (std::find(std::begin(kSticky), std::end(kSticky), code) ==
        std::end(kSticky))
      return "";
    const char *name = nullptr;
    const char *text = nullptr;
    driver->cuGetErrorName(result, &name);
    driver->cuGetErrorString(result, &text);
    return std::string(name ? name : "CUDA error") + " (" +
           std::to_string(code) + "): " + (text ? text : "");
  } catch (const Error& e) {
    // A context that cannot even be made current says so with its own
    // error, and the push fails before the synchronize tells it.
    const std::string what = e.what();
    for (int code : kSticky)
      if (e.code() == code)
        return what;
    return "";
  }
}

namespace {

// Host memory registered through RegisterHost(), each with the context it was
// registered in: the registration belongs to that context, so the context is
// kept retained until UnregisterHost().
struct HostRegistrations {
  std::mutex mutex;
  std::map<void *, std::shared_ptr<PrimaryContext>> contexts;  // guarded
};

HostRegistrations& Registrations() {
  static HostRegistrations registrations;
  return registrations;
}

}  // namespace

void RegisterHost(void *p, size_t bytes) {
  if (p == nullptr || bytes == 0)
    throw Error("RegisterHost: null pointer or zero size");
  const Driver& driver = RequireDriver();
  HostRegistrations& registrations = Registrations();
  {
    std::lock_guard<std::mutex> lock(registrations.mutex);
    if (registrations.contexts.count(p) != 0)
      throw Error("RegisterHost: memory already registered");
  }
  // Any device's context will do (PORTABLE): take the first usable one.
  std::string why_none;
  const std::vector<Device> devices = Discover(&why_none);
  if (devices.empty())
    throw Error("RegisterHost: no CUDA device: " + why_none);
  std::shared_ptr<PrimaryContext> context =
      PrimaryContext::Retain(devices.front().index);
  {
    // Pinning takes long (page by page): not under the table's lock. The
    // driver itself refuses a range registered twice.
    PrimaryContext::ScopedPush push(*context);
    GPUFAN_CU_CHECK(driver, cuMemHostRegister_v2(
                                p, bytes, internal::kMemHostRegisterPortable));
  }
  std::lock_guard<std::mutex> lock(registrations.mutex);
  registrations.contexts[p] = std::move(context);
}

void UnregisterHost(void *p) {
  const Driver& driver = RequireDriver();
  HostRegistrations& registrations = Registrations();
  std::shared_ptr<PrimaryContext> context;
  {
    std::lock_guard<std::mutex> lock(registrations.mutex);
    const auto it = registrations.contexts.find(p);
    if (it == registrations.contexts.end())
      throw Error("UnregisterHost: memory not registered by RegisterHost");
    context = std::move(it->second);
    registrations.contexts.erase(it);
  }
  try {
    PrimaryContext::ScopedPush push(*context);
    GPUFAN_CU_CHECK(driver, cuMemHostUnregister(p));
  } catch (const Error&) {
    // Still registered as far as we know: a later call may retry.
    std::lock_guard<std::mutex> lock(registrations.mutex);
    registrations.contexts.emplace(p, std::move(context));
    throw;
  }
}

// PrimaryContext ------------------------------------------------------------

std::shared_ptr<PrimaryContext> PrimaryContext::Retain(int ordinal) {
  const Driver& driver = RequireDriver();
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<PrimaryContext>> cache;  // guarded
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = cache.find(ordinal);
  if (it != cache.end()) {
    if (std::shared_ptr<PrimaryContext> context = it->second.lock())
      return context;
  }
  // The last holder may be releasing its retain right now, outside this
  // lock: the driver counts retains, so a second object for a moment is
  // harmless.
  CUdevice device = 0;
  GPUFAN_CU_CHECK(driver, cuDeviceGet(&device, ordinal));
  CUcontext context = nullptr;
  GPUFAN_CU_CHECK(driver, cuDevicePrimaryCtxRetain(&context, device));
  std::shared_ptr<PrimaryContext> shared(
      new PrimaryContext(ordinal, device, context));
  cache[ordinal] = shared;
  return shared;
}

PrimaryContext::PrimaryContext(int ordinal, int device, void *context)
    : ordinal_(ordinal), device_(device), context_(context) {}

PrimaryContext::~PrimaryContext() {
  // Exists only if the driver was loaded, and the driver is never unloaded.
  const Driver *driver = GlobalDriver();
  driver->cuDevicePrimaryCtxRelease_v2(static_cast<CUdevice>(device_));
}

PrimaryContext::ScopedPush::ScopedPush(const PrimaryContext& context) {
  GPUFAN_CU_CHECK(
      RequireDriver(),
      cuCtxPushCurrent_v2(static_cast<CUcontext>(context.handle())));
}

PrimaryContext::ScopedPush::~ScopedPush() {
  CUcontext popped = nullptr;
  GlobalDriver()->cuCtxPopCurrent_v2(&popped);
}

// StreamPool ----------------------------------------------------------------

std::shared_ptr<StreamPool> StreamPool::ForDevice(int ordinal,
                                                  size_t max_streams) {
  if (max_streams == 0)
    throw std::invalid_argument("StreamPool: max_streams must be at least 1");
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<StreamPool>> cache;  // guarded
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = cache.find(ordinal);
  if (it != cache.end()) {
    if (std::shared_ptr<StreamPool> pool = it->second.lock()) {
      pool->RaiseBound(max_streams);
      return pool;
    }
  }
  std::shared_ptr<StreamPool> pool(
      new StreamPool(PrimaryContext::Retain(ordinal), max_streams));
  cache[ordinal] = pool;
  return pool;
}

StreamPool::StreamPool(std::shared_ptr<PrimaryContext> context,
                       size_t max_streams)
    : context_(std::move(context)), max_streams_(max_streams) {}

StreamPool::~StreamPool() {
  // Every lease holds the pool, so every stream is idle here. Destroying a
  // stream with work queued is allowed: the driver frees it when it is done.
  const Driver *driver = GlobalDriver();
  if (all_.empty() || driver->cuCtxPushCurrent_v2(static_cast<CUcontext>(
                          context_->handle())) != CUDA_SUCCESS)
    return;
  for (void *stream : all_)
    driver->cuStreamDestroy_v2(static_cast<CUstream>(stream));
  CUcontext popped = nullptr;
  driver->cuCtxPopCurrent_v2(&popped);
}

StreamPool::Stream StreamPool::Acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  void *stream = nullptr;
  if (!idle_.empty()) {
    stream = idle_.back();
    idle_.pop_back();
  } else if (all_.size() < max_streams_) {
    // Room first, so that Give() never allocates and nothing leaks a stream.
    all_.reserve(all_.size() + 1);
    idle_.reserve(all_.size() + 1);
    const Driver& driver = RequireDriver();
    PrimaryContext::ScopedPush push(*context_);
    CUstream created = nullptr;
    GPUFAN_CU_CHECK(driver, cuStreamCreate(&created, CU_STREAM_NON_BLOCKING));
    all_.push_back(created);
    stream = created;
  } else {
    throw StreamPoolExhausted(
        "stream pool of CUDA device " + std::to_string(context_->ordinal()) +
        " exhausted: all " + std::to_string(max_streams_) +
        " streams are leased");
  }
  ++leased_;
  peak_leased_ = std::max(peak_leased_, leased_);
  lock.unlock();
  return Stream(shared_from_this(), stream);
}

}  // namespace cuda
}  // namespace gpufan

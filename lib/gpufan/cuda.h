// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA back end: devices, primary contexts, bounded stream pools and host
// memory pinning. The driver (libcuda.so.1) is loaded at run time, so this
// header holds no CUDA type: contexts and streams travel as void *.
//
// Every entry point works in a build without CUDA and on a machine without an
// NVIDIA driver: Available() says false and why, Discover() finds nothing,
// and the others throw Error with that reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/host-pool.h"
#include "gpufan/prelude.h"

namespace gpufan {
namespace cuda {

// A failed CUDA driver call, or the reason there is no driver to call.
// Thread-safety: immutable value.
class GPUFAN_API Error : public std::runtime_error {
 public:
  // code() of an error that no driver call returned (no driver, built
  // without CUDA, a bad argument).
  static constexpr int kNoCode = -1;

  // A driver call that returned `code` (a CUresult). `name` is the driver's
  // name for it ("CUDA_ERROR_OUT_OF_MEMORY"), `description` its text.
  Error(int code, std::string name, const std::string& description,
        std::string call, std::string file, int line);
  // No driver result: code() is kNoCode and what() is `message`.
  explicit Error(const std::string& message);

  int code() const { return code_; }
  const std::string& name() const { return name_; }  // empty with kNoCode
  const std::string& call() const { return call_; }  // the source text
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  int code_ = kNoCode;
  std::string name_;
  std::string call_;
  std::string file_;
  int line_ = 0;
};

// Every stream of a StreamPool is leased. Callers back off (or fail the
// frame); there is deliberately no fall-back to the default stream, which
// would serialise the device behind the caller's back.
class GPUFAN_API StreamPoolExhausted : public Error {
 public:
  using Error::Error;
};

// True when the driver is loaded and cuInit(0) succeeded. Otherwise false and
// *why_not (when given) says why, e.g. "libcuda.so.1 not found (no NVIDIA
// driver): ..." or "cuInit failed: CUDA_ERROR_NO_DEVICE". The driver is
// looked up once per process: $GPUFAN_LIBCUDA names another library file.
// Thread-safe.
GPUFAN_API bool Available(std::string *why_not = nullptr);

// Every CUDA device, ordered by ordinal: kind kCuda, index = ordinal, name,
// uuid, pci_bus_id (sysfs form, see device.h), total_memory, compute
// capability, and NVENC/NVDEC support where the codec libraries can tell.
// numa_node and local_cpus are left for the topology code to fill. Empty when
// there is none, and *why_none (when given) says why. Computed once per
// process, since the driver fixes its device list at cuInit; that first call
// is slow (the codec probes make each device's primary context). Thread-safe.
GPUFAN_API std::vector<Device> Discover(std::string *why_none = nullptr);

// Free device memory in bytes, read now. Retains the device's primary context
// for the call, which creates it when nobody holds it (slow, and it takes
// device memory): callers that poll should hold a PrimaryContext.
// Throws Error. Thread-safe.
GPUFAN_API uint64_t FreeMemory(int ordinal);

// Whether GPU `ordinal` shows a sticky error: its primary context answers
// a call that does not wait for the device (cuMemGetInfo) with an error
// after which no context on the device works until the process ends (an
// illegal address, a launch failure, an uncorrectable ECC error, ...). The
// error's name and text, or "" when the device answers (or there is no
// driver: nothing to tell). Retains the context for the call. Never
// throws; never waits for the device. Thread-safe.
GPUFAN_API std::string StickyError(int ordinal);

// Page-locks `bytes` of existing host memory at `p` for fast, asynchronous
// copies to any device. The registration is made PORTABLE, so every context
// sees the memory as pinned, not only the one current at registration: one
// NUMA host pool can feed lanes on several GPUs. Page-aligned `p` and
// `bytes` are safest (older drivers require them). Throws Error (also when
// `p` is already registered). Thread-safe.
GPUFAN_API void RegisterHost(void *p, size_t bytes);
// Undoes RegisterHost(p, ...); call it before the memory is freed. Throws
// Error when `p` was not registered here. Thread-safe.
GPUFAN_API void UnregisterHost(void *p);

// A device's primary context (the one the CUDA runtime and GStreamer's
// nvcodec elements use too), retained while this object lives. One object per
// device per process.
// Thread-safety: Retain() is thread-safe; the object is immutable. A context
// is current per thread: a ScopedPush must end on the thread it began on.
// A Pinner for HostPool that page-locks through RegisterHost/UnregisterHost;
// nullptr when there is no driver (Available() is false), so that a pool
// then gives NUMA-bound ordinary memory. Thread-safe.
GPUFAN_API std::shared_ptr<Pinner> MakeHostPinner();

// One plane of a 2D copy: `width_bytes` × `height` bytes from `src` (rows
// `src_pitch` apart) to `dst` (rows `dst_pitch` apart). Device pointers
// (CUdeviceptr values).
struct Plane2D {
  uint64_t src = 0;
  size_t src_pitch = 0;
  uint64_t dst = 0;
  size_t dst_pitch = 0;
  size_t width_bytes = 0;
  size_t height = 0;
};

// The bytes `planes` move (width_bytes × height, summed).
GPUFAN_API size_t PlaneBytes(const std::vector<Plane2D>& planes);

// Whether GPU `ordinal` can read and write GPU `peer`'s memory directly
// (cuDeviceCanAccessPeer); if it can, peer access is turned on in
// `ordinal`'s primary context, once per pair per process. false when it
// cannot, when either GPU cannot be opened, or with no driver; never throws.
// Thread-safe.
GPUFAN_API bool EnablePeerAccess(int ordinal, int peer);

// Copies `planes` from device memory into device memory on `stream` (a stream
// of GPU `ordinal`'s primary context; nullptr: its default stream) and waits
// for them. A source on another GPU needs peer access on
// (EnablePeerAccess(ordinal, source's GPU)). Throws Error. Thread-safe.
GPUFAN_API void CopyPlanesOnDevice(int ordinal, void *stream,
                                   const std::vector<Plane2D>& planes);

// Copies `planes` from GPU `src_ordinal`'s memory into GPU `dst_ordinal`'s
// through pinned host memory `host` (at least PlaneBytes(planes)): runs of
// about 1 MiB come down on `src_stream` (of the source's primary context)
// and go up on `dst_stream` (of the destination's), each up waiting only for
// its own down, so the two directions overlap; waits for the last. Two
// streams even on one GPU. Throws Error, with both streams idle.
// Thread-safe.
GPUFAN_API void CopyPlanesViaHost(int src_ordinal, void *src_stream,
                                  int dst_ordinal, void *dst_stream, void *host,
                                  const std::vector<Plane2D>& planes);

class GPUFAN_API PrimaryContext {
 public:
  // The device's context, shared with every other holder. The first holder
  // retains it from the driver; the last one to drop it releases it.
  // Throws Error (no driver, bad ordinal, context creation failed).
  static std::shared_ptr<PrimaryContext> Retain(int ordinal);

  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  void *handle() const { return context_; }  // the CUcontext
  int ordinal() const { return ordinal_; }
  int device() const { return device_; }  // the CUdevice

  // Makes the context current on this thread for the scope. Throws Error when
  // the push fails; the pop in the destructor cannot report a failure.
  class GPUFAN_API ScopedPush {
   public:
    explicit ScopedPush(const PrimaryContext& context);
    ~ScopedPush();
    ScopedPush(const ScopedPush&) = delete;
    ScopedPush& operator=(const ScopedPush&) = delete;
  };

 private:
  PrimaryContext(int ordinal, int device, void *context);

  int ordinal_;
  int device_;  // the CUdevice
  void *context_;
};

// A bounded set of non-blocking streams (CU_STREAM_NON_BLOCKING, so they never
// wait on the legacy default stream) for one device, created on demand and
// reused. One pool per device per process.
// Thread-safety: every method is thread-safe. A Stream lease is a value owned
// by one thread at a time; it keeps its pool alive.
class GPUFAN_API StreamPool : public std::enable_shared_from_this<StreamPool> {
 public:
  struct Stats {
    size_t max_streams = 0;
    size_t created = 0;      // streams that exist (never more than the bound)
    size_t leased = 0;       // leased now
    size_t peak_leased = 0;  // most leased at once
  };

  // A leased stream, given back when the lease is destroyed or reset. Work
  // still queued on it is not waited for: the next lessee's work runs after
  // it, in stream order.
  class GPUFAN_API Stream {
   public:
    Stream() = default;
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    ~Stream();

    void *handle() const { return stream_; }  // the CUstream
    explicit operator bool() const { return stream_ != nullptr; }
    // Gives the stream back now.
    void Reset();

   private:
    friend class StreamPool;
    Stream(std::shared_ptr<StreamPool> pool, void *stream);

    std::shared_ptr<StreamPool> pool_;
    void *stream_ = nullptr;
  };

  // The pool of device `ordinal`, shared while anyone holds it. Its bound is
  // the largest max_streams asked for while it lives (a bound only grows, so
  // no holder loses a lease it was promised). Throws Error, and
  // std::invalid_argument when max_streams is 0.
  static std::shared_ptr<StreamPool> ForDevice(int ordinal, size_t max_streams);

  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  // An idle stream, or a new one while fewer than the bound exist. Throws
  // StreamPoolExhausted when all are leased, Error when creation fails.
  Stream Acquire();

  Stats stats() const;
  int ordinal() const;
  const std::shared_ptr<PrimaryContext>& context() const { return context_; }

 private:
  StreamPool(std::shared_ptr<PrimaryContext> context, size_t max_streams);
  void Give(void *stream);
  void RaiseBound(size_t max_streams);

  const std::shared_ptr<PrimaryContext> context_;
  mutable std::mutex mutex_;
  size_t max_streams_;        // guarded by mutex_
  std::vector<void *> idle_;  // guarded by mutex_
  std::vector<void *> all_;   // guarded by mutex_; every created stream
  size_t leased_ = 0;         // guarded by mutex_
  size_t peak_leased_ = 0;    // guarded by mutex_
};

}  // namespace cuda
}  // namespace gpufan

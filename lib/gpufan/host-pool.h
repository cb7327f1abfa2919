// SPDX-License-Identifier: LGPL-2.1-or-later
// Host memory pools, one per NUMA node: staging buffers for device transfers.
//
// Pinned host memory is expensive to get (page faults, then hundreds of ms per
// GiB to pin) and cheap to reuse, so a pool allocates a block once, hands it
// out again and again, and frees it only when it must make room (caps
// changed: other sizes needed) or when the pool goes away. Every pool is
// bounded by max_bytes.
//
// A new block is
//  1. bound to the pool's node (Topology::AllocateOnNode),
//  2. touched (written once per page) from a short-lived thread bound to the
//     node's CPUs, so that first-touch places it there even where the OS
//     refused the binding,
//  3. pinned through the Pinner, when there is one.
// Without a Pinner (no CUDA) the same pool gives NUMA-bound ordinary memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "gpufan/prelude.h"
#include "gpufan/topology.h"

namespace gpufan {

// Pins and unpins host memory for a device API (cuMemHostRegister /
// cuMemHostUnregister in the CUDA back end; a fake in tests).
// Thread-safety: implementations must be thread-safe; pools call them from
// whichever thread acquires a block or destroys the pool.
class GPUFAN_API Pinner {
 public:
  virtual ~Pinner() = default;
  // Throws on failure; the pool then frees the block and rethrows.
  virtual void Pin(void *p, size_t bytes) = 0;
  // May throw; the pool frees the memory regardless (see ~HostPool).
  virtual void Unpin(void *p) = 0;
};

// A block handed out by HostPool::Acquire(). Plain value type; the memory
// belongs to the pool and goes back with HostPool::Release().
struct GPUFAN_API HostBlock {
  void *data = nullptr;
  size_t size = 0;  // the size class: at least the bytes asked for
  int node = -1;    // the pool's NUMA node, -1: unknown
  bool pinned = false;
};

// Counters are totals since the pool was made; the others describe now.
struct GPUFAN_API HostPoolStats {
  uint64_t blocks_allocated = 0;  // new blocks (allocated, touched, pinned)
  uint64_t blocks_reused = 0;     // Acquire() calls served by an idle block
  uint64_t blocks_in_use = 0;
  uint64_t blocks_idle = 0;
  // Held by the pool, in use or idle, plus blocks being allocated.
  uint64_t bytes_reserved = 0;
  uint64_t bytes_pinned = 0;
  uint64_t bytes_node_bound = 0;  // bound to the node by the OS
  uint64_t evictions = 0;         // idle blocks freed to make room
  // Requests the pool's user served from other memory after Acquire() failed
  // (RecordFallback).
  uint64_t fallbacks = 0;
  // Every block allocated so far was touched from a thread bound to the
  // node's CPUs (false before the first block).
  bool touched_on_node = false;
};

// Acquire() could not stay within max_bytes, even after freeing every idle
// block.
class GPUFAN_API HostPoolExhausted : public std::runtime_error {
 public:
  HostPoolExhausted(int node, size_t requested, size_t limit, size_t in_use);

  int node() const { return node_; }
  size_t requested() const { return requested_; }  // the size class
  size_t limit() const { return limit_; }

 private:
  int node_;
  size_t requested_;
  size_t limit_;
};

// Thread-safety: every public method is thread-safe (one internal mutex, not
// held while memory is allocated, touched, pinned, unpinned or freed).
class GPUFAN_API HostPool {
 public:
  // `node` is a NUMA node OS index of `topology` or -1 (unknown: ordinary
  // memory). A null topology means Topology::System(); a null pinner means
  // no pinning. max_bytes bounds the bytes held (in use and idle).
  HostPool(int node, std::shared_ptr<const Topology> topology, size_t max_bytes,
           std::shared_ptr<Pinner> pinner);
  // Unpins and frees every block, including blocks still handed out: they
  // must not be used afterwards.
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // The process-wide pool of `node` (any negative node is -1, the pool of
  // "unknown"). The first caller creates it: while it lives, later callers
  // get that same pool whatever topology, max_bytes and pinner they pass
  // (first wins; check max_bytes()/pins() if it matters). The registry does
  // not keep pools alive: when the last holder drops one, it is freed and a
  // later call makes a new one. Holders that stream keep theirs, so steady
  // state never frees.
  static std::shared_ptr<HostPool> ForNode(
      int node, const std::shared_ptr<const Topology>& topology,
      size_t max_bytes, std::shared_ptr<Pinner> pinner);

  // The block size used for a request of `bytes`: rounded up to whole pages;
  // above 8 pages, further up to a multiple of 1/8 of the largest power of
  // two not above it, so at most 12.5% is added (1920x1080 NV12, 3110400
  // bytes, takes a 3 MiB block) and sizes that differ a little share blocks.
  // Throws std::bad_alloc for absurd sizes.
  static size_t SizeClass(size_t bytes);
  static size_t PageSize();

  // A block of at least `bytes` (> 0, else std::invalid_argument): an idle
  // block of the same size class if there is one, else a new one, freeing
  // idle blocks of other classes (least recently released first) when the
  // new one would exceed max_bytes. Throws HostPoolExhausted when it still
  // would, std::bad_alloc when memory cannot be had, or what the Pinner
  // threw; nothing is leaked then.
  HostBlock Acquire(size_t bytes);
  // Gives a block back for reuse. std::invalid_argument when it is not from
  // this pool or is already released.
  void Release(const HostBlock& block);
  // The pool's user served a request from other memory because Acquire()
  // failed (so that the statistics say how often). Returns the count before
  // this one: 0 the first time.
  uint64_t RecordFallback();

  HostPoolStats stats() const;
  int node() const { return node_; }
  size_t max_bytes() const { return max_bytes_; }
  bool pins() const { return pinner_ != nullptr; }

 private:
  struct Entry {
    size_t size = 0;
    bool in_use = true;
    bool pinned = false;
    bool bound = false;
    uint64_t released_at = 0;  // release_clock_ value, for least-recent
  };
  struct Victim {
    void *data;
    size_t size;
    bool pinned;
  };
  class Pending;

  // Removes the least recently released idle block from the books and
  // returns it (a null Victim when none is idle); the caller frees it outside
  // the lock.
  Victim EvictOneUnlocked();
  // Writes every page once; true when done from a thread bound to the
  // node's CPUs.
  bool TouchPages(void *p, size_t size) const;
  void FreeBlock(const Victim& victim) const;

  const int node_;
  const std::shared_ptr<const Topology> topology_;
  const size_t max_bytes_;
  const std::shared_ptr<Pinner> pinner_;

  mutable std::mutex mutex_;
  std::unordered_map<void *, Entry> blocks_;
  // Idle blocks by size class; the back is the most recently released (its
  // pages are likelier to be in cache).
  std::map<size_t, std::vector<void *>> idle_;
  uint64_t idle_bytes_ = 0;
  uint64_t release_clock_ = 0;
  bool touched_off_node_ = false;
  HostPoolStats stats_;
};

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/host-pool.h"

#include <unistd.h>

#include <limits>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace gpufan {

namespace {

std::string NodeName(int node) {
  return node < 0 ? std::string("unknown NUMA node")
                  : "NUMA node " + std::to_string(node);
}

void WritePages(void *p, size_t size, size_t page) {
  // volatile: the writes are the point (they fault the pages in), so the
  // compiler must not drop them.
  volatile char *bytes = static_cast<char *>(p);
  for (size_t offset = 0; offset < size; offset += page)
    bytes[offset] = 0;
}

}  // namespace

HostPoolExhausted::HostPoolExhausted(int node, size_t requested, size_t limit,
                                     size_t in_use)
    : std::runtime_error("host memory pool for " + NodeName(node) +
                         " exhausted: " + std::to_string(requested) +
                         " bytes requested, limit " + std::to_string(limit) +
                         " bytes, " + std::to_string(in_use) + " bytes in use"),
      node_(node),
      requested_(requested),
      limit_(limit) {}

// A block being made outside the lock: undoes what was done (unpin, free,
// the reservation) unless committed, so that any throw leaks nothing.
class HostPool::Pending {
 public:
  Pending(HostPool *pool, size_t size)
      : pool_(pool), victim_{nullptr, size, false} {}
  ~Pending() {
    if (committed_)
      return;
    pool_->FreeBlock(victim_);
    std::lock_guard<std::mutex> lock(pool_->mutex_);
    pool_->stats_.bytes_reserved -= victim_.size;
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

  Victim& block() { return victim_; }
  void Commit() { committed_ = true; }

 private:
  HostPool *pool_;
  Victim victim_;
  bool committed_ = false;
};

HostPool::HostPool(int node, std::shared_ptr<const Topology> topology,
                   size_t max_bytes, std::shared_ptr<Pinner> pinner)
    : node_(node < 0 ? -1 : node),
      topology_(topology ? std::move(topology) : Topology::System()),
      max_bytes_(max_bytes),
      pinner_(std::move(pinner)) {}

HostPool::~HostPool() {
  for (const auto& [data, entry] : blocks_)
    FreeBlock(Victim{data, entry.size, entry.pinned});
}

std::shared_ptr<HostPool> HostPool::ForNode(
    int node, const std::shared_ptr<const Topology>& topology, size_t max_bytes,
    std::shared_ptr<Pinner> pinner) {
  // Never destroyed: a pool may be dropped (and look itself up) during exit.
  static auto *mutex = new std::mutex;
  static auto *pools = new std::map<int, std::weak_ptr<HostPool>>;
  const int key = node < 0 ? -1 : node;
  std::lock_guard<std::mutex> lock(*mutex);
  std::weak_ptr<HostPool>& slot = (*pools)[key];
  if (std::shared_ptr<HostPool> pool = slot.lock())
    return pool;
  auto pool =
      std::make_shared<HostPool>(key, topology, max_bytes, std::move(pinner));
  slot = pool;
  return pool;
}

size_t HostPool::PageSize() {
  static const size_t page = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<size_t>(size) : size_t{4096};
  }();
  return page;
}

size_t HostPool::SizeClass(size_t bytes) {
  const size_t page = PageSize();
  if (bytes > std::numeric_limits<size_t>::max() / 4)
    throw std::bad_alloc();
  const size_t pages = (bytes + page - 1) / page;
  const size_t rounded = (pages == 0 ? 1 : pages) * page;
  if (pages <= 8)
    return rounded;
  size_t top = page * 8;
  while (top <= rounded / 2)
    top *= 2;
  // top is a power-of-two multiple of 8 pages, so step is whole pages.
  const size_t step = top / 8;
  return (rounded + step - 1) / step * step;
}

HostBlock HostPool::Acquire(size_t bytes) {
  if (bytes == 0)
    throw std::invalid_argument("HostPool::Acquire: zero bytes");
  const size_t size = SizeClass(bytes);
  std::vector<Victim> victims;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto idle = idle_.find(size);
    if (idle != idle_.end() && !idle->second.empty()) {
      void *data = idle->second.back();
      idle->second.pop_back();
      Entry& entry = blocks_.at(data);
      entry.in_use = true;
      idle_bytes_ -= size;
      ++stats_.blocks_reused;
      ++stats_.blocks_in_use;
      --stats_.blocks_idle;
      return HostBlock{data, size, node_, entry.pinned};
    }
    // Freeing idle blocks only helps when it is enough: otherwise the cache
    // would be lost for nothing.
    const uint64_t busy = stats_.bytes_reserved - idle_bytes_;
    if (size > max_bytes_ || busy > max_bytes_ - size)
      throw HostPoolExhausted(node_, size, max_bytes_, busy);
    while (stats_.bytes_reserved + size > max_bytes_) {
      const Victim victim = EvictOneUnlocked();
      if (victim.data == nullptr)
        break;  // not reached: the idle blocks were counted above
      victims.push_back(victim);
    }
    stats_.bytes_reserved += size;
  }
  // Evictions and the new block's work happen unlocked: pinning a large
  // block takes long, and Release() must stay fast meanwhile.
  for (const Victim& victim : victims)
    FreeBlock(victim);

  Pending pending(this, size);
  bool bound = false;
  pending.block().data = topology_->AllocateOnNode(size, node_, &bound);
  const bool on_node = TouchPages(pending.block().data, size);
  if (pinner_) {
    pinner_->Pin(pending.block().data, size);
    pending.block().pinned = true;
  }

  std::lock_guard<std::mutex> lock(mutex_);
  Entry entry;
  entry.size = size;
  entry.pinned = pending.block().pinned;
  entry.bound = bound;
  blocks_.emplace(pending.block().data, entry);
  pending.Commit();
  ++stats_.blocks_allocated;
  ++stats_.blocks_in_use;
  if (entry.pinned)
    stats_.bytes_pinned += size;
  if (bound)
    stats_.bytes_node_bound += size;
  touched_off_node_ = touched_off_node_ || !on_node;
  stats_.touched_on_node = !touched_off_node_;
  return HostBlock{pending.block().data, size, node_, entry.pinned};
}

void HostPool::Release(const HostBlock& block) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(block.data);
  if (it == blocks_.end())
    throw std::invalid_argument(
        "HostPool::Release: block is not from this pool");
  Entry& entry = it->second;
  if (!entry.in_use)
    throw std::invalid_argument("HostPool::Release: block released twice");
  // First what may throw (bad_alloc), so that a failure changes nothing.
  idle_[entry.size].push_back(block.data);
  entry.in_use = false;
  entry.released_at = ++release_clock_;
  idle_bytes_ += entry.size;
  --stats_.blocks_in_use;
  ++stats_.blocks_idle;
}

uint64_t HostPool::RecordFallback() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.fallbacks++;
}

HostPoolStats HostPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

HostPool::Victim HostPool::EvictOneUnlocked() {
  // The front of each class is its least recently released block.
  std::vector<void *> *oldest = nullptr;
  for (auto& [size, list] : idle_) {
    if (!list.empty() &&
        (oldest == nullptr || blocks_.at(list.front()).released_at <
                                  blocks_.at(oldest->front()).released_at))
      oldest = &list;
  }
  if (oldest == nullptr)
    return Victim{nullptr, 0, false};
  void *data = oldest->front();
  oldest->erase(oldest->begin());
  auto node = blocks_.extract(data);
  const Entry& entry = node.mapped();
  // A class emptied by eviction is likely gone with the old caps; a class
  // emptied by Acquire() keeps its list, to be refilled without allocating.
  if (oldest->empty())
    idle_.erase(entry.size);
  idle_bytes_ -= entry.size;
  --stats_.blocks_idle;
  ++stats_.evictions;
  stats_.bytes_reserved -= entry.size;
  if (entry.pinned)
    stats_.bytes_pinned -= entry.size;
  if (entry.bound)
    stats_.bytes_node_bound -= entry.size;
  return Victim{data, entry.size, entry.pinned};
}

bool HostPool::TouchPages(void *p, size_t size) const {
  const size_t page = PageSize();
  const std::vector<int> cpus = topology_->is_this_system()
                                    ? topology_->CpusOfNode(node_)
                                    : std::vector<int>();
  if (!cpus.empty()) {
    bool on_node = false;
    try {
      std::thread toucher([&] {
        try {
          on_node = topology_->BindCurrentThread(cpus, nullptr);
        } catch (...) {
          // Out of memory for a cpuset: an exception must not end a thread.
        }
        WritePages(p, size, page);
      });
      toucher.join();
      return on_node;
    } catch (const std::system_error&) {
      // No thread to be had: touch from here, unbound.
    }
  }
  WritePages(p, size, page);
  return false;
}

void HostPool::FreeBlock(const Victim& victim) const {
  if (victim.data == nullptr)
    return;
  if (victim.pinned) {
    try {
      pinner_->Unpin(victim.data);
    } catch (...) {
      // Nothing better to do: the memory goes anyway, and the device API
      // drops its registration of freed pages when the context goes.
    }
  }
  topology_->Free(victim.data, victim.size);
}

}  // namespace gpufan

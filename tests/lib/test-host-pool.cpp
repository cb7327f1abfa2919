// SPDX-License-Identifier: LGPL-2.1-or-later
// HostPool: size classes, reuse, the bound, eviction, pinning, concurrency,
// node binding on this machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpufan/host-pool.h"
#include "gpufan/topology.h"

namespace gpufan {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Counts calls and checks they pair up; Pin throws while fail_pins > 0.
class FakePinner : public Pinner {
 public:
  void Pin(void *p, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_pins > 0) {
      --fail_pins;
      throw std::runtime_error("fake pin failure");
    }
    EXPECT_TRUE(pinned_.insert(p).second) << "pinned twice";
    ++pins;
    pinned_bytes += bytes;
  }
  void Unpin(void *p) override {
    std::lock_guard<std::mutex> lock(mutex_);
    EXPECT_EQ(pinned_.erase(p), 1u) << "unpinned without a pin";
    ++unpins;
    if (throw_on_unpin)
      throw std::runtime_error("fake unpin failure");
  }
  size_t still_pinned() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pinned_.size();
  }

  std::atomic<int> pins{0};
  std::atomic<int> unpins{0};
  std::atomic<size_t> pinned_bytes{0};
  int fail_pins = 0;  // set before use
  bool throw_on_unpin = false;

 private:
  std::mutex mutex_;
  std::set<void *> pinned_;
};

// Node 0 of this machine: NUMA-bound where hwloc is, ordinary memory if not.
std::unique_ptr<HostPool> MakePool(size_t max_bytes,
                                   std::shared_ptr<Pinner> pinner = nullptr) {
  return std::make_unique<HostPool>(0, Topology::System(), max_bytes,
                                    std::move(pinner));
}

TEST(HostPool, SizeClasses) {
  const size_t page = HostPool::PageSize();
  EXPECT_EQ(HostPool::SizeClass(1), page);
  EXPECT_EQ(HostPool::SizeClass(page), page);
  EXPECT_EQ(HostPool::SizeClass(page + 1), 2 * page);
  EXPECT_EQ(HostPool::SizeClass(8 * page), 8 * page);
  EXPECT_EQ(HostPool::SizeClass(9 * page - 3), 9 * page);
  EXPECT_EQ(HostPool::SizeClass(17 * page), 18 * page);  // step 2 pages
  if (page == 4096) {
    EXPECT_EQ(HostPool::SizeClass(1920 * 1080 * 3 / 2), 3 * kMiB);
  }
  size_t previous = 0;
  for (size_t bytes = 1; bytes < 64 * kMiB; bytes = bytes * 9 / 8 + 4093) {
    const size_t c = HostPool::SizeClass(bytes);
    EXPECT_EQ(c % page, 0u) << bytes;
    EXPECT_GE(c, bytes);
    const size_t page_rounded = (bytes + page - 1) / page * page;
    EXPECT_LE(c, page_rounded + page_rounded / 8) << bytes;
    EXPECT_GE(c, previous) << bytes;
    previous = c;
  }
}

TEST(HostPool, ReusesBlocksOfTheSameClass) {
  auto pool = MakePool(16 * kMiB);
  const HostBlock a = pool->Acquire(3 * kMiB - 100);
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(a.size, 3 * kMiB);
  EXPECT_EQ(a.node, 0);
  EXPECT_FALSE(a.pinned);
  std::memset(a.data, 0xab, a.size);
  pool->Release(a);

  // A little smaller, same class: the same block again.
  const HostBlock b = pool->Acquire(3 * kMiB - 5000);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.size, a.size);
  HostPoolStats s = pool->stats();
  EXPECT_EQ(s.blocks_allocated, 1u);
  EXPECT_EQ(s.blocks_reused, 1u);
  EXPECT_EQ(s.blocks_in_use, 1u);
  EXPECT_EQ(s.blocks_idle, 0u);
  EXPECT_EQ(s.bytes_reserved, 3 * kMiB);
  EXPECT_EQ(s.bytes_pinned, 0u);

  // Another class while b is out: a new block.
  const HostBlock c = pool->Acquire(kMiB);
  EXPECT_NE(c.data, b.data);
  pool->Release(b);
  pool->Release(c);
  s = pool->stats();
  EXPECT_EQ(s.blocks_allocated, 2u);
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.blocks_idle, 2u);
  EXPECT_EQ(s.bytes_reserved, 4 * kMiB);
  EXPECT_EQ(s.evictions, 0u);
}

TEST(HostPool, CapsChangeEvictsLeastRecentlyReleasedIdleBlocks) {
  auto pinner = std::make_shared<FakePinner>();
  auto pool = MakePool(4 * kMiB, pinner);
  std::vector<HostBlock> small;
  for (int i = 0; i < 4; ++i)
    small.push_back(pool->Acquire(kMiB));
  for (const HostBlock& b : small)
    pool->Release(b);
  EXPECT_EQ(pinner->pins, 4);

  // New caps, bigger frames: room for one 2 MiB block takes the two blocks
  // released first.
  const HostBlock big = pool->Acquire(2 * kMiB);
  HostPoolStats s = pool->stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.blocks_allocated, 5u);
  EXPECT_EQ(s.blocks_idle, 2u);
  EXPECT_EQ(s.bytes_reserved, 4 * kMiB);
  EXPECT_EQ(s.bytes_pinned, 4 * kMiB);
  EXPECT_EQ(pinner->unpins, 2);

  const HostBlock r1 = pool->Acquire(kMiB);
  const HostBlock r2 = pool->Acquire(kMiB);
  const std::set<void *> kept{r1.data, r2.data};
  EXPECT_EQ(kept, (std::set<void *>{small[2].data, small[3].data}));
  EXPECT_EQ(pool->stats().blocks_reused, 2u);
  pool->Release(big);
  pool->Release(r1);
  pool->Release(r2);
  pool.reset();
  EXPECT_EQ(pinner->unpins, 5);
  EXPECT_EQ(pinner->still_pinned(), 0u);
}

TEST(HostPool, ExhaustedWhenBlocksInUseFillTheLimit) {
  auto pool = MakePool(3 * kMiB);
  const HostBlock in_use = pool->Acquire(kMiB);
  pool->Release(pool->Acquire(kMiB));  // one idle 1 MiB block

  // Freeing the idle block would not be enough: it stays.
  try {
    pool->Acquire(2 * kMiB + kMiB / 2);
    FAIL() << "no HostPoolExhausted";
  } catch (const HostPoolExhausted& e) {
    EXPECT_EQ(e.node(), 0);
    EXPECT_EQ(e.requested(), 2 * kMiB + kMiB / 2);
    EXPECT_EQ(e.limit(), 3 * kMiB);
    const std::string what = e.what();
    EXPECT_NE(what.find("NUMA node 0"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(3 * kMiB)), std::string::npos) << what;
  }
  EXPECT_THROW(pool->Acquire(4 * kMiB), HostPoolExhausted);
  HostPoolStats s = pool->stats();
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.blocks_idle, 1u);
  EXPECT_EQ(s.bytes_reserved, 2 * kMiB);

  // Enough with the idle block freed.
  const HostBlock two = pool->Acquire(2 * kMiB);
  s = pool->stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.bytes_reserved, 3 * kMiB);
  EXPECT_THROW(pool->Acquire(1), HostPoolExhausted);
  pool->Release(two);
  pool->Release(in_use);
}

TEST(HostPool, PinnerPinsEveryBlockOnceAndUnpinsOnDestruction) {
  auto pinner = std::make_shared<FakePinner>();
  auto pool = MakePool(64 * kMiB, pinner);
  EXPECT_TRUE(pool->pins());
  std::vector<HostBlock> blocks;
  for (size_t size : {kMiB, 2 * kMiB, 100 * size_t{1000}})
    blocks.push_back(pool->Acquire(size));
  for (const HostBlock& b : blocks) {
    EXPECT_TRUE(b.pinned);
    pool->Release(b);
  }
  for (int i = 0; i < 10; ++i)
    pool->Release(pool->Acquire(kMiB));
  EXPECT_EQ(pinner->pins, 3);
  EXPECT_EQ(pinner->pinned_bytes, pool->stats().bytes_reserved);
  EXPECT_EQ(pool->stats().bytes_pinned, pool->stats().bytes_reserved);
  EXPECT_EQ(pinner->unpins, 0);
  pool.reset();
  EXPECT_EQ(pinner->unpins, 3);
  EXPECT_EQ(pinner->still_pinned(), 0u);
}

TEST(HostPool, PinFailurePropagatesAndLeavesNothingBehind) {
  auto pinner = std::make_shared<FakePinner>();
  pinner->fail_pins = 1;
  auto pool = MakePool(kMiB, pinner);
  EXPECT_THROW(pool->Acquire(kMiB), std::runtime_error);
  HostPoolStats s = pool->stats();
  EXPECT_EQ(s.bytes_reserved, 0u);
  EXPECT_EQ(s.blocks_allocated, 0u);
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(pinner->unpins, 0);
  // The reservation went back: the whole limit is still there.
  const HostBlock b = pool->Acquire(kMiB);
  EXPECT_TRUE(b.pinned);
  pool->Release(b);
}

TEST(HostPool, UnpinFailureDoesNotEscapeTheDestructor) {
  auto pinner = std::make_shared<FakePinner>();
  pinner->throw_on_unpin = true;
  auto pool = MakePool(4 * kMiB, pinner);
  pool->Release(pool->Acquire(kMiB));
  EXPECT_NO_THROW(pool.reset());
  EXPECT_EQ(pinner->unpins, 1);
}

TEST(HostPool, RejectsBadRequestsAndReleases) {
  auto pool = MakePool(4 * kMiB);
  EXPECT_THROW(pool->Acquire(0), std::invalid_argument);
  const HostBlock b = pool->Acquire(kMiB);
  HostBlock foreign = b;
  foreign.data = static_cast<char *>(b.data) + 4096;
  EXPECT_THROW(pool->Release(foreign), std::invalid_argument);
  pool->Release(b);
  EXPECT_THROW(pool->Release(b), std::invalid_argument);
  EXPECT_EQ(pool->stats().blocks_idle, 1u);
}

TEST(HostPool, ConcurrentAcquireRelease) {
  auto pinner = std::make_shared<FakePinner>();
  auto pool = MakePool(64 * kMiB, pinner);
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  const size_t sizes[] = {64 * 1024, 256 * 1024 + 1, kMiB};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const HostBlock b = pool->Acquire(sizes[(t + i) % 3]);
        // A block handed to two threads at once would show here.
        auto *bytes = static_cast<unsigned char *>(b.data);
        std::memset(bytes, t + 1, b.size);
        std::this_thread::yield();
        if (bytes[0] != t + 1 || bytes[b.size - 1] != t + 1)
          ++errors;
        pool->Release(b);
      }
    });
  }
  for (std::thread& th : threads)
    th.join();
  EXPECT_EQ(errors, 0);
  const HostPoolStats s = pool->stats();
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.blocks_allocated + s.blocks_reused, uint64_t{kThreads} * kRounds);
  // At most one block per thread and class.
  EXPECT_LE(s.blocks_allocated, uint64_t{kThreads} * 3);
  EXPECT_EQ(s.blocks_idle, s.blocks_allocated);
  EXPECT_EQ(pinner->pins, static_cast<int>(s.blocks_allocated));
  EXPECT_EQ(s.evictions, 0u);
}

TEST(HostPool, NodeOfThisSystemIsReallyBound) {
  if (!GPUFAN_TEST_HAVE_HWLOC)
    GTEST_SKIP() << "libgpufan was built without hwloc: memory is not bound";
  auto system = Topology::System();
  const int node = system->NumaNodes().front();
  HostPool pool(node, system, 8 * kMiB, nullptr);
  const HostBlock b = pool.Acquire(2 * kMiB);
  EXPECT_EQ(b.node, node);
  const HostPoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_node_bound, 2 * kMiB);
  EXPECT_TRUE(s.touched_on_node);
  EXPECT_EQ(system->BoundNodeOfArea(b.data, b.size), node);
  pool.Release(b);
}

TEST(HostPool, UnknownNodeGivesOrdinaryMemory) {
  HostPool pool(-3, nullptr, 4 * kMiB, nullptr);
  EXPECT_EQ(pool.node(), -1);
  const HostBlock b = pool.Acquire(kMiB);
  EXPECT_EQ(b.node, -1);
  std::memset(b.data, 1, b.size);
  const HostPoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_node_bound, 0u);
  EXPECT_FALSE(s.touched_on_node);
  pool.Release(b);
}

TEST(HostPool, CountsTheFallbacksItsUserReports) {
  HostPool pool(-1, nullptr, 4 * kMiB, nullptr);
  EXPECT_EQ(pool.stats().fallbacks, 0u);
  EXPECT_EQ(pool.RecordFallback(), 0u);  // the first: its user warns once
  EXPECT_EQ(pool.RecordFallback(), 1u);
  EXPECT_EQ(pool.stats().fallbacks, 2u);
}

TEST(HostPool, FakeTopologyNodeGivesUnboundMemory) {
  if (!GPUFAN_TEST_HAVE_HWLOC)
    GTEST_SKIP() << "libgpufan was built without hwloc: no fake topology";
  std::string error;
  auto fake = Topology::FromSynthetic("pack:2 numa:1 core:2 pu:1", &error);
  ASSERT_NE(fake, nullptr) << error;
  HostPool pool(1, fake, 4 * kMiB, nullptr);
  const HostBlock b = pool.Acquire(kMiB);
  EXPECT_EQ(b.node, 1);
  std::memset(b.data, 1, b.size);
  const HostPoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_node_bound, 0u);
  EXPECT_FALSE(s.touched_on_node);
  pool.Release(b);
}

TEST(HostPool, ForNodeSharesOnePoolPerNode) {
  // Node numbers no other test uses: the registry is process-wide.
  auto pinner = std::make_shared<FakePinner>();
  auto a = HostPool::ForNode(1001, nullptr, 4 * kMiB, pinner);
  auto b = HostPool::ForNode(1001, nullptr, 8 * kMiB, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->max_bytes(), 4 * kMiB);  // first wins
  EXPECT_TRUE(b->pins());
  auto other = HostPool::ForNode(1002, nullptr, 8 * kMiB, nullptr);
  EXPECT_NE(other, a);
  EXPECT_EQ(HostPool::ForNode(-1, nullptr, kMiB, nullptr),
            HostPool::ForNode(-9, nullptr, 2 * kMiB, nullptr));

  // The registry does not keep a pool alive.
  a->Release(a->Acquire(kMiB));
  a.reset();
  b.reset();
  EXPECT_EQ(pinner->still_pinned(), 0u);
  auto fresh = HostPool::ForNode(1001, nullptr, 8 * kMiB, nullptr);
  EXPECT_EQ(fresh->max_bytes(), 8 * kMiB);
  EXPECT_EQ(fresh->stats().blocks_allocated, 0u);
}

}  // namespace
}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// Many threads on one Session: a dispatcher, one worker per lane (whose
// "branch" sometimes loses items, sometimes loses the meta, and comes back
// before or after the push returns), and an output thread. The output must be
// every item exactly once, in order, with exactly the lost ones empty. No
// assertion is on time; the session runs on the real clock, and its only
// deadline, the 30 s stall timeout, is beyond any scheduling delay.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufan/session.h"

namespace gpufan {
namespace {

struct Item : Payload {
  explicit Item(uint64_t s) : seq(s) {}
  uint64_t seq;
};

// A lane worker's input queue (bounded by the session, not here).
class WorkQueue {
 public:
  void Push(std::optional<Dispatch> d) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(d);
    cv_.notify_one();
  }
  // nullopt: end of stream.
  std::optional<Dispatch> Pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !items_.empty(); });
    std::optional<Dispatch> d = items_.front();
    items_.pop_front();
    return d;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::optional<Dispatch>> items_;
};

struct StressResult {
  std::vector<uint64_t> order;  // released item seqs, in output order
  std::vector<bool> empty;      // per released entry: no payload
  std::vector<uint64_t> lost;   // seqs the branches lost (or failed)
  uint64_t wrong_payload = 0;
  uint64_t attachments = 0;
};

StressResult RunStress(Policy policy, uint64_t total, uint32_t lanes,
                       uint32_t queue_size, uint32_t seed) {
  SessionConfig config;
  config.policy = policy;
  config.lane_queue_size = queue_size;
  // Far beyond any scheduling hiccup, so no item that does come back expires;
  // still bounded, so that a head lost beyond what probes can prove (several
  // lost items in a row) costs time, not a hang. Lost items are empty either
  // way.
  config.stall_timeout_ns = 30LL * 1'000'000'000;
  auto session = Session::Create(config);
  for (uint32_t l = 0; l < lanes; ++l) {
    session->AddLane(l, Device::Cpu(static_cast<int>(l)), 1.0 + l);
    session->ClaimLane(l);
  }

  std::vector<std::unique_ptr<WorkQueue>> queues;
  for (uint32_t l = 0; l < lanes; ++l)
    queues.push_back(std::make_unique<WorkQueue>());
  std::vector<std::vector<uint64_t>> lost(lanes);
  std::atomic<uint32_t> lanes_done{0};

  std::thread dispatcher([&] {
    for (uint64_t i = 0; i < total; ++i) {
      const Dispatch d = session->DispatchItem(static_cast<int64_t>(i) * 1000);
      if (d.status != DispatchStatus::kOk) {
        ADD_FAILURE() << "dispatch failed";
        break;
      }
      queues[d.lane]->Push(d);
    }
    for (auto& q : queues)
      q->Push(std::nullopt);
  });

  std::vector<std::thread> workers;
  for (uint32_t l = 0; l < lanes; ++l) {
    workers.emplace_back([&, l] {
      std::mt19937 rng(seed * 31 + l);
      auto roll = [&] {
        return std::uniform_int_distribution<int>(0, 999)(rng);
      };
      while (std::optional<Dispatch> d = queues[l]->Pop()) {
        EXPECT_TRUE(d->awaited);
        session->MarkStarted(l, d->seq);
        const int delay = roll();
        if (delay < 100)
          std::this_thread::sleep_for(std::chrono::microseconds(delay % 40));
        else if (delay < 300)
          std::this_thread::yield();
        const int fate = roll();
        if (fate < 15) {
          session->OnPushed(l, d->seq, PushOutcome::kFailed);
          lost[l].push_back(d->seq);
          continue;
        }
        if (fate < 35) {
          // The branch swallows it; the next item on this lane proves it.
          session->OnPushed(l, d->seq, PushOutcome::kDelivered);
          lost[l].push_back(d->seq);
          continue;
        }
        const bool sync = fate < 500;  // comes out inside the push
        if (!sync)
          session->OnPushed(l, d->seq, PushOutcome::kDelivered);
        const std::optional<uint64_t> seq =
            roll() < 100 ? std::nullopt : std::optional<uint64_t>(d->seq);
        const Arrival a =
            session->Arrive(l, seq, static_cast<int64_t>(d->seq) * 1000,
                            std::make_unique<Item>(d->seq));
        EXPECT_EQ(a.status, ArrivalStatus::kAccepted);
        EXPECT_EQ(a.seq, d->seq);
        if (sync)
          session->OnPushed(l, d->seq, PushOutcome::kDelivered);
      }
      session->LaneEnded(l);  // EOS: what is still outstanding is gone
      lanes_done++;
      session->WakeOutput();
    });
  }

  StressResult result;
  std::thread output([&] {
    for (;;) {
      ReadyBatch batch = session->TakeReady();
      for (Released& r : batch.items) {
        if (r.lane == kNoLane) {
          result.attachments++;
          continue;
        }
        auto *item = static_cast<Item *>(r.payload.get());
        if (item && item->seq != r.seq)
          result.wrong_payload++;
        result.order.push_back(r.seq);
        result.empty.push_back(item == nullptr);
      }
      if (lanes_done == lanes && session->WindowEmpty())
        break;
      session->WaitOutput(batch.generation, 50'000'000);
    }
  });

  dispatcher.join();
  for (auto& w : workers)
    w.join();
  output.join();
  for (auto& l : lost)
    result.lost.insert(result.lost.end(), l.begin(), l.end());

  const SessionStats stats = session->Stats();
  EXPECT_EQ(stats.in_flight, 0u);
  EXPECT_EQ(stats.dispatched, total);
  EXPECT_EQ(stats.released, total);
  // Probes of an idle head lane may exceed the limit by a lane queue. The
  // automatic limit gives each lane its queue (a lane of microseconds: up to
  // kFastLaneQueueFactor times queue_size) and two more; with adaptive, it
  // follows the lanes' speeds, up to twice that.
  const uint32_t deepest_queue = queue_size * Scheduler::kFastLaneQueueFactor;
  EXPECT_LE(stats.window_peak,
            2 * lanes * (deepest_queue + 2) + queue_size + 1);
  return result;
}

void CheckResult(const StressResult& r, uint64_t total) {
  ASSERT_EQ(r.order.size(), total);
  EXPECT_EQ(r.wrong_payload, 0u);
  EXPECT_EQ(r.attachments, 0u);
  std::vector<bool> lost(total, false);
  for (uint64_t s : r.lost)
    lost[s] = true;
  for (uint64_t i = 0; i < total; ++i) {
    ASSERT_EQ(r.order[i], i) << "out of order at " << i;
    ASSERT_EQ(r.empty[i], lost[i]) << "item " << i;
  }
}

TEST(Stress, AdaptiveTwentyThousandItemsThreeLanes) {
  const uint64_t total = 20000;
  CheckResult(RunStress(Policy::kAdaptive, total, 3, 4, 1), total);
}

TEST(Stress, RoundRobinTightQueues) {
  const uint64_t total = 5000;
  CheckResult(RunStress(Policy::kRoundRobin, total, 3, 1, 2), total);
}

TEST(Stress, LeastLoadedFiveLanes) {
  const uint64_t total = 5000;
  CheckResult(RunStress(Policy::kLeastLoaded, total, 5, 2, 3), total);
}

TEST(Stress, WeightedTwoLanes) {
  const uint64_t total = 5000;
  CheckResult(RunStress(Policy::kWeighted, total, 2, 3, 4), total);
}

}  // namespace
}  // namespace gpufan

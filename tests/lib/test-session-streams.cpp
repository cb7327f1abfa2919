// SPDX-License-Identifier: LGPL-2.1-or-later
// Input streams: one session serving several inputs that share the lanes.
// Each stream's items leave in that stream's order, held back by no other
// stream; admission is fair between the streams that wait (start-time fair
// queueing over their weights); a stream can be flushed, bounded, timed out
// and counted on its own.
//
// The admission tests run DispatchItem on real threads, but decide nothing
// by timing: the clock records which worker has entered DispatchItem (it
// reads the clock under the session's lock as it enters), and a Stats() call
// after that (the same lock) finds every such worker waiting or done. Room
// is then freed one item at a time, and the test waits (with a deadline far
// above any scheduling delay, only to catch a hang) for the one admission
// that room allows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpufan/session.h"
#include "lane-stats.h"
#include "tag-payload.h"

namespace gpufan {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr auto kHang = std::chrono::seconds(20);
constexpr uint32_t kBlocker = 99;  // the stream of Block()'s item

using Strings = std::vector<std::string>;

// "text@seq#stream" for items ("-" when empty), "text@e#stream" for
// attachments.
Strings Describe(const std::vector<Released>& items) {
  Strings d;
  for (const Released& r : items) {
    std::string s = TagText(r);
    s += "@" + (r.lane == kNoLane ? std::string("e") : std::to_string(r.seq));
    s += "#" + std::to_string(r.stream);
    d.push_back(s);
  }
  return d;
}

// Set by each worker thread: the clock records which workers read it.
thread_local int t_worker = 0;

// A manual clock that also records the workers that read it.
class RecordingClock final : public Clock {
 public:
  int64_t NowNs() const override {
    if (t_worker != 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      readers_.insert(t_worker);
    }
    return now_.load();
  }
  void Advance(int64_t ns) { now_.fetch_add(ns); }
  bool HasRead(int worker) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return readers_.count(worker) > 0;
  }

 private:
  std::atomic<int64_t> now_{1000 * kMs};
  mutable std::mutex mutex_;
  mutable std::set<int> readers_;
};

const StreamStats *FindStream(const SessionStats& s, uint32_t stream) {
  for (const StreamStats& st : s.streams)
    if (st.stream == stream)
      return &st;
  return nullptr;
}

class SessionStreamsTest : public ::testing::Test {
 protected:
  // Round-robin over `lanes` claimed lanes; `max_in_flight` 0: automatic.
  void Make(int lanes, uint32_t max_in_flight, uint32_t queue_size = 8) {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.lane_queue_size = queue_size;
    c.max_in_flight = max_in_flight;
    c.stall_timeout_ns = 100 * kMs;
    session_ = Session::Create(c, clock_);
    for (int i = 0; i < lanes; ++i) {
      session_->AddLane(static_cast<uint32_t>(i), Device::Cpu(i));
      session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  // For the admission tests: a full in-flight bound that frees one item at
  // a time. With Make(2, 2): an item of lane 0 (of a stream of its own,
  // which holds no other) that never leaves heads the window (lane 0 then
  // takes nothing: no probe of its branch goes past the bound), and one item
  // in flight on lane 1, returned.
  Dispatch Block() {
    session_->SetStallTimeout(1000'000 * kMs);
    const Dispatch blocker = session_->DispatchItem(kNoTime, -1, kBlocker);
    EXPECT_EQ(blocker.lane, 0u);
    session_->SetLaneEligible(0, false);
    const Dispatch filler = Send(kMainStream);
    EXPECT_EQ(filler.lane, 1u);
    return filler;
  }

  void TearDown() override {
    if (session_)
      session_->SetFlushing(true);  // whoever still waits returns
    for (std::thread& t : threads_)
      t.join();
  }

  // Dispatches (there must be room) and starts one item of `stream`.
  Dispatch Send(uint32_t stream, int64_t pts = kNoTime) {
    const Dispatch d = session_->DispatchItem(pts, -1, stream);
    EXPECT_EQ(d.status, DispatchStatus::kOk);
    if (d.status == DispatchStatus::kOk) {
      EXPECT_TRUE(session_->MarkStarted(d.lane, d.seq));
      started_.insert(d.seq);
    }
    return d;
  }

  // The item comes back through its lane (started and pushed first if it
  // was not); returns what leaves.
  Strings Complete(const Dispatch& d, const std::string& text = "x") {
    if (started_.insert(d.seq).second) {
      EXPECT_TRUE(session_->MarkStarted(d.lane, d.seq));
    }
    session_->OnPushed(d.lane, d.seq, PushOutcome::kDelivered);
    EXPECT_EQ(session_->Arrive(d.lane, d.seq, kNoTime, P(text)).status,
              ArrivalStatus::kAccepted);
    return Take();
  }

  // What leaves; the output sends it at once (gives its stream slot back)
  // unless keep_output_slots_.
  Strings Take() {
    const ReadyBatch batch = session_->TakeReady();
    for (const Released& r : batch.items)
      if (r.holds_stream_slot && !keep_output_slots_)
        session_->StreamOutputDone(r.stream);
    return Describe(batch.items);
  }

  StreamStats StreamOf(uint32_t stream) {
    const SessionStats s = session_->Stats();
    const StreamStats *st = FindStream(s, stream);
    if (!st) {
      ADD_FAILURE() << "no stream " << stream;
      return {};
    }
    return *st;
  }

  // A worker thread that dispatches one item of `stream`; returns its id.
  int Start(uint32_t stream, int64_t max_wait_ns = -1) {
    const int worker = ++workers_;
    threads_.emplace_back([this, worker, stream, max_wait_ns] {
      t_worker = worker;
      const Dispatch d =
          session_->DispatchItem(kNoTime, -1, stream, max_wait_ns);
      std::lock_guard<std::mutex> lock(mutex_);
      done_.push_back({stream, d});
      cv_.notify_all();
    });
    return worker;
  }

  // Until every worker in [first, last] has entered DispatchItem and waits
  // there (or returned).
  void WaitEntered(int first, int last) {
    const auto deadline = std::chrono::steady_clock::now() + kHang;
    for (int w = first; w <= last; ++w) {
      while (!clock_->HasRead(w)) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline)
            << "worker " << w << " never entered DispatchItem";
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    session_->Stats();  // takes the lock each of them held as it entered
  }

  // Until `n` workers have returned; false (a failure) past the deadline.
  bool WaitDone(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, kHang, [&] { return done_.size() >= n; }))
      return true;
    ADD_FAILURE() << "only " << done_.size() << " of " << n
                  << " dispatches returned";
    return false;
  }

  size_t DoneCount() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.size();
  }

  std::pair<uint32_t, Dispatch> DoneAt(size_t i) {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.at(i);
  }

  // Frees room for one admission at a time, `n` times, starting by
  // completing `first`; returns the streams admitted, in order.
  std::vector<uint32_t> AdmitOneByOne(Dispatch first, int n) {
    std::vector<uint32_t> order;
    Dispatch free = first;
    for (int i = 0; i < n; ++i) {
      const size_t before = DoneCount();
      Complete(free);
      if (!WaitDone(before + 1))
        break;
      const auto [stream, d] = DoneAt(before);
      EXPECT_EQ(d.status, DispatchStatus::kOk);
      order.push_back(stream);
      free = d;
    }
    return order;
  }

  std::shared_ptr<RecordingClock> clock_ = std::make_shared<RecordingClock>();
  std::shared_ptr<Session> session_;
  bool keep_output_slots_ = false;
  std::set<uint64_t> started_;
  std::vector<std::thread> threads_;
  int workers_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<uint32_t, Dispatch>> done_;
};

// --- order: per stream ---

TEST_F(SessionStreamsTest, ItemsLeaveInTheirStreamsOrderOnly) {
  Make(2, 0);
  const Dispatch a = Send(1);  // lane 0
  const Dispatch b = Send(2);  // lane 1
  const Dispatch c = Send(1);  // lane 0
  const Dispatch d = Send(2);  // lane 1
  ASSERT_EQ(a.lane, 0u);
  ASSERT_EQ(b.lane, 1u);
  // Stream 2's items come back first: stream 1's pending a holds neither.
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));
  EXPECT_EQ(Complete(d, "d"), (Strings{"d@3#2"}));
  EXPECT_EQ(session_->Stats().window_occupancy, 2u);
  EXPECT_EQ(session_->Stats().in_flight, 2u);
  // c waits for a, of its own stream.
  session_->OnPushed(c.lane, c.seq, PushOutcome::kDelivered);
  session_->OnPushed(a.lane, a.seq, PushOutcome::kDelivered);
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a@0#1"}));
  EXPECT_EQ(session_->Arrive(0, c.seq, kNoTime, P("c")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"c@2#1"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.window_occupancy, 0u);
  EXPECT_EQ(s.released, 4u);
  ASSERT_EQ(s.streams.size(), 2u);
  EXPECT_EQ(s.streams[0].stream, 1u);
  EXPECT_EQ(s.streams[1].stream, 2u);
  for (const StreamStats& st : s.streams) {
    EXPECT_EQ(st.dispatched, 2u);
    EXPECT_EQ(st.delivered, 2u);
    EXPECT_EQ(st.lost, 0u);
    EXPECT_EQ(st.in_flight, 0u);
  }
}

TEST_F(SessionStreamsTest, AnItemHeldBehindItsStreamWaits) {
  Make(2, 0);
  const Dispatch a = Send(1);  // lane 0, never returns
  const Dispatch b = Send(1);  // lane 1
  EXPECT_TRUE(Complete(b, "b").empty());
  EXPECT_EQ(StreamOf(1).in_flight, 2u);
  // a stalls: given up after the stall timeout, b follows.
  clock_->Advance(100 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0#1", "b@1#1"}));
  EXPECT_EQ(a.seq, 0u);
  const StreamStats st = StreamOf(1);
  EXPECT_EQ(st.delivered, 1u);
  EXPECT_EQ(st.lost, 1u);
  EXPECT_EQ(st.flushed, 0u);
  EXPECT_EQ(st.in_flight, 0u);
}

TEST_F(SessionStreamsTest, AStalledItemOfOneStreamHoldsNoOther) {
  Make(2, 0);
  const Dispatch a = Send(1);  // lane 0: it never comes back
  const Dispatch b = Send(2);  // lane 1
  const Dispatch c = Send(1);  // lane 0, behind a
  const Dispatch d = Send(2);  // lane 1
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));
  EXPECT_EQ(Complete(d, "d"), (Strings{"d@3#2"}));
  // a heads the window all along.
  ASSERT_EQ(session_->PendingHeadSeq(), std::optional<uint64_t>(a.seq));
  clock_->Advance(100 * kMs);
  // a is given up, and c with it (its lane stalled).
  EXPECT_EQ(Take(), (Strings{"-@0#1", "-@2#1"}));
  EXPECT_EQ(c.seq, 2u);
  // Stream 2 goes on, on the other lane.
  const Dispatch e = Send(2);
  EXPECT_EQ(e.lane, 1u);
  EXPECT_EQ(Complete(e, "e"), (Strings{"e@4#2"}));
  EXPECT_EQ(StreamOf(1).lost, 2u);
  EXPECT_EQ(StreamOf(1).delivered, 0u);
  EXPECT_EQ(StreamOf(2).delivered, 3u);
  EXPECT_EQ(StreamOf(2).lost, 0u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

// Replay with several streams: a failed lane hands over its items with
// their streams; sent again, each leaves in its own stream's order, and a
// stream's release mark runs ahead of a pending item of another stream.
TEST_F(SessionStreamsTest, AFailedLanesItemsKeepTheirStreams) {
  Make(2, 0);
  // Lane 0 gets a (stream 1) and c (stream 2), lane 1 b (2) and d (1).
  const Dispatch a = Send(1), b = Send(2), c = Send(2), d = Send(1);
  ASSERT_EQ(a.lane, 0u);
  ASSERT_EQ(c.lane, 0u);
  const std::vector<ReplayItem> replay = session_->FailLaneForReplay(0);
  ASSERT_EQ(replay.size(), 2u);
  EXPECT_EQ(replay[0].seq, a.seq);
  EXPECT_EQ(replay[0].stream, 1u);
  EXPECT_EQ(replay[1].seq, c.seq);
  EXPECT_EQ(replay[1].stream, 2u);
  // c goes again first, and comes back: stream 2 leaves up to it, while
  // stream 1 waits for a.
  EXPECT_EQ(session_->Redispatch(c.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));
  EXPECT_EQ(Complete(d, "d"), Strings{});
  EXPECT_EQ(session_->Arrive(1, c.seq, kNoTime, P("c")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"c@2#2"}));
  EXPECT_EQ(session_->ReleasedThrough(), 0u);
  EXPECT_EQ(session_->StreamReleasedThrough(2), c.seq + 1);
  EXPECT_EQ(session_->StreamReleasedThrough(1), 0u);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_EQ(session_->Arrive(1, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a@0#1", "d@3#1"}));
  EXPECT_EQ(session_->StreamReleasedThrough(1), d.seq + 1);
  EXPECT_EQ(StreamOf(1).delivered, 2u);
  EXPECT_EQ(StreamOf(2).delivered, 2u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

TEST_F(SessionStreamsTest, ADroppedItemOfOneStreamHoldsNoOther) {
  Make(2, 0);
  const Dispatch a = Send(1);  // lane 0: its branch drops it
  const Dispatch b = Send(2);  // lane 1
  const Dispatch c = Send(1);  // lane 0
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));
  session_->OnPushed(a.lane, a.seq, PushOutcome::kDelivered);
  // c came out of lane 0 after a: a is proven dropped.
  EXPECT_EQ(Complete(c, "c"), (Strings{"-@0#1", "c@2#1"}));
  EXPECT_EQ(StreamOf(1).lost, 1u);
  EXPECT_EQ(StreamOf(1).delivered, 1u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

TEST_F(SessionStreamsTest, OneStreamHasNoStreamStats) {
  Make(1, 0);
  const Dispatch a = Send(kMainStream);
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#0"}));
  EXPECT_TRUE(session_->Stats().streams.empty());
  EXPECT_FALSE(session_->HasStreams());
}

TEST_F(SessionStreamsTest, AnUnawaitedItemKeepsItsStreamWhenItComesLate) {
  // Items dispatched to a lane no fan-in claimed are not awaited: when one
  // comes back, its stream places it. x comes back after y, a later item of
  // its stream that has left: x is late, whichever way it came back (here
  // after its lane forgot it: y proved it dropped).
  Make(2, 0);
  session_->UnclaimLane(1);
  const Dispatch a = Send(1);  // lane 0: pending, the window cannot move
  ASSERT_EQ(a.lane, 0u);
  session_->SetLaneEligible(0, false);
  const Dispatch x = Send(2);
  const Dispatch y = Send(2);
  ASSERT_EQ(x.lane, 1u);
  ASSERT_EQ(y.lane, 1u);
  ASSERT_FALSE(x.awaited);
  EXPECT_EQ(session_->Arrive(1, y.seq, kNoTime, P("y")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"y@e#2"}));
  EXPECT_EQ(session_->Arrive(1, x.seq, kNoTime, P("x")).status,
            ArrivalStatus::kLate);
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#1"}));
  EXPECT_TRUE(session_->WindowEmpty());
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

// --- events of a stream ---

TEST_F(SessionStreamsTest, AStreamEventFollowsThatStreamsItemsOnly) {
  Make(2, 0);
  const Dispatch a = Send(1);  // lane 0
  const Dispatch b = Send(2);  // lane 1
  session_->AttachStreamEvent(1, P("E"));
  const Dispatch c = Send(1);  // lane 0
  const Dispatch d = Send(2);  // lane 1
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));
  // Placed after every dispatched item of stream 1: a holds it, not b or d.
  EXPECT_EQ(Complete(d, "d"), (Strings{"d@3#2"}));
  session_->OnPushed(c.lane, c.seq, PushOutcome::kDelivered);
  session_->OnPushed(a.lane, a.seq, PushOutcome::kDelivered);
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a@0#1", "E@e#1"}));
  EXPECT_EQ(session_->Arrive(0, c.seq, kNoTime, P("c")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"c@2#1"}));
  // Events count as no item.
  EXPECT_EQ(StreamOf(1).delivered, 2u);
  EXPECT_EQ(session_->Stats().released, 4u);
}

TEST_F(SessionStreamsTest, AStreamEventWithNothingInFlightLeavesAtOnce) {
  Make(2, 0);
  const Dispatch a = Send(1);  // pending: holds stream 1 only
  session_->AttachStreamEvent(2, P("E"));
  EXPECT_EQ(Take(), (Strings{"E@e#2"}));
  session_->AttachStreamEvent(1, P("F"));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#1", "F@e#1"}));
}

// --- fair admission ---

TEST_F(SessionStreamsTest, AdmissionFollowsTheStreamsWeights) {
  Make(2, 2);
  session_->AddStream(1, 1.0);
  session_->AddStream(2, 1.0);
  session_->AddStream(3, 2.0);
  const Dispatch filler = Block();
  // More waiters than admissions: every stream stays backlogged.
  for (int i = 0; i < 4; ++i)
    Start(1);
  for (int i = 0; i < 4; ++i)
    Start(2);
  for (int i = 0; i < 8; ++i)
    Start(3);
  WaitEntered(1, workers_);
  EXPECT_EQ(DoneCount(), 0u);
  // Start-time fair queueing: stream 3 gets two turns for each of the
  // others' one, ties go to the lower id.
  EXPECT_EQ(AdmitOneByOne(filler, 12),
            (std::vector<uint32_t>{1, 2, 3, 3, 1, 2, 3, 3, 1, 2, 3, 3}));
  // Nothing else got in meanwhile.
  EXPECT_EQ(DoneCount(), 12u);
  EXPECT_EQ(session_->Stats().in_flight, 2u);  // Block()'s and the last
  EXPECT_EQ(StreamOf(1).dispatched, 3u);
  EXPECT_EQ(StreamOf(2).dispatched, 3u);
  EXPECT_EQ(StreamOf(3).dispatched, 6u);
  EXPECT_EQ(StreamOf(3).weight, 2.0);
}

TEST_F(SessionStreamsTest, AnIdleStreamJoinsLevel) {
  Make(2, 2);
  session_->AddStream(3);  // known from the start, idle for a while
  const Dispatch filler = Block();
  for (int i = 0; i < 8; ++i)
    Start(1);
  for (int i = 0; i < 8; ++i)
    Start(2);
  WaitEntered(1, workers_);
  EXPECT_EQ(AdmitOneByOne(filler, 6),
            (std::vector<uint32_t>{1, 2, 1, 2, 1, 2}));
  // Stream 3 starts waiting: neither behind the others' backlog nor owed
  // the turns it did not use while idle.
  const int first = workers_ + 1;
  for (int i = 0; i < 4; ++i)
    Start(3);
  WaitEntered(first, workers_);
  EXPECT_EQ(DoneCount(), 6u);
  const Dispatch last = DoneAt(5).second;
  EXPECT_EQ(AdmitOneByOne(last, 6), (std::vector<uint32_t>{3, 1, 2, 3, 1, 2}));
}

// Weight 0 (the minimum a lane's weight shares): a background stream goes
// only while no weighted stream waits, in turn with other background ones.
TEST_F(SessionStreamsTest, AStreamOfWeightZeroGoesOnlyWhileNoWeightedOneWaits) {
  Make(2, 2);
  session_->AddStream(1, 0.0);
  session_->AddStream(2, 0.0);
  session_->AddStream(3, 1.0);
  const Dispatch filler = Block();
  for (int i = 0; i < 3; ++i)
    Start(1);
  for (int i = 0; i < 3; ++i)
    Start(2);
  for (int i = 0; i < 2; ++i)
    Start(3);
  WaitEntered(1, workers_);
  EXPECT_EQ(AdmitOneByOne(filler, 8),
            (std::vector<uint32_t>{3, 3, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(StreamOf(1).weight, 0.0);
  // A negative weight is the default.
  session_->SetStreamWeight(2, -1.0);
  EXPECT_EQ(StreamOf(2).weight, 1.0);
}

TEST_F(SessionStreamsTest, AStreamsOwnBoundHoldsOnlyThatStream) {
  Make(1, 0);
  keep_output_slots_ = true;
  session_->SetStreamMaxInFlight(1, 2);
  // Stream 2 is ahead in fair order from here on: stream 1, waiting on its
  // own bound, must not hold it back.
  const Dispatch a = Send(1);
  Send(1);
  Send(2);
  Send(2);
  Send(2);
  const int w = Start(1);
  WaitEntered(w, w);
  EXPECT_EQ(DoneCount(), 0u);
  StreamStats st = StreamOf(1);
  EXPECT_EQ(st.max_in_flight, 2u);
  EXPECT_EQ(st.in_flight, 2u);
  EXPECT_EQ(st.dispatched, 2u);
  const int w2 = Start(2);
  WaitEntered(w2, w2);
  ASSERT_TRUE(WaitDone(1));
  EXPECT_EQ(DoneAt(0).first, 2u);
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kOk);
  EXPECT_EQ(StreamOf(1).dispatched, 2u);
  // One of stream 1's items leaves the window: it still counts at the
  // stream's output until that is done with it.
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#1"}));
  st = StreamOf(1);
  EXPECT_EQ(st.in_flight, 1u);
  EXPECT_EQ(DoneCount(), 1u);
  session_->StreamOutputDone(1);
  ASSERT_TRUE(WaitDone(2));
  EXPECT_EQ(DoneAt(1).first, 1u);
  EXPECT_EQ(DoneAt(1).second.status, DispatchStatus::kOk);
  st = StreamOf(1);
  EXPECT_EQ(st.dispatched, 3u);
  EXPECT_EQ(st.in_flight, 2u);
  // No bound of its own any more.
  session_->SetStreamMaxInFlight(1, 0);
  Send(1);
  EXPECT_EQ(StreamOf(1).in_flight, 3u);
  EXPECT_EQ(StreamOf(1).max_in_flight, 0u);
}

TEST_F(SessionStreamsTest, ItemsAtAStreamsOutputAreBoundedWithoutABound) {
  // A stream whose downstream stopped: what left the window waits at its
  // output. Without a bound of its own it may keep the session's bound's
  // worth there, then waits; the other stream goes on.
  Make(1, 4);
  std::vector<Released> at_output;
  for (int i = 0; i < 4; ++i) {
    const Dispatch d = Send(1);
    session_->OnPushed(d.lane, d.seq, PushOutcome::kDelivered);
    ASSERT_EQ(session_->Arrive(d.lane, d.seq, kNoTime, P("s1")).status,
              ArrivalStatus::kAccepted);
    ReadyBatch batch = session_->TakeReady();
    ASSERT_EQ(batch.items.size(), 1u);
    EXPECT_TRUE(batch.items[0].holds_stream_slot);
    at_output.push_back(std::move(batch.items[0]));
  }
  EXPECT_EQ(StreamOf(1).in_flight, 0u);
  const int w = Start(1);
  WaitEntered(w, w);
  EXPECT_EQ(DoneCount(), 0u);
  // The session's bound itself is free: another stream is admitted.
  const Dispatch other = Send(2);
  EXPECT_EQ(other.status, DispatchStatus::kOk);
  session_->StreamOutputDone(1);
  ASSERT_TRUE(WaitDone(1));
  EXPECT_EQ(DoneAt(0).first, 1u);
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kOk);
}

TEST_F(SessionStreamsTest, LatencyIsCountedPerStreamFromAdmissionToRelease) {
  Make(2, 0);
  const Dispatch a = Send(1);
  clock_->Advance(10 * kMs);
  const Dispatch b = Send(2);
  clock_->Advance(30 * kMs);
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#1"}));  // 40 ms
  EXPECT_EQ(Complete(b, "b"), (Strings{"b@1#2"}));  // 30 ms
  const Dispatch c = Send(1);
  clock_->Advance(20 * kMs);
  EXPECT_EQ(Complete(c, "c"), (Strings{"c@2#1"}));  // 20 ms
  StreamStats one = StreamOf(1);
  EXPECT_EQ(one.delivered, 2u);
  EXPECT_EQ(one.latency_ns, 30 * kMs);
  EXPECT_EQ(one.max_latency_ns, 40 * kMs);
  StreamStats two = StreamOf(2);
  EXPECT_EQ(two.latency_ns, 30 * kMs);
  EXPECT_EQ(two.max_latency_ns, 30 * kMs);
  // a lost frame has no latency
  const Dispatch d = Send(2);
  clock_->Advance(500 * kMs);
  session_->OnPushed(d.lane, d.seq, PushOutcome::kDropped);
  Take();
  two = StreamOf(2);
  EXPECT_EQ(two.delivered, 1u);
  EXPECT_EQ(two.max_latency_ns, 30 * kMs);
}

TEST_F(SessionStreamsTest, AMainStreamItemHoldsNoStreamSlot) {
  Make(1, 0);
  const Dispatch d = Send(kMainStream);
  session_->OnPushed(d.lane, d.seq, PushOutcome::kDelivered);
  ASSERT_EQ(session_->Arrive(d.lane, d.seq, kNoTime, P("m")).status,
            ArrivalStatus::kAccepted);
  const ReadyBatch batch = session_->TakeReady();
  ASSERT_EQ(batch.items.size(), 1u);
  EXPECT_FALSE(batch.items[0].holds_stream_slot);
}

// --- waits ---

TEST_F(SessionStreamsTest, WaitTimeIsCountedPerStream) {
  Make(2, 2);
  const Dispatch filler = Block();
  const int w = Start(2);
  WaitEntered(w, w);
  clock_->Advance(7 * kMs);
  Complete(filler);
  ASSERT_TRUE(WaitDone(1));
  const Dispatch d = DoneAt(0).second;
  ASSERT_EQ(d.status, DispatchStatus::kOk);
  StreamStats st = StreamOf(2);
  EXPECT_EQ(st.wait_ns, 7 * kMs);
  EXPECT_EQ(st.max_wait_ns, 7 * kMs);
  // An item admitted at once waited nothing.
  Complete(d);
  clock_->Advance(10 * kMs);
  Send(2);
  st = StreamOf(2);
  EXPECT_EQ(st.wait_ns, 7 * kMs);
  EXPECT_EQ(st.max_wait_ns, 7 * kMs);
  EXPECT_EQ(st.dispatched, 2u);
  // 2 items in the 10 ms since the first.
  EXPECT_NEAR(st.fps, 200.0, 1e-9);
}

TEST_F(SessionStreamsTest, MaxWaitEndsTheWaitWithARealClock) {
  SessionConfig c;
  c.policy = Policy::kRoundRobin;
  c.max_in_flight = 1;
  session_ = Session::Create(c);  // SteadyClock
  session_->AddLane(0, Device::Cpu(0));
  session_->ClaimLane(0);
  ASSERT_EQ(session_->DispatchItem(kNoTime).status, DispatchStatus::kOk);
  constexpr int64_t kWait = 20 * kMs;
  Start(2, kWait);
  Start(kMainStream, kWait);
  ASSERT_TRUE(WaitDone(2));
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kTimedOut);
  EXPECT_EQ(DoneAt(1).second.status, DispatchStatus::kTimedOut);
  const SessionStats s = session_->Stats();
  EXPECT_EQ(s.dispatched, 1u);
  EXPECT_EQ(s.in_flight, 1u);
  const StreamStats *st = FindStream(s, 2);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->dispatched, 0u);
  EXPECT_EQ(st->in_flight, 0u);
  EXPECT_GE(st->wait_ns, kWait);  // it cannot have given up earlier
}

TEST_F(SessionStreamsTest, MaxWaitWithAManualClockEndsAtTheNextEvent) {
  Make(2, 2);
  const Dispatch filler = Block();
  // No time to wait at all.
  EXPECT_EQ(session_->DispatchItem(kNoTime, -1, 2, 0).status,
            DispatchStatus::kTimedOut);
  const int w = Start(2, 5 * kMs);
  WaitEntered(w, w);
  clock_->Advance(4 * kMs);
  session_->SetStreamWeight(3, 1.0);  // an event: not yet
  session_->Stats();
  EXPECT_EQ(DoneCount(), 0u);
  clock_->Advance(2 * kMs);
  session_->SetStreamWeight(3, 1.0);
  ASSERT_TRUE(WaitDone(1));
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kTimedOut);
  EXPECT_EQ(StreamOf(2).dispatched, 0u);
  EXPECT_EQ(StreamOf(2).wait_ns, 6 * kMs);
  EXPECT_EQ(session_->Stats().dispatched, 2u);  // Block()'s two
  // The room it waited for is still there for the next.
  Complete(filler);
  Send(2);
  EXPECT_EQ(StreamOf(2).dispatched, 1u);
}

// --- flushing a stream ---

TEST_F(SessionStreamsTest, FlushStartWakesOnlyThatStreamsDispatch) {
  Make(2, 2);
  std::vector<std::pair<uint32_t, bool>> told;
  session_->SetStreamFlushListener([&told](uint32_t stream, bool start) {
    told.push_back({stream, start});
  });
  const Dispatch filler = Block();
  const int w1 = Start(1);
  const int w2 = Start(2);
  WaitEntered(w1, w2);
  session_->FlushStream(1, true);
  ASSERT_TRUE(WaitDone(1));
  EXPECT_EQ(DoneAt(0).first, 1u);
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kFlushing);
  // Stream 2 still waits for room.
  session_->Stats();
  EXPECT_EQ(DoneCount(), 1u);
  EXPECT_EQ(session_->DispatchItem(kNoTime, -1, 1).status,
            DispatchStatus::kFlushing);
  EXPECT_EQ(StreamOf(1).dispatched, 0u);
  Complete(filler);
  ASSERT_TRUE(WaitDone(2));
  EXPECT_EQ(DoneAt(1).first, 2u);
  const Dispatch d = DoneAt(1).second;
  EXPECT_EQ(d.status, DispatchStatus::kOk);
  session_->FlushStream(1, false);
  Complete(d);
  EXPECT_EQ(Send(1).status, DispatchStatus::kOk);
  // Without the listener: a pad (de)activation.
  session_->FlushStream(2, true, false);
  session_->FlushStream(2, false, false);
  EXPECT_EQ(told,
            (std::vector<std::pair<uint32_t, bool>>{{1, true}, {1, false}}));
}

TEST_F(SessionStreamsTest, FlushEndForgetsTheStreamsItemsInTheWindow) {
  Make(2, 0);
  std::vector<std::pair<uint32_t, bool>> told;
  session_->SetStreamFlushListener([&told](uint32_t stream, bool start) {
    told.push_back({stream, start});
  });
  const Dispatch a = Send(1);  // lane 0: pending
  const Dispatch b = Send(1);  // lane 1: arrives, waits for a
  const Dispatch c = Send(2);  // lane 0
  const Dispatch d = Send(2);  // lane 1
  session_->OnPushed(a.lane, a.seq, PushOutcome::kDelivered);
  EXPECT_TRUE(Complete(b, "b").empty());
  session_->FlushStream(1, true);
  EXPECT_TRUE(Take().empty());  // the start forgets nothing yet
  session_->FlushStream(1, false);
  EXPECT_EQ(told,
            (std::vector<std::pair<uint32_t, bool>>{{1, true}, {1, false}}));
  // Their slots leave empty, counted out; stream 2's stay.
  EXPECT_EQ(Take(), (Strings{"-@0#1", "-@1#1"}));
  StreamStats st = StreamOf(1);
  EXPECT_EQ(st.lost, 2u);
  EXPECT_EQ(st.flushed, 2u);
  EXPECT_EQ(st.delivered, 0u);
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(session_->Stats().in_flight, 2u);
  // a still comes out of its branch: late, dropped, not released.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(LaneOf(session_->Stats(), 0).late, 1u);
  EXPECT_EQ(Complete(c, "c"), (Strings{"c@2#2"}));
  EXPECT_EQ(Complete(d, "d"), (Strings{"d@3#2"}));
  st = StreamOf(1);
  EXPECT_EQ(st.lost, 2u);
  EXPECT_EQ(st.delivered, 0u);
  EXPECT_EQ(StreamOf(2).delivered, 2u);
  EXPECT_EQ(StreamOf(2).flushed, 0u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
  EXPECT_TRUE(session_->WindowEmpty());
  // The stream goes on.
  const Dispatch e = Send(1);
  EXPECT_EQ(Complete(e, "e"), (Strings{"e@4#1"}));
}

TEST_F(SessionStreamsTest, AFlushedItemHeldBehindAnotherStreamIsLate) {
  Make(2, 0);
  const Dispatch a = Send(2);  // lane 0: pending, heads the window
  const Dispatch b = Send(1);  // lane 1
  session_->OnPushed(a.lane, a.seq, PushOutcome::kDelivered);
  session_->OnPushed(b.lane, b.seq, PushOutcome::kDelivered);
  session_->FlushStream(1, true);
  session_->FlushStream(1, false);
  EXPECT_EQ(Take(), (Strings{"-@1#1"}));
  EXPECT_EQ(session_->Arrive(1, b.seq, kNoTime, P("b")).status,
            ArrivalStatus::kLate);
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#2"}));
  EXPECT_EQ(StreamOf(1).flushed, 1u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

// --- statistics and removal ---

TEST_F(SessionStreamsTest, LeakyDropsAreCountedPerStream) {
  Make(1, 0);
  session_->CountLeakyDrop(2);
  session_->CountLeakyDrop(2);
  session_->CountLeakyDrop(3);
  EXPECT_EQ(StreamOf(2).leaky_dropped, 2u);
  EXPECT_EQ(StreamOf(3).leaky_dropped, 1u);
  EXPECT_EQ(StreamOf(2).dispatched, 0u);
}

TEST_F(SessionStreamsTest, RemoveStreamForgetsItButNotItsItems) {
  Make(2, 0);
  session_->AddStream(5, 3.0);
  session_->SetStreamMaxInFlight(5, 4);
  StreamStats st = StreamOf(5);
  EXPECT_EQ(st.weight, 3.0);
  EXPECT_EQ(st.max_in_flight, 4u);
  EXPECT_TRUE(session_->HasStreams());
  const Dispatch a = Send(5);  // lane 0: pending
  const Dispatch b = Send(5);  // lane 1
  session_->RemoveStream(5);
  EXPECT_TRUE(session_->Stats().streams.empty());
  EXPECT_FALSE(session_->HasStreams());
  session_->RemoveStream(5);              // twice: nothing
  EXPECT_TRUE(Complete(b, "b").empty());  // still in its stream's order
  EXPECT_EQ(Complete(a, "a"), (Strings{"a@0#5", "b@1#5"}));
  EXPECT_EQ(session_->Stats().in_flight, 0u);
  // Used again, it starts afresh.
  Send(5);
  st = StreamOf(5);
  EXPECT_EQ(st.dispatched, 1u);
  EXPECT_EQ(st.weight, 1.0);
  EXPECT_EQ(st.max_in_flight, 0u);
}

TEST_F(SessionStreamsTest, AStreamRemovedWhileItWaitsGoesWhenItsThreadLeaves) {
  Make(2, 2);
  const Dispatch filler = Block();
  const int w = Start(3);
  WaitEntered(w, w);
  // Its thread still waits (a pad is deactivated before it is released):
  // the stream stays until the thread is out.
  session_->RemoveStream(3);
  EXPECT_NE(FindStream(session_->Stats(), 3), nullptr);
  session_->FlushStream(3, true, false);
  ASSERT_TRUE(WaitDone(1));
  EXPECT_EQ(DoneAt(0).second.status, DispatchStatus::kFlushing);
  EXPECT_EQ(FindStream(session_->Stats(), 3), nullptr);
  Complete(filler);
}

}  // namespace
}  // namespace gpufan

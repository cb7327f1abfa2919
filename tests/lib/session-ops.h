// SPDX-License-Identifier: LGPL-2.1-or-later
// Random sequences of session operations (dispatch, start, push outcomes,
// branch drops, arrivals with and without sequence numbers, events, stalls,
// flushes, lanes claimed/removed/ended), single-threaded with a ManualClock,
// checked against the invariants the fan-in relies on: items and events leave
// in order, nothing leaves twice, every awaited item leaves exactly once,
// in-flight accounting returns to zero, nothing leaks. With `streams`, items
// and events belong to input streams 1..3 (a stream can also be flushed on
// its own): order is then checked within each stream, and every item must
// leave with its stream. Shared by the seeded unit test
// (test-session-ops.cpp) and the libFuzzer harness (fuzz-session.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpufan/session.h"

namespace gpufan::ops {

constexpr int64_t kMs = 1'000'000;
constexpr uint32_t kLanes = 4;

inline int g_live_payloads = 0;

// What the runs exercised, summed over seeds: the test fails if the random
// operations stop reaching a path.
struct Coverage {
  uint64_t released = 0, empty = 0, events = 0, late = 0, unawaited_out = 0,
           flushes = 0, seqless = 0, markers = 0, stalls = 0,
           stream_flushes = 0, overtakes = 0;
};
inline Coverage g_coverage;

struct Item : Payload {
  Item(uint64_t s, bool e, uint64_t k) : seq(s), event(e), key(k) {
    g_live_payloads++;
  }
  ~Item() override { g_live_payloads--; }
  uint64_t seq;  // the item it was made for (events: unused)
  bool event;    // an event placed at a position
  uint64_t key;  // order key: 2*seq+1 for items, 2*position for events
  uint32_t stream = kMainStream;  // events: the stream it was attached to
};

// Where the run's choices come from: a seeded generator for the unit test, the
// fuzzer's bytes for the libFuzzer harness.
class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  virtual int Uniform(int lo, int hi) = 0;  // inclusive
  virtual bool exhausted() const { return false; }
};

class SeededChoices final : public ChoiceSource {
 public:
  explicit SeededChoices(uint32_t seed) : rng_(seed) {}
  int Uniform(int lo, int hi) override {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

 private:
  std::mt19937 rng_;
};

class ByteChoices final : public ChoiceSource {
 public:
  ByteChoices(const uint8_t *data, size_t size) : data_(data), size_(size) {}
  int Uniform(int lo, int hi) override {
    if (pos_ >= size_)
      return lo;
    return lo +
           static_cast<int>(data_[pos_++] % static_cast<unsigned>(hi - lo + 1));
  }
  bool exhausted() const override { return pos_ >= size_; }

 private:
  const uint8_t *data_;
  size_t size_;
  size_t pos_ = 0;
};

class OpsRun {
 public:
  explicit OpsRun(ChoiceSource& choices, bool streams = false)
      : choices_(choices), streams_(streams) {
    SessionConfig config;
    config.policy = static_cast<Policy>(Uniform(0, 3));
    config.lane_queue_size = static_cast<uint32_t>(Uniform(1, 4));
    config.max_in_flight =
        Chance(50) ? 0 : static_cast<uint32_t>(Uniform(1, 12));
    // Probes of an idle head lane may go past a fixed limit by a lane queue.
    fixed_limit_ = config.max_in_flight > 0
                       ? config.max_in_flight + config.lane_queue_size + 1
                       : 0;
    config.stall_timeout_ns = 50 * kMs;
    session_ = Session::Create(config, clock_);
    for (uint32_t l = 0; l < kLanes; ++l)
      AddLane(l);
  }

  // Returns "" or what went wrong.
  std::string Run(int steps) {
    for (int i = 0; i < steps && failure_.empty() && !choices_.exhausted(); ++i)
      Step();
    if (failure_.empty())
      Drain();
    return failure_;
  }

 private:
  // What travels a branch: an item, or a marker the worker pushed behind
  // one (Session::OnPushed asked for it).
  struct InBranch {
    Dispatch d;
    bool marker = false;
  };
  struct Lane {
    bool present = true;
    std::deque<Dispatch> queue;   // dispatched, the worker has not taken it
    std::deque<InBranch> branch;  // pushed into the branch, not out yet
  };

  int Uniform(int lo, int hi) { return choices_.Uniform(lo, hi); }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }
  void Fail(const std::string& what) {
    if (failure_.empty())
      failure_ = what;
  }

  void AddLane(uint32_t l) {
    session_->AddLane(l, Device::Cpu(static_cast<int>(l)), Uniform(0, 3));
    lanes_[l] = Lane{};
    if (Chance(70))
      session_->ClaimLane(l);
  }

  int64_t Pts(uint64_t seq) { return pts_by_seq_.at(seq); }

  void Step() {
    const int op = Uniform(0, 99);
    const uint32_t l = static_cast<uint32_t>(Uniform(0, kLanes - 1));
    Lane& lane = lanes_[l];
    if (op < 25) {
      const int64_t pts = static_cast<int64_t>(pts_by_seq_.size()) * 40 * kMs;
      std::optional<Dispatch> d;
      const uint32_t stream =
          streams_ ? static_cast<uint32_t>(Uniform(1, 3)) : kMainStream;
      if (streams_)  // never waits: no time to wait for room
        d = session_->DispatchItem(pts, -1, stream, 0);
      else
        d = session_->TryDispatchItem(pts);
      if (!d || d->status != DispatchStatus::kOk)
        return;
      pts_by_seq_[d->seq] = pts;
      stream_by_seq_[d->seq] = stream;
      dispatched_++;
      if (!lanes_[d->lane].present)
        return Fail("dispatched to a removed lane");
      if (d->awaited)
        awaited_.insert(d->seq);
      lanes_[d->lane].queue.push_back(*d);
    } else if (op < 45) {
      // The worker takes its oldest item and pushes it.
      if (!lane.present || lane.queue.empty())
        return;
      const Dispatch d = lane.queue.front();
      lane.queue.pop_front();
      if (!session_->MarkStarted(l, d.seq))
        return;  // given up meanwhile: the worker drops it unpushed
      const int fate = Uniform(0, 99);
      if (fate < 8) {
        session_->OnPushed(l, d.seq, PushOutcome::kFailed);
      } else if (fate < 14) {
        session_->OnPushed(l, d.seq, PushOutcome::kDropped);
      } else if (fate < 40) {
        // A synchronous branch: it comes out inside the push, and so does a
        // marker behind it.
        lane.branch.push_back({d, false});
        BranchOutput(l);
        if (session_->OnPushed(l, d.seq, PushOutcome::kDelivered)) {
          lane.branch.push_back({d, true});
          BranchOutput(l);
        }
      } else {
        const bool marker =
            session_->OnPushed(l, d.seq, PushOutcome::kDelivered);
        lane.branch.push_back({d, false});
        if (marker)
          lane.branch.push_back({d, true});
      }
    } else if (op < 65) {
      if (lane.present)
        BranchOutput(l);
    } else if (op < 80) {
      Take();
    } else if (op < 85) {
      clock_->Advance(Chance(20) ? 60 * kMs : Uniform(0, 5) * kMs);
    } else if (op < 88) {
      if (streams_) {
        // After every item of the stream dispatched so far.
        const uint32_t stream = static_cast<uint32_t>(Uniform(1, 3));
        const uint64_t pos = session_->NextSeq();
        auto event = std::make_unique<Item>(0, true, 2 * pos);
        event->stream = stream;
        session_->AttachStreamEvent(stream, std::move(event));
        return;
      }
      const uint64_t pos =
          session_->MarkEventPosition(static_cast<uint32_t>(op));
      session_->AttachBefore(pos, std::make_unique<Item>(0, true, 2 * pos));
    } else if (op < 90) {
      // A lane's EOS: only once its worker and branch are empty.
      if (lane.present && lane.queue.empty() && lane.branch.empty())
        session_->LaneEnded(l);
    } else if (op < 92) {
      session_->ClaimLane(l);
    } else if (op < 94) {
      session_->SetLaneEligible(l, Chance(70));
    } else if (op < 96) {
      if (lane.present) {
        session_->RemoveLane(l);
        lane = Lane{};
        lane.present = false;
      } else {
        AddLane(l);
      }
    } else if (op < 97) {
      if (streams_ && Chance(60))
        FlushStream(static_cast<uint32_t>(Uniform(1, 3)));
      else
        Flush();
    } else {
      CheckStats();
    }
  }

  // The branch of lane `l` lets its oldest item out (or loses it).
  void BranchOutput(uint32_t l) {
    Lane& lane = lanes_[l];
    if (lane.branch.empty())
      return;
    const InBranch entry = lane.branch.front();
    const Dispatch d = entry.d;
    lane.branch.pop_front();
    if (entry.marker) {
      // Most branches forward it; one that swallows events loses it.
      if (Chance(90)) {
        g_coverage.markers++;
        session_->ProveLane(l, d.seq);
      }
      return;
    }
    if (Chance(10))
      return;  // the branch dropped it: a later item or marker proves it
    // Without the meta the pts identifies it (each item has its own pts). An
    // item dispatched before its lane was claimed keeps its meta here: the
    // session cannot tell it from the lane's next item by pts.
    const bool with_seq = !d.awaited || Chance(80);
    const int copies = with_seq && Chance(10) ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      const Arrival a = session_->Arrive(
          l, with_seq ? std::optional<uint64_t>(d.seq) : std::nullopt,
          Pts(d.seq), std::make_unique<Item>(d.seq, false, 2 * d.seq + 1));
      if (a.status == ArrivalStatus::kUnmatched)
        Fail("an item with a known lane and pts came back unmatched");
      if (a.status == ArrivalStatus::kAccepted && a.seq != d.seq)
        Fail("matched to the wrong item");
      if (a.status == ArrivalStatus::kAccepted && c == 0)
        accepted_.insert(d.seq);
      if (a.status == ArrivalStatus::kLate)
        g_coverage.late++;
      if (!with_seq)
        g_coverage.seqless++;
    }
  }

  void Take() {
    ReadyBatch batch = session_->TakeReady();
    for (const Released& r : batch.items) {
      // the stream's output sends it at once
      if (r.holds_stream_slot) {
        if (r.stream == kMainStream || !r.payload)
          return Fail("a stream slot on an item without one");
        session_->StreamOutputDone(r.stream);
      }
      auto *item = static_cast<Item *>(r.payload.get());
      if (r.lane != kNoLane) {
        // An awaited item (or its empty entry) in sequence order, one run each.
        if (!awaited_.count(r.seq))
          return Fail("released an item that was not awaited");
        if (released_.count(r.seq) && r.seq != last_released_)
          return Fail("released twice: " + std::to_string(r.seq));
        if (r.stream != stream_by_seq_.at(r.seq))
          return Fail("released with the wrong stream: " +
                      std::to_string(r.seq));
        // In order within the stream (the only order there is with
        // several).
        auto [last, first] = last_released_by_stream_.try_emplace(r.stream, 0);
        if (!first && r.seq < last->second)
          return Fail("items out of order in stream " +
                      std::to_string(r.stream));
        last->second = r.seq;
        if (any_released_ && r.seq < last_released_) {
          if (!streams_)
            return Fail("items out of order");
          g_coverage.overtakes++;
        }
        if (item && (item->event || item->seq != r.seq))
          return Fail("wrong payload for seq " + std::to_string(r.seq));
        if (!released_.count(r.seq)) {
          g_coverage.released++;
          g_coverage.empty += item ? 0 : 1;
        }
        released_.insert(r.seq);
        last_released_ = r.seq;
        any_released_ = true;
        if (item)
          got_payload_.insert(r.seq);
      } else if (!item) {
        // An unawaited item that had come back, forgotten by its stream's
        // flush, leaves an empty entry (nothing in flight to count out).
        const auto of = stream_by_seq_.find(r.seq);
        if (!streams_ || awaited_.count(r.seq) || of == stream_by_seq_.end() ||
            of->second != r.stream)
          return Fail("empty attachment");
      } else if (item->event) {
        g_coverage.events++;
      } else {
        g_coverage.unawaited_out++;
      }
      // Whatever comes out keeps its place: items (awaited or not: an
      // unawaited one that comes too late is dropped, never released ahead
      // of an older one) and events.
      if (item) {
        const uint32_t stream =
            item->event ? item->stream : stream_by_seq_.at(item->seq);
        if (r.stream != stream)
          return Fail(
              "left with the wrong stream: seq " + std::to_string(r.seq) +
              (item->event ? " event" : " item") + " got " +
              std::to_string(r.stream) + " want " + std::to_string(stream) +
              " lane " + std::to_string(r.lane));
        uint64_t& last_key = last_key_by_stream_[stream];
        if (item->key < last_key)
          return Fail("order key went backwards: " + std::to_string(item->key) +
                      " after " + std::to_string(last_key) + " in stream " +
                      std::to_string(stream));
        last_key = item->key;
      }
    }
    CheckStats();
  }

  void CheckStats() {
    const SessionStats s = session_->Stats();
    for (const LaneStats& l : s.lanes)
      g_coverage.stalls += l.state == LaneHealth::kStalled ? 1 : 0;
    if (s.window_occupancy > s.in_flight)
      Fail("window holds more than is in flight");
    // The automatic limit shrinks when lanes go; a fixed one always holds.
    if (fixed_limit_ > 0 && s.in_flight > fixed_limit_)
      Fail("in flight above the limit: " + std::to_string(s.in_flight) + " > " +
           std::to_string(fixed_limit_) + " window " +
           std::to_string(s.window_occupancy));
    if (!streams_)
      return;
    // Every item is of a stream: the streams' figures add up.
    uint64_t dispatched = 0;
    uint32_t in_flight = 0;
    for (const StreamStats& st : s.streams) {
      dispatched += st.dispatched;
      in_flight += st.in_flight;
    }
    if (dispatched != dispatched_)
      Fail("streams dispatched " + std::to_string(dispatched) + " of " +
           std::to_string(dispatched_));
    if (in_flight != s.in_flight)
      Fail("streams in flight " + std::to_string(in_flight) + ", session " +
           std::to_string(s.in_flight));
  }

  // One stream's flush: its items in the window leave empty (each still
  // exactly once), what comes back of them later is late.
  void FlushStream(uint32_t stream) {
    g_coverage.stream_flushes++;
    session_->FlushStream(stream, true);
    if (session_->DispatchItem(0, -1, stream, 0).status !=
        DispatchStatus::kFlushing)
      Fail("dispatch of a flushing stream");
    session_->FlushStream(stream, false);
    for (uint64_t s : awaited_)
      if (stream_by_seq_.at(s) == stream && !released_.count(s))
        stream_flushed_.insert(s);
  }

  void Flush() {
    g_coverage.flushes++;
    session_->SetFlushing(true);
    if (session_->TryDispatchItem(0)->status != DispatchStatus::kFlushing)
      Fail("dispatch while flushing");
    for (auto& [id, lane] : lanes_) {
      lane.queue.clear();
      lane.branch.clear();
    }
    session_->Reset();
    session_->SetFlushing(false);
    // Whatever was in flight is forgotten: only later items must come out.
    for (uint64_t s : awaited_)
      if (!released_.count(s))
        forgotten_.insert(s);
    last_key_by_stream_.clear();
    last_released_by_stream_.clear();
    const SessionStats st = session_->Stats();
    if (st.in_flight != 0 || st.window_occupancy != 0)
      Fail("reset left items in flight");
  }

  void Drain() {
    // Every worker and branch empties, every lane ends, the stall clock runs
    // out.
    for (auto& [id, lane] : lanes_) {
      if (!lane.present)
        continue;
      while (!lane.queue.empty()) {
        const Dispatch d = lane.queue.front();
        lane.queue.pop_front();
        if (!session_->MarkStarted(id, d.seq))
          continue;
        if (session_->OnPushed(id, d.seq, PushOutcome::kDelivered)) {
          lane.branch.push_back({d, false});
          lane.branch.push_back({d, true});
        } else {
          lane.branch.push_back({d, false});
        }
      }
      while (!lane.branch.empty() && failure_.empty())
        BranchOutput(id);
      session_->LaneEnded(id);
    }
    clock_->Advance(100 * kMs);
    Take();
    Take();
    if (!failure_.empty())
      return;
    const SessionStats s = session_->Stats();
    if (s.in_flight != 0)
      return Fail("in flight after drain: " + std::to_string(s.in_flight));
    if (!session_->WindowEmpty())
      return Fail("window not empty after drain");
    for (uint64_t seq : awaited_) {
      if (!forgotten_.count(seq) && !released_.count(seq))
        return Fail("awaited item never left: " + std::to_string(seq));
    }
    for (uint64_t seq : accepted_) {
      if (awaited_.count(seq) && !forgotten_.count(seq) &&
          !stream_flushed_.count(seq) && !got_payload_.count(seq))
        return Fail("accepted payload lost: " + std::to_string(seq));
    }
  }

  ChoiceSource& choices_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(0);
  std::shared_ptr<Session> session_;
  std::map<uint32_t, Lane> lanes_;
  std::map<uint64_t, int64_t> pts_by_seq_;
  std::set<uint64_t> awaited_, forgotten_, released_, accepted_, got_payload_;
  std::set<uint64_t> stream_flushed_;  // left empty: their stream was flushed
  std::map<uint64_t, uint32_t> stream_by_seq_;
  uint64_t dispatched_ = 0;
  uint64_t last_released_ = 0;
  bool any_released_ = false;
  // Per stream (kMainStream alone without streams): the last item released
  // and the last order key out.
  std::map<uint32_t, uint64_t> last_released_by_stream_;
  std::map<uint32_t, uint64_t> last_key_by_stream_;
  const bool streams_;
  uint32_t fixed_limit_ = 0;
  std::string failure_;
};

}  // namespace gpufan::ops

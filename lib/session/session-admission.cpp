// SPDX-License-Identifier: LGPL-2.1-or-later
// The fan-out side: admission (the in-flight limit and the lanes' queues),
// the choice of a lane, and the items' way into their branch.
#include "gpufan/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace gpufan {

namespace {

// How precisely PolicyTurnsUnlocked finds the moment the adaptive policy's
// answer turns (a wait cannot be kept more precisely than the scheduler's
// wake-up anyway).
constexpr int64_t kPolicyTurnResolutionNs = 20'000;
constexpr size_t kEventPositionsKept = 64;
// Markers behind replayed items still on their way (Lane::replay_markers):
// far more than a lane has in flight.
constexpr size_t kReplayMarkersKept = 256;
// Unclaimed lanes' items of a stream (unawaited_streams_): a lane's queue
// and branch hold far fewer.
constexpr size_t kUnawaitedStreamsKept = 1024;

}  // namespace

uint32_t Session::EffectiveMaxInFlight() const {
  std::lock_guard<Mutex> lock(mutex_);
  return EffectiveMaxInFlightUnlocked();
}

uint32_t Session::EffectiveMaxInFlightUnlocked() const {
  if (config_.max_in_flight > 0)
    return config_.max_in_flight;
  // Every lane's queue, and two more per lane: the item in its branch and
  // one on its way out.
  uint32_t base = 0;
  for (const auto& [id, l] : lanes_)
    base += std::max(l.queue_limit_peak, config_.lane_queue_size) + 2;
  if (lanes_.empty())
    base = config_.lane_queue_size + 2;
  // Only adaptive uses it: it gives idle slow lanes an item when the bound has
  // room for what the others complete meanwhile.
  if (config_.policy != Policy::kAdaptive)
    return base;
  return base + std::min(spread_allowance_, base);
}

uint32_t Session::LaneQueueLimitUnlocked(const Lane& lane) const {
  return Scheduler::LaneQueueLimit(config_.lane_queue_size,
                                   lane.service.EstimateNs());
}

void Session::UpdateSpreadAllowanceUnlocked() {
  // Lanes of different speeds: while the slowest works on one item, lane d
  // completes slowest / t_d of them, and all wait behind it in the window.
  // Room for those beyond one per lane. It only grows: a limit that shrank
  // below what is in flight would also stop the probes that prove a lost
  // head (ProbeLaneUnlocked).
  int64_t slowest = 0;
  for (const auto& [id, l] : lanes_)
    slowest = std::max(slowest, l.service.EstimateNs());
  if (slowest == 0)
    return;
  double behind = 0.0;
  uint32_t known = 0;
  for (const auto& [id, l] : lanes_) {
    const int64_t t = l.service.EstimateNs();
    if (t <= 0)
      continue;
    behind += static_cast<double>(slowest) / static_cast<double>(t);
    known++;
  }
  const double extra = std::min(std::floor(behind) - known, 65536.0);
  if (extra > spread_allowance_)
    spread_allowance_ = static_cast<uint32_t>(extra);
}

Dispatch Session::DispatchItem(int64_t pts_ns, int origin_gpu, uint32_t stream,
                               int64_t max_wait_ns) {
  std::unique_lock<Mutex> lock(mutex_);
  const bool several = stream != kMainStream;
  const int64_t entered = several || max_wait_ns >= 0 ? clock_->NowNs() : 0;
  if (several) {
    // It waits in fair order from now on (see Stream::vtime).
    Stream& s = StreamUnlocked(stream);
    if (s.waiting++ == 0)
      s.vtime = std::max(s.vtime, virtual_now_);
  }
  auto leave = [&](Dispatch d) {
    if (several) {
      Stream& s = StreamUnlocked(stream);
      s.waiting--;
      const int64_t waited = clock_->NowNs() - entered;
      s.counters.wait_ns += waited;
      s.counters.max_wait_ns = std::max(s.counters.max_wait_ns, waited);
      if (s.waiting == 0 && s.removed)
        streams_.erase(stream);
      // The turn may have passed to a waiting stream.
      if (admit_waiters_ > 0)
        admit_cv_.notify_all();
    }
    return d;
  };
  for (;;) {
    if (flushing_ || (several && StreamUnlocked(stream).flushing))
      return leave(Dispatch{DispatchStatus::kFlushing});
    bool no_lanes = false;
    if (StreamMayDispatchUnlocked(stream)) {
      if (std::optional<Dispatch> d =
              TryDispatchUnlocked(pts_ns, origin_gpu, &no_lanes, stream))
        return leave(*d);
      if (no_lanes)
        return leave(Dispatch{DispatchStatus::kNoLanes});
    }
    std::optional<std::chrono::nanoseconds> wait = AdaptiveRethinkUnlocked();
    if (max_wait_ns >= 0) {
      const int64_t left = entered + max_wait_ns - clock_->NowNs();
      if (left <= 0)
        return leave(Dispatch{DispatchStatus::kTimedOut});
      if (real_time_clock_ && (!wait || wait->count() > left))
        wait = std::chrono::nanoseconds(left);
    }
    // Every event that can make room notifies admit_cv_ (see the callers of
    // NotifyAdmitUnlocked); only the adaptive policy's answer also changes
    // with time alone. A notification sent before this thread waited was
    // for the waiters then: the next event must notify again.
    admit_waiters_++;
    admit_notified_ = false;
    if (wait)
      admit_cv_.wait_for(lock, *wait);
    else
      admit_cv_.wait(lock);
    admit_waiters_--;
    admit_notified_ = false;
  }
}

std::optional<std::chrono::nanoseconds> Session::AdaptiveRethinkUnlocked() {
  // Only a real-time clock's moments map onto a real-time wait; with an
  // injected clock only events end the wait.
  if (config_.policy != Policy::kAdaptive || !real_time_clock_)
    return std::nullopt;
  const int64_t now = clock_->NowNs();
  const size_t eligible =
      std::count_if(lanes_.begin(), lanes_.end(),
                    [](const auto& kv) { return kv.second.eligible; });
  std::optional<int64_t> due;
  auto until = [&](int64_t at) {
    if (at > now && (!due || at < *due))
      due = at;
  };
  for (const auto& [id, l] : lanes_) {
    if (!l.eligible || l.outstanding.empty())
      continue;
    const Outstanding& head = l.outstanding.front();
    const int64_t service = l.service.EstimateNs();
    // A lane without a sample takes more once its first item has run
    // kFirstSampleWaitNs.
    if (eligible > 1 && service <= 0 && head.started_ns != kNoTime)
      until(head.started_ns + Scheduler::kFirstSampleWaitNs);
    if (l.queued < LaneQueueLimitUnlocked(l) &&
        !Scheduler::QueueHorizonReached(
            static_cast<uint32_t>(l.outstanding.size()), service))
      continue;
    // A full lane is waited for while it may free a slot soon: the scores
    // move with its head's progress (Scheduler::EffectiveServiceNs), and
    // after kStallFactor service times it is not waited for any more.
    const int64_t since =
        head.started_ns != kNoTime
            ? head.started_ns
            : std::max(head.dispatched_ns, l.last_completion_ns);
    until(Scheduler::StopWaitingAtNs(since, service));
  }
  if (!due)
    return std::nullopt;
  // Until then the scores move with the full lanes' progress alone: wait
  // until the moment the policy's answer turns, if it turns before.
  if (waited_on_policy_)
    due = PolicyTurnsUnlocked(now, *due);
  return std::chrono::nanoseconds(*due - now);
}

int64_t Session::PolicyTurnsUnlocked(int64_t now, int64_t until) {
  auto waits_at = [this](int64_t t) {
    what_if_scheduler_ = scheduler_;
    return what_if_scheduler_.Choose(loads_, t, choice_room_).status ==
           PickStatus::kWait;
  };
  if (waits_at(until))
    return until;
  // The scores are piecewise linear in time and a full lane's only grow
  // faster than an idle one's, so the answer turns once: bisect to the
  // resolution the wait can keep anyway.
  int64_t lo = now, hi = until;
  while (hi - lo > kPolicyTurnResolutionNs) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (waits_at(mid))
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

std::optional<Dispatch> Session::TryDispatchItem(int64_t pts_ns,
                                                 int origin_gpu) {
  std::lock_guard<Mutex> lock(mutex_);
  if (flushing_)
    return Dispatch{DispatchStatus::kFlushing};
  bool no_lanes = false;
  std::optional<Dispatch> d =
      TryDispatchUnlocked(pts_ns, origin_gpu, &no_lanes);
  if (!d && no_lanes)
    return Dispatch{DispatchStatus::kNoLanes};
  return d;
}

std::optional<Dispatch> Session::TryDispatchUnlocked(int64_t pts_ns,
                                                     int origin_gpu,
                                                     bool *no_lanes,
                                                     uint32_t stream) {
  *no_lanes = false;
  waited_on_policy_ = false;
  bool joining = false;
  SchedulableUnlocked(&schedulable_, &joining);
  if (std::none_of(schedulable_.begin(), schedulable_.end(),
                   [](bool b) { return b; })) {
    *no_lanes = true;
    return std::nullopt;
  }
  if (config_.chunks && stream != kMainStream && !SkipFillingUnlocked())
    return std::nullopt;  // every lane is being filled: EndChunkFill wakes us
  const int64_t now = clock_->NowNs();
  // Checked before Choose(): a kLane pick commits the scheduler's cursors.
  const uint32_t limit = EffectiveMaxInFlightUnlocked();
  if (in_flight_ >= limit) {
    // Probes (see ProbeLaneUnlocked) go at most a lane queue past the limit.
    if (in_flight_ > limit + config_.lane_queue_size)
      return std::nullopt;
    const std::optional<uint32_t> probe = ProbeLaneUnlocked();
    if (!probe)
      return std::nullopt;
    Dispatch d = RecordDispatchUnlocked(*probe, pts_ns, now, stream);
    d.lanes_joining = joining;
    return d;
  }

  loads_.clear();
  size_t index = 0;
  for (const auto& [id, l] : lanes_) {
    LaneLoad load;
    load.lane = id;
    load.eligible = schedulable_[index++];
    load.has_room = !l.filling && l.queued < LaneQueueLimitUnlocked(l);
    load.outstanding = static_cast<uint32_t>(l.outstanding.size());
    load.weight = l.weight;
    load.service_ns = l.service.EstimateNs();
    load.wake_ns = l.wake.EstimateNs();
    const int64_t transfer = l.transfer.EstimateNs();
    load.transfer_ns = NeedsCopyUnlocked(l, origin_gpu) ? transfer : 0;
    for (const Outstanding& o : l.outstanding)
      if (o.needs_copy && o.started_ns == kNoTime)
        load.queued_transfer_ns += transfer;
    load.head_started_ns =
        l.outstanding.empty() ? -1 : l.outstanding.front().started_ns;
    if (!l.outstanding.empty() && load.head_started_ns < 0)
      load.head_ready_ns =
          std::max(l.outstanding.front().dispatched_ns, l.last_completion_ns);
    loads_.push_back(load);
  }
  const Pick pick = scheduler_.Choose(loads_, now, limit - in_flight_);
  waited_on_policy_ = pick.status == PickStatus::kWait;
  choice_room_ = limit - in_flight_;
  if (pick.status == PickStatus::kNone) {
    *no_lanes = true;
    return std::nullopt;
  }
  if (pick.status == PickStatus::kWait)
    return std::nullopt;
  Dispatch d = RecordDispatchUnlocked(pick.lane, pts_ns, now, stream);
  Lane& chosen = lanes_.at(pick.lane);
  chosen.outstanding.back().needs_copy = NeedsCopyUnlocked(chosen, origin_gpu);
  d.lanes_joining = joining;
  return d;
}

bool Session::SkipFillingUnlocked() {
  // A lane being filled by a stream is out of the choice (even round-robin's
  // turn passes it): only one chunk at a time goes into a lane's queue.
  bool any = false;
  size_t index = 0;
  for (const auto& [id, l] : lanes_) {
    if (l.filling)
      schedulable_[index] = false;
    any = any || schedulable_[index];
    index++;
  }
  return any;
}

bool Session::NeedsCopyUnlocked(const Lane& lane, int origin_gpu) const {
  return origin_gpu >= 0 && lane.device.kind == DeviceKind::kCuda &&
         lane.device.index != origin_gpu;
}

std::optional<uint32_t> Session::ProbeLaneUnlocked() {
  // The window is full and waits for its head. If the head's lane has pushed
  // everything it was given and is idle, its branch may have dropped the head
  // (and what followed), and only a later item on that FIFO lane can prove it:
  // sending one more beats waiting the whole stall timeout. Bounded: at most
  // lane_queue_size + 1 items outstanding on that lane, and as many in flight
  // beyond the limit.
  if (!window_.HeadPending())
    return std::nullopt;
  const uint64_t head = window_.head_seq();
  Lane *l = FindLaneUnlocked(window_.head_lane());
  if (!l || !l->eligible || l->stalled || l->failed || l->queued > 0 ||
      l->filling ||
      l->outstanding.size() > config_.lane_queue_size ||
      (config_.policy == Policy::kWeighted && !(l->weight > 0.0)))
    return std::nullopt;
  bool has_head = false;
  for (const Outstanding& item : l->outstanding) {
    if (item.started_ns == kNoTime)
      return std::nullopt;
    has_head = has_head || item.seq == head;
  }
  if (!has_head)
    return std::nullopt;
  return window_.head_lane();
}

Dispatch Session::RecordDispatchUnlocked(uint32_t lane_id, int64_t pts_ns,
                                         int64_t now_ns, uint32_t stream) {
  Lane& lane = lanes_.at(lane_id);
  Outstanding item;
  item.seq = next_seq_++;
  item.pts_ns = pts_ns;
  item.dispatched_ns = now_ns;
  item.awaited = lane.claimed;
  item.stream = stream;
  if (stream != kMainStream)
    CountStreamDispatchUnlocked(item, now_ns);
  lane.outstanding.push_back(item);
  lane.queued++;
  if (config_.chunks && stream != kMainStream)
    lane.filling = item.seq;
  lane.counters.dispatched++;
  dispatched_++;
  in_flight_++;
  if (item.awaited) {
    window_.Open(item.seq, lane_id, now_ns, stream);
    // Into an empty window, it is the head: nothing else announces it.
    AnnounceHeadUnlocked();
  } else if (stream != kMainStream) {
    // If a fan-in gets it after all, it belongs to its stream there, however
    // it comes back (before or after its push returned, once or as several
    // buffers).
    unawaited_streams_.emplace_back(item.seq, stream);
    while (unawaited_streams_.size() > kUnawaitedStreamsKept)
      unawaited_streams_.pop_front();
  }
  if (first_dispatch_ns_ == kNoTime)
    first_dispatch_ns_ = now_ns;
  if (trace_->enabled())
    trace_->Instant(TraceWriter::LaneTrack(lane_id), "dispatch", now_ns,
                    item.seq);
  Dispatch d{DispatchStatus::kOk, lane_id, item.seq, item.awaited};
  d.last_resort = lane.stalled;
  d.lane_order = lane.next_order++;
  return d;
}

bool Session::MarkStarted(uint32_t lane, uint64_t seq, bool woken) {
  std::unique_lock<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return false;
  defer_admit_notify_ = true;
  const bool tracked = MarkStartedUnlocked(*l, seq, woken);
  UnlockAndNotifyAdmit(lock);
  return tracked;
}

bool Session::MarkStartedUnlocked(Lane& l, uint64_t seq, bool woken) {
  // `queued` mirrors the lane worker's queue, which this item just left, even
  // when the session has already given up on the item (stall, flush).
  if (l.queued > 0)
    l.queued--;
  auto it = FindOutstandingUnlocked(l, seq);
  const bool tracked = it != l.outstanding.end();
  if (tracked) {
    it->started_ns = clock_->NowNs();
    if (woken)
      l.wake.AddSample(it->started_ns - it->dispatched_ns);
    l.in_push = true;
    l.pushing_seq = seq;
  }
  NotifyAdmitUnlocked();
  return tracked;
}

void Session::WithdrawItem(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return;
  // It never entered the lane's queue: it leaves the count that mirrors it.
  if (l->queued > 0)
    l->queued--;
  if (l->filling == seq)
    l->filling.reset();
  auto it = FindOutstandingUnlocked(*l, seq);
  if (it != l->outstanding.end()) {
    const Outstanding item = *it;
    l->outstanding.erase(it);
    DropOutstandingUnlocked(*l, item, false);
  }
  NotifyAllUnlocked();
}

bool Session::OnPushed(uint32_t lane, uint64_t seq, PushOutcome outcome) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  return l && OnPushedUnlocked(*l, seq, outcome);
}

bool Session::MarkStartedAfterPush(uint32_t lane, uint64_t pushed_seq,
                                   PushOutcome outcome, uint64_t seq,
                                   bool *marker) {
  std::unique_lock<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l) {
    *marker = false;
    return false;
  }
  defer_admit_notify_ = true;
  *marker = OnPushedUnlocked(*l, pushed_seq, outcome);
  // The marker goes into the branch before the next item starts: a branch
  // that blocks on it must not count as blocked on that item.
  const bool tracked = !*marker && MarkStartedUnlocked(*l, seq, false);
  UnlockAndNotifyAdmit(lock);
  return tracked;
}

bool Session::OnPushedUnlocked(Lane& l, uint64_t seq, PushOutcome outcome) {
  if (l.in_push && l.pushing_seq == seq)
    l.in_push = false;
  // Everything dispatched to the lane went into its branch: buffers held
  // without our meta are matched now or never (waiting for more could wait
  // for admission, which their items hold up).
  if (l.queued == 0 && !l.unmarked.empty())
    ResolveUnmarkedUnlocked(l, true);
  auto it = FindOutstandingUnlocked(l, seq);
  // Gone already: it arrived, expired, or the lane was reset. A stalled
  // lane's worker that got out of its push shows whether the branch answers
  // again.
  if (it == l.outstanding.end()) {
    if (l.stalled && l.claimed && outcome == PushOutcome::kDelivered) {
      l.counters.markers++;
      return true;
    }
    return false;
  }
  // The fan-in completes delivered items it waits for; until then a marker
  // behind it proves it dropped if the branch drops it.
  if (it->awaited && outcome == PushOutcome::kDelivered) {
    l.counters.markers++;
    if (it->replayed) {
      l.replay_markers.push_back(seq);
      while (l.replay_markers.size() > kReplayMarkersKept)
        l.replay_markers.pop_front();
    }
    return true;
  }
  const Outstanding item = *it;
  l.outstanding.erase(it);
  if (outcome == PushOutcome::kDelivered)
    CompleteUnlocked(l, item, clock_->NowNs());
  else
    DropOutstandingUnlocked(l, item, outcome == PushOutcome::kFailed);
  NotifyAllUnlocked();
  return false;
}

void Session::EndInput() {
  std::lock_guard<Mutex> lock(mutex_);
  if (input_ended_)
    return;
  input_ended_ = true;
  UpdateAccountedUnlocked(clock_->NowNs());
  NotifyAllUnlocked();
}

void Session::RestartInput() {
  std::lock_guard<Mutex> lock(mutex_);
  input_ended_ = false;
  // the fan-in's end waits for the lanes' next EOS again
  accounted_since_ns_ = kNoTime;
  NotifyAllUnlocked();
}

bool Session::input_ended() const {
  std::lock_guard<Mutex> lock(mutex_);
  return input_ended_;
}

uint64_t Session::MarkEventPosition(uint32_t event_key) {
  std::lock_guard<Mutex> lock(mutex_);
  const uint64_t position = next_seq_;
  event_positions_.emplace_back(event_key, position);
  while (event_positions_.size() > kEventPositionsKept)
    event_positions_.pop_front();
  return position;
}

std::optional<uint64_t> Session::EventPosition(uint32_t event_key) const {
  std::lock_guard<Mutex> lock(mutex_);
  // Newest first: a key seen twice means its latest position.
  for (auto it = event_positions_.rbegin(); it != event_positions_.rend();
       ++it) {
    if (it->first == event_key)
      return it->second;
  }
  return std::nullopt;
}

}  // namespace gpufan

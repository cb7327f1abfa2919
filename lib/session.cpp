// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

namespace gpufan {

namespace {

std::atomic<uint64_t> g_next_session_id{1};

// No wait is unbounded: admission re-checks its conditions at least this often
// even if a notification were missed.
constexpr std::chrono::milliseconds kAdmitRecheck{100};
// Longest single WaitOutput sleep; keeps wait_for clear of overflow.
constexpr int64_t kMaxOutputWaitNs = 3600LL * 1'000'000'000LL;
constexpr size_t kEventPositionsKept = 64;
constexpr size_t kExpiredKept = 32;
// AddedLatencyNs looks at the arrivals of the current and the previous run
// of this many: recent enough to follow the lanes, long enough to see a slow
// lane's items among fast ones.
constexpr uint32_t kSojournRun = 128;

SessionConfig Sanitized(SessionConfig config) {
  config.lane_queue_size = std::max<uint32_t>(1, config.lane_queue_size);
  config.stall_timeout_ns = std::max<int64_t>(1, config.stall_timeout_ns);
  return config;
}

void DecrementInFlight(uint32_t& in_flight) {
  // Reset() zeroes the count while lane workers may still report; never wrap.
  if (in_flight > 0)
    --in_flight;
}

}  // namespace

const char *LaneStateName(LaneState state) {
  switch (state) {
    case LaneState::kActive:
      return "active";
    case LaneState::kInactive:
      return "inactive";
    case LaneState::kJoining:
      return "joining";
    case LaneState::kStalled:
      return "stalled";
  }
  return "?";
}

const char *StallKindName(StallKind kind) {
  switch (kind) {
    case StallKind::kNone:
      return "none";
    case StallKind::kBlocked:
      return "blocked";
    case StallKind::kSilent:
      return "silent";
  }
  return "?";
}

std::shared_ptr<Session> Session::Create(SessionConfig config,
                                         std::shared_ptr<Clock> clock) {
  if (!clock)
    clock = std::make_shared<SteadyClock>();
  return std::shared_ptr<Session>(new Session(config, std::move(clock)));
}

Session::Session(SessionConfig config, std::shared_ptr<Clock> clock)
    : id_(g_next_session_id.fetch_add(1)),
      clock_(std::move(clock)),
      real_time_clock_(dynamic_cast<const SteadyClock *>(clock_.get()) !=
                       nullptr),
      config_(Sanitized(config)),
      scheduler_(config_.policy) {}

Session::~Session() = default;

// --- configuration ---

void Session::SetPolicy(Policy policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.policy = policy;
  scheduler_.SetPolicy(policy);
  NotifyAllUnlocked();
}

Policy Session::policy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.policy;
}

void Session::SetLaneQueueSize(uint32_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.lane_queue_size = std::max<uint32_t>(1, size);
  NotifyAllUnlocked();
}

uint32_t Session::lane_queue_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.lane_queue_size;
}

uint32_t Session::max_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.max_in_flight;
}

void Session::SetMaxInFlight(uint32_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.max_in_flight = limit;
  NotifyAllUnlocked();
}

uint32_t Session::EffectiveMaxInFlight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return EffectiveMaxInFlightUnlocked();
}

uint32_t Session::EffectiveMaxInFlightUnlocked() const {
  if (config_.max_in_flight > 0)
    return config_.max_in_flight;
  const uint32_t lanes =
      std::max<uint32_t>(1, static_cast<uint32_t>(lanes_.size()));
  const uint32_t base = lanes * (config_.lane_queue_size + 2);
  // Only adaptive uses it: it gives idle slow lanes an item when the bound has
  // room for what the others complete meanwhile.
  if (config_.policy != Policy::kAdaptive)
    return base;
  return base + std::min(spread_allowance_, base);
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

void Session::SetStallTimeout(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.stall_timeout_ns = std::max<int64_t>(1, ns);
  NotifyAllUnlocked();
}

int64_t Session::stall_timeout_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.stall_timeout_ns;
}

// --- lanes ---

void Session::AddLane(uint32_t lane, const Device& device, double weight) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Adding a known lane again only updates its binding: its items stay tracked.
  Lane& l = lanes_[lane];
  l.device = device;
  l.weight = weight;
  l.counters.lane = lane;
  scheduler_.ResetCursors();
  NotifyAllUnlocked();
}

void Session::RemoveLane(uint32_t lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end())
    return;
  DropAllOutstandingUnlocked(it->second);
  lanes_.erase(it);
  scheduler_.ResetCursors();
  spread_allowance_ = 0;
  UpdateSpreadAllowanceUnlocked();
  NotifyAllUnlocked();
}

bool Session::HasLane(uint32_t lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lanes_.count(lane) > 0;
}

void Session::SetLaneWeight(uint32_t lane, double weight) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->weight = weight;
    NotifyAllUnlocked();
  }
}

void Session::SetLaneDevice(uint32_t lane, const Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane))
    l->device = device;
}

void Session::SetLaneEligible(uint32_t lane, bool eligible) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->eligible = eligible;
    NotifyAllUnlocked();
  }
}

void Session::ClaimLane(uint32_t lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || l->claimed)
    return;
  l->claimed = true;
}

bool Session::IsLaneClaimed(uint32_t lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.claimed;
}

bool Session::IsLaneStalled(uint32_t lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.stalled;
}

std::string Session::WhyNoLane() const {
  std::lock_guard<std::mutex> lock(mutex_);
  bool any_eligible = false, any_weight = false;
  for (const auto& [id, l] : lanes_) {
    if (!l.eligible)
      continue;
    any_eligible = true;
    any_weight |= l.weight > 0.0;
  }
  if (any_eligible && !any_weight && config_.policy == Policy::kWeighted)
    return "policy=weighted, and every linked lane has weight 0 (a src pad's "
           "weight property must be above 0)";
  return {};
}

bool Session::AnyClaimedUnlocked() const {
  for (const auto& [id, l] : lanes_)
    if (l.claimed && l.eligible)
      return true;
  return false;
}

LaneState Session::StateOfUnlocked(const Lane& lane, bool any_claimed) {
  if (!lane.eligible)
    return LaneState::kInactive;
  if (lane.stalled)
    return LaneState::kStalled;
  if (!lane.claimed && any_claimed)
    return LaneState::kJoining;
  return LaneState::kActive;
}

// The lanes the scheduler may pick, in lanes_ order: the active ones; while
// there are none, the joining ones (a fan-in whose lanes all went away must
// not stop the stream: their items are placed in turn or dropped as late,
// never released ahead of older ones); while there are none of those either,
// the stalled ones (one lane that is merely slow must not fail the stream).
void Session::SchedulableUnlocked(std::vector<bool> *schedulable,
                                  bool *joining) {
  // Higher is picked first; inactive lanes never.
  auto rank = [](LaneState state) {
    switch (state) {
      case LaneState::kActive:
        return 3;
      case LaneState::kJoining:
        return 2;
      case LaneState::kStalled:
        return 1;
      case LaneState::kInactive:
        break;
    }
    return 0;
  };
  const bool any_claimed = AnyClaimedUnlocked();
  lane_ranks_.clear();
  int best = 0;
  *joining = false;
  for (const auto& [id, l] : lanes_) {
    const LaneState state = StateOfUnlocked(l, any_claimed);
    *joining |= state == LaneState::kJoining;
    lane_ranks_.push_back(rank(state));
    best = std::max(best, lane_ranks_.back());
  }
  schedulable->clear();
  for (int r : lane_ranks_)
    schedulable->push_back(best > 0 && r == best);
}

Session::Lane *Session::FindLaneUnlocked(uint32_t lane) {
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? nullptr : &it->second;
}

// --- fan-out side ---

Dispatch Session::DispatchItem(int64_t pts_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (flushing_)
      return Dispatch{DispatchStatus::kFlushing};
    bool no_lanes = false;
    if (std::optional<Dispatch> d = TryDispatchUnlocked(pts_ns, &no_lanes))
      return *d;
    if (no_lanes)
      return Dispatch{DispatchStatus::kNoLanes};
    admit_waiters_++;
    admit_cv_.wait_for(lock, AdmitWaitUnlocked());
    admit_waiters_--;
    admit_notified_ = false;
  }
}

std::chrono::nanoseconds Session::AdmitWaitUnlocked() const {
  std::chrono::nanoseconds wait = kAdmitRecheck;
  // The adaptive policy may wait for a full lane that should free a slot soon;
  // once that lane has run kStallFactor service times on its current item it
  // stops waiting for it (it may be stalled), and no
  // event announces that moment. Only a real-time clock maps onto the wait.
  if (config_.policy != Policy::kAdaptive || !real_time_clock_)
    return wait;
  const int64_t now = clock_->NowNs();
  for (const auto& [id, l] : lanes_) {
    if (!l.eligible || l.outstanding.empty() ||
        (l.queued < config_.lane_queue_size &&
         !Scheduler::QueueHorizonReached(
             static_cast<uint32_t>(l.outstanding.size()),
             l.service.EstimateNs())))
      continue;
    const Outstanding& head = l.outstanding.front();
    const int64_t since =
        head.started_ns != kNoTime
            ? head.started_ns
            : std::max(head.dispatched_ns, l.last_completion_ns);
    const int64_t due =
        Scheduler::StopWaitingAtNs(since, l.service.EstimateNs());
    if (due > now)
      wait = std::min(wait, std::chrono::nanoseconds(due - now));
  }
  return wait;
}

std::optional<Dispatch> Session::TryDispatchItem(int64_t pts_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (flushing_)
    return Dispatch{DispatchStatus::kFlushing};
  bool no_lanes = false;
  std::optional<Dispatch> d = TryDispatchUnlocked(pts_ns, &no_lanes);
  if (!d && no_lanes)
    return Dispatch{DispatchStatus::kNoLanes};
  return d;
}

std::optional<Dispatch> Session::TryDispatchUnlocked(int64_t pts_ns,
                                                     bool *no_lanes) {
  *no_lanes = false;
  bool joining = false;
  SchedulableUnlocked(&schedulable_, &joining);
  if (std::none_of(schedulable_.begin(), schedulable_.end(),
                   [](bool b) { return b; })) {
    *no_lanes = true;
    return std::nullopt;
  }
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
    Dispatch d = RecordDispatchUnlocked(*probe, pts_ns, now);
    d.lanes_joining = joining;
    return d;
  }

  loads_.clear();
  size_t index = 0;
  for (const auto& [id, l] : lanes_) {
    LaneLoad load;
    load.lane = id;
    load.eligible = schedulable_[index++];
    load.has_room = l.queued < config_.lane_queue_size;
    load.outstanding = static_cast<uint32_t>(l.outstanding.size());
    load.weight = l.weight;
    load.service_ns = l.service.EstimateNs();
    load.head_started_ns =
        l.outstanding.empty() ? -1 : l.outstanding.front().started_ns;
    if (!l.outstanding.empty() && load.head_started_ns < 0)
      load.head_ready_ns =
          std::max(l.outstanding.front().dispatched_ns, l.last_completion_ns);
    loads_.push_back(load);
  }
  const Pick pick = scheduler_.Choose(loads_, now, limit - in_flight_);
  if (pick.status == PickStatus::kNone) {
    *no_lanes = true;
    return std::nullopt;
  }
  if (pick.status == PickStatus::kWait)
    return std::nullopt;
  Dispatch d = RecordDispatchUnlocked(pick.lane, pts_ns, now);
  d.lanes_joining = joining;
  return d;
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
  if (!l || !l->eligible || l->stalled || l->queued > 0 ||
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
                                         int64_t now_ns) {
  Lane& lane = lanes_.at(lane_id);
  Outstanding item;
  item.seq = next_seq_++;
  item.pts_ns = pts_ns;
  item.dispatched_ns = now_ns;
  item.awaited = lane.claimed;
  lane.outstanding.push_back(item);
  lane.queued++;
  lane.counters.dispatched++;
  dispatched_++;
  in_flight_++;
  if (item.awaited)
    window_.Open(item.seq, lane_id, now_ns);
  if (first_dispatch_ns_ == kNoTime)
    first_dispatch_ns_ = now_ns;
  return Dispatch{DispatchStatus::kOk, lane_id, item.seq, item.awaited};
}

bool Session::MarkStarted(uint32_t lane, uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return false;
  // `queued` mirrors the lane worker's queue, which this item just left, even
  // when the session has already given up on the item (stall, flush).
  if (l->queued > 0)
    l->queued--;
  auto it = FindOutstandingUnlocked(*l, seq);
  const bool tracked = it != l->outstanding.end();
  if (tracked) {
    it->started_ns = clock_->NowNs();
    l->in_push = true;
    l->pushing_seq = seq;
  }
  const bool notify = ClaimAdmitNotifyUnlocked();
  lock.unlock();
  if (notify)
    admit_cv_.notify_all();
  return tracked;
}

bool Session::OnPushed(uint32_t lane, uint64_t seq, PushOutcome outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return false;
  if (l->in_push && l->pushing_seq == seq)
    l->in_push = false;
  auto it = FindOutstandingUnlocked(*l, seq);
  // Gone already: it arrived, expired, or the lane was reset. A stalled
  // lane's worker that got out of its push shows whether the branch answers
  // again.
  if (it == l->outstanding.end()) {
    if (l->stalled && l->claimed && outcome == PushOutcome::kDelivered) {
      l->counters.markers++;
      return true;
    }
    return false;
  }
  // The fan-in completes delivered items it waits for; until then a marker
  // behind it proves it dropped if the branch drops it.
  if (it->awaited && outcome == PushOutcome::kDelivered) {
    l->counters.markers++;
    return true;
  }
  const Outstanding item = *it;
  l->outstanding.erase(it);
  if (outcome == PushOutcome::kDelivered)
    CompleteUnlocked(*l, item, clock_->NowNs());
  else
    DropOutstandingUnlocked(*l, item, outcome == PushOutcome::kFailed);
  NotifyAllUnlocked();
  return false;
}

void Session::EndInput() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (input_ended_)
    return;
  input_ended_ = true;
  UpdateAccountedUnlocked(clock_->NowNs());
  NotifyAllUnlocked();
}

bool Session::input_ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return input_ended_;
}

uint64_t Session::MarkEventPosition(uint32_t event_key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t position = next_seq_;
  event_positions_.emplace_back(event_key, position);
  while (event_positions_.size() > kEventPositionsKept)
    event_positions_.pop_front();
  return position;
}

std::optional<uint64_t> Session::EventPosition(uint32_t event_key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Newest first: a key seen twice means its latest position.
  for (auto it = event_positions_.rbegin(); it != event_positions_.rend();
       ++it) {
    if (it->first == event_key)
      return it->second;
  }
  return std::nullopt;
}

// --- fan-in side ---

Arrival Session::Arrive(uint32_t lane, std::optional<uint64_t> seq,
                        int64_t pts_ns, PayloadPtr payload, bool wake_output) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ArriveUnlocked(lane, seq, pts_ns, std::move(payload), wake_output);
}

ReadyBatch Session::ArriveAndTakeReady(uint32_t lane,
                                       std::optional<uint64_t> seq,
                                       int64_t pts_ns, PayloadPtr payload,
                                       Arrival *arrival) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Once both are done, and after unlocking: the dispatcher this wakes would
  // block on the lock at once otherwise.
  defer_admit_notify_ = true;
  *arrival = ArriveUnlocked(lane, seq, pts_ns, std::move(payload), false);
  return TakeReadyAndUnlock(lock);
}

ReadyBatch Session::TakeReadyAndUnlock(std::unique_lock<std::mutex>& lock) {
  ReadyBatch batch = TakeReadyUnlocked();
  defer_admit_notify_ = false;
  const bool notify = admit_notify_deferred_;
  admit_notify_deferred_ = false;
  lock.unlock();
  if (notify)
    admit_cv_.notify_all();
  return batch;
}

Arrival Session::ArriveUnlocked(uint32_t lane, std::optional<uint64_t> seq,
                                int64_t pts_ns, PayloadPtr payload,
                                bool wake_output) {
  Lane *l = FindLaneUnlocked(lane);

  if (l) {
    HeardFromUnlocked(*l);
    auto& fifo = l->outstanding;
    auto match = fifo.end();
    if (seq) {
      match = std::find_if(fifo.begin(), fifo.end(),
                           [&](const Outstanding& o) { return o.seq == *seq; });
    } else {
      if (pts_ns != kNoTime) {
        match = std::find_if(
            fifo.begin(), fifo.end(),
            [&](const Outstanding& o) { return o.pts_ns == pts_ns; });
        auto expired =
            std::find_if(l->expired.begin(), l->expired.end(),
                         [&](const auto& e) { return e.first == pts_ns; });
        if (match == fifo.end() && expired != l->expired.end()) {
          // An item the window gave up on: taking the next item's place
          // would shift every later item of this lane by one.
          const uint64_t expired_seq = expired->second;
          l->expired.erase(expired);
          l->counters.late++;
          return Arrival{ArrivalStatus::kLate, expired_seq};
        }
      }
      // Each lane is FIFO: what comes out first is the oldest item.
      if (match == fifo.end() && !fifo.empty())
        match = fifo.begin();
    }
    if (match != fifo.end()) {
      const Outstanding item = *match;
      // Everything dispatched to this lane before it is proven gone.
      for (auto it = fifo.begin(); it != match; ++it)
        DropOutstandingUnlocked(*l, *it, false);
      fifo.erase(fifo.begin(), match + 1);
      const int64_t now = clock_->NowNs();
      CompleteUnlocked(*l, item, now);
      if (item.awaited) {
        RecordSojournUnlocked(now - item.dispatched_ns);
        window_.Arrive(item.seq, std::move(payload));
        if (window_.HeadPending() && window_.head_seq() != item.seq)
          l->counters.reorder_waits++;
      } else if (window_.InsertArrived(item.seq, lane, std::move(payload)) ==
                 ReorderWindow::ArriveResult::kLate) {
        // Nobody kept its place, and the output has moved past it.
        l->counters.late++;
        return Arrival{ArrivalStatus::kLate, item.seq};
      }
      if (wake_output)
        NotifyAllUnlocked();
      else
        NotifyAdmitUnlocked();
      return Arrival{ArrivalStatus::kAccepted, item.seq};
    }
  }

  if (seq && window_.IsOpen(*seq)) {
    // A further payload for an item that already arrived is kept with it; a
    // slot that was dropped or expired makes it late.
    if (window_.Arrive(*seq, std::move(payload)) ==
        ReorderWindow::ArriveResult::kStored) {
      NotifyAllUnlocked();
      return Arrival{ArrivalStatus::kAccepted, *seq};
    }
    if (l)
      l->counters.late++;
    return Arrival{ArrivalStatus::kLate, *seq};
  }
  if (seq && *seq < next_seq_) {
    // Nobody opened its slot: it was dispatched before its lane was claimed
    // (and completed at OnPushed), or its lane went away. It leaves in its
    // turn, or not at all once the output has moved past it.
    if (window_.InsertArrived(*seq, lane, std::move(payload)) ==
        ReorderWindow::ArriveResult::kLate) {
      if (l)
        l->counters.late++;
      return Arrival{ArrivalStatus::kLate, *seq};
    }
    NotifyAllUnlocked();
    return Arrival{ArrivalStatus::kAccepted, *seq};
  }

  // No way to tell which item it was: it leaves with the next release.
  unmatched_++;
  window_.AttachBefore(0, std::move(payload));
  NotifyAllUnlocked();
  return Arrival{ArrivalStatus::kUnmatched, seq.value_or(0)};
}

void Session::ProveLane(uint32_t lane, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProveLaneUnlocked(lane, seq);
  NotifyAllUnlocked();
}

ReadyBatch Session::ProveLaneAndTakeReady(uint32_t lane, uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  defer_admit_notify_ = true;
  ProveLaneUnlocked(lane, seq);
  NotifyAdmitUnlocked();
  return TakeReadyAndUnlock(lock);
}

void Session::ProveLaneUnlocked(uint32_t lane, uint64_t seq) {
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return;
  HeardFromUnlocked(*l);
  // The marker followed item `seq` on the FIFO lane: what was pushed before
  // it and is still outstanding was dropped by the branch.
  auto& fifo = l->outstanding;
  auto end = std::find_if(fifo.begin(), fifo.end(),
                          [seq](const Outstanding& o) { return o.seq > seq; });
  for (auto it = fifo.begin(); it != end; ++it)
    DropOutstandingUnlocked(*l, *it, false);
  fifo.erase(fifo.begin(), end);
}

void Session::HeardFromUnlocked(Lane& lane) {
  if (!lane.stalled)
    return;
  // Something came back: the lane answers again.
  lane.stalled = false;
  lane.stall_kind = StallKind::kNone;
  NotifyAllUnlocked();
}

void Session::AttachBefore(uint64_t seq, PayloadPtr payload) {
  std::lock_guard<std::mutex> lock(mutex_);
  // "After everything in flight" is the next item's place.
  window_.AttachBefore(std::min(seq, next_seq_), std::move(payload));
  NotifyAllUnlocked();
}

void Session::LaneEnded(uint32_t lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane))
    DropAllOutstandingUnlocked(*l);
}

void Session::UnclaimLane(uint32_t lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || !l->claimed)
    return;
  l->claimed = false;
  // Nothing of it can reach a fan-in any more.
  DropAllOutstandingUnlocked(*l);
}

std::deque<Session::Outstanding>::iterator Session::FindOutstandingUnlocked(
    Lane& lane, uint64_t seq) {
  return std::find_if(lane.outstanding.begin(), lane.outstanding.end(),
                      [seq](const Outstanding& o) { return o.seq == seq; });
}

void Session::DropAllOutstandingUnlocked(Lane& lane) {
  for (const Outstanding& item : lane.outstanding)
    DropOutstandingUnlocked(lane, item, false);
  lane.outstanding.clear();
  lane.queued = 0;
  NotifyAllUnlocked();
}

ReadyBatch Session::TakeReady() {
  std::lock_guard<std::mutex> lock(mutex_);
  return TakeReadyUnlocked();
}

ReadyBatch Session::TakeReadyUnlocked() {
  const int64_t now = clock_->NowNs();
  ReadyBatch batch;
  do {
    window_.PopSettled(batch.items, now);
  } while (ExpireStalledHeadUnlocked(now));
  // Several payloads may share one seq: an item leaves (and stops counting as
  // in flight) once, however many buffers it became.
  bool counted_any = false;
  uint64_t last_seq = 0;
  for (const Released& r : batch.items) {
    if (r.lane == kNoLane || (counted_any && r.seq == last_seq))
      continue;
    counted_any = true;
    last_seq = r.seq;
    released_++;
    DecrementInFlight(in_flight_);
  }
  if (counted_any)
    NotifyAdmitUnlocked();
  UpdateAccountedUnlocked(now);
  CheckLatencyUnlocked(&batch);
  batch.generation = generation_;
  return batch;
}

void Session::WaitOutput(uint64_t generation, int64_t max_wait_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto moved = [&] {
    return generation_ != generation || flushing_;
  };
  if (moved() || max_wait_ns <= 0)
    return;
  int64_t wait_ns = std::min(max_wait_ns, kMaxOutputWaitNs);
  if (window_.HeadPending()) {
    const int64_t remaining =
        config_.stall_timeout_ns - (clock_->NowNs() - window_.head_since_ns());
    if (remaining <= 0)
      return;  // TakeReady expires the head now
    // Only a real-time clock's deadline maps onto a real-time wait; an injected
    // clock moves by itself, so the caller's bound applies.
    if (real_time_clock_)
      wait_ns = std::min(wait_ns, remaining);
  }
  output_waiters_++;
  output_cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns), moved);
  output_waiters_--;
  output_notified_ = false;
}

void Session::WakeOutput() {
  std::lock_guard<std::mutex> lock(mutex_);
  generation_++;
  NotifyOutputUnlocked();
}

bool Session::WindowEmpty() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return window_.empty();
}

int64_t Session::AccountedForSinceNs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return accounted_since_ns_;
}

int64_t Session::AddedLatencyNs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return AddedLatencyUnlocked();
}

void Session::MarkLatencyReported(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_reported_ns_ = ns;
  latency_announced_ = false;
}

bool Session::HoldsArrivedFrom(uint32_t lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return window_.HoldsArrivedFrom(lane);
}

// --- flushing ---

void Session::SetFlushing(bool flushing) {
  std::lock_guard<std::mutex> lock(mutex_);
  flushing_ = flushing;
  NotifyAllUnlocked();
}

bool Session::flushing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flushing_;
}

void Session::Reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  window_.Clear();
  for (auto& [id, l] : lanes_) {
    l.outstanding.clear();
    l.expired.clear();
    l.queued = 0;
    // Idle time across the flush is not service time.
    l.last_completion_ns = kNoTime;
    // A flush unblocks branches: every lane gets a fresh start.
    l.in_push = false;
    l.stalled = false;
    l.stall_kind = StallKind::kNone;
  }
  in_flight_ = 0;
  input_ended_ = false;
  accounted_since_ns_ = kNoTime;
  NotifyAllUnlocked();
}

SessionStats Session::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SessionStats stats;
  stats.policy = config_.policy;
  stats.dispatched = dispatched_;
  stats.released = released_;
  stats.unmatched = unmatched_;
  stats.in_flight = in_flight_;
  stats.max_in_flight = EffectiveMaxInFlightUnlocked();
  stats.window_occupancy = static_cast<uint32_t>(window_.awaited_occupancy());
  stats.window_peak = static_cast<uint32_t>(window_.peak_occupancy());
  stats.input_ended = input_ended_;
  stats.added_latency_ns = AddedLatencyUnlocked();
  const bool any_claimed = AnyClaimedUnlocked();
  const int64_t now = clock_->NowNs();
  stats.elapsed_ns =
      first_dispatch_ns_ == kNoTime ? 0 : clock_->NowNs() - first_dispatch_ns_;
  const double seconds = static_cast<double>(stats.elapsed_ns) / 1e9;
  for (const auto& [id, l] : lanes_) {
    LaneStats s = l.counters;
    s.lane = id;
    s.device = l.device;
    s.weight = l.weight;
    s.eligible = l.eligible;
    s.claimed = l.claimed;
    s.state = StateOfUnlocked(l, any_claimed);
    if (l.stalled) {
      s.stall_kind = l.stall_kind;
      s.stalled_seq = l.stalled_seq;
      s.stalled_ns = now - l.stalled_ns;
    }
    s.queued = l.queued;
    s.in_flight = static_cast<uint32_t>(l.outstanding.size());
    s.service_ns = l.service.EstimateNs();
    s.fps = seconds > 0.0 ? static_cast<double>(s.completed) / seconds : 0.0;
    stats.lanes.push_back(std::move(s));
  }
  return stats;
}

// --- helpers (mutex_ held) ---

void Session::CompleteUnlocked(Lane& lane, const Outstanding& item,
                               int64_t now_ns) {
  lane.counters.completed++;
  // Work on this item began when it started or when the lane finished the one
  // before, whichever is later: queueing inside the branch is not service time.
  const int64_t began = std::max(
      item.started_ns != kNoTime ? item.started_ns : item.dispatched_ns,
      lane.last_completion_ns);
  const int64_t before = lane.service.EstimateNs();
  lane.service.AddSample(now_ns - began);
  if (lane.service.EstimateNs() != before)
    UpdateSpreadAllowanceUnlocked();
  lane.last_completion_ns = now_ns;
  if (!item.awaited)
    DecrementInFlight(in_flight_);
}

void Session::DropOutstandingUnlocked(Lane& lane, const Outstanding& item,
                                      bool failed) {
  if (failed)
    lane.counters.failed++;
  else
    lane.counters.dropped++;
  // An awaited item stays in flight until its empty slot leaves the window.
  if (item.awaited)
    window_.Drop(item.seq);
  else
    DecrementInFlight(in_flight_);
}

// A head that waited stall-timeout is given up, and its lane is stalled. A
// later item of a lane that is still stalled (nothing came back from it
// since) is given up as soon as it becomes the head: the lane is FIFO, so it
// is stuck behind the one given up, and waiting stall-timeout for each of
// them would cost as many timeouts as the lane had items out.
bool Session::ExpireStalledHeadUnlocked(int64_t now_ns) {
  if (!window_.HeadPending())
    return false;
  const uint64_t seq = window_.head_seq();
  Lane *l = FindLaneUnlocked(window_.head_lane());
  const bool lane_stalled = l && l->stalled;
  if (!lane_stalled &&
      now_ns - window_.head_since_ns() < config_.stall_timeout_ns)
    return false;
  window_.ExpireHead();
  if (!l)
    return true;
  l->counters.timed_out++;
  if (!lane_stalled)
    StallLaneUnlocked(*l, seq, now_ns);
  auto it = FindOutstandingUnlocked(*l, seq);
  if (it == l->outstanding.end())
    return true;
  // If it still comes back without its meta, its pts is all that tells it
  // from the lane's next item.
  if (it->pts_ns != kNoTime) {
    l->expired.emplace_back(it->pts_ns, seq);
    while (l->expired.size() > kExpiredKept)
      l->expired.pop_front();
  }
  l->outstanding.erase(it);
  return true;
}

// Nothing came back from the lane while one of its items was the head for
// stall-timeout: it gets no new items while another lane can take them,
// until anything comes back from it (HeardFromUnlocked).
void Session::StallLaneUnlocked(Lane& lane, uint64_t head_seq, int64_t now_ns) {
  lane.counters.stalls++;
  lane.stalled = true;
  lane.stall_kind = lane.in_push ? StallKind::kBlocked : StallKind::kSilent;
  lane.stalled_seq = lane.in_push ? lane.pushing_seq : head_seq;
  lane.stalled_ns = now_ns;
  NotifyAllUnlocked();
}

void Session::RecordSojournUnlocked(int64_t ns) {
  sojourn_max_ = std::max(sojourn_max_, ns);
  if (++sojourn_count_ >= kSojournRun) {
    sojourn_max_prev_ = sojourn_max_;
    sojourn_max_ = 0;
    sojourn_count_ = 0;
  }
}

int64_t Session::AddedLatencyUnlocked() const {
  return std::min(std::max(sojourn_max_, sojourn_max_prev_),
                  config_.stall_timeout_ns);
}

void Session::CheckLatencyUnlocked(ReadyBatch *batch) {
  if (latency_announced_)
    return;
  // Small changes are not worth a pipeline-wide latency recalculation.
  const int64_t margin =
      std::max<int64_t>(1'000'000, latency_reported_ns_ / 10);
  if (AddedLatencyUnlocked() > latency_reported_ns_ + margin) {
    latency_announced_ = true;
    batch->latency_grew = true;
  }
}

void Session::UpdateAccountedUnlocked(int64_t now_ns) {
  if (!input_ended_ || !window_.empty() || accounted_since_ns_ != kNoTime)
    return;
  accounted_since_ns_ = now_ns;
  // The fan-in's output task decides on EOS from here on.
  generation_++;
  NotifyOutputUnlocked();
}

// A notification reaches the waiters once, however many events come before
// they run: every notify_all with a waiter is a system call.
bool Session::ClaimAdmitNotifyUnlocked() {
  if (admit_waiters_ == 0 || admit_notified_)
    return false;
  admit_notified_ = true;
  return true;
}

void Session::NotifyAdmitUnlocked() {
  if (!ClaimAdmitNotifyUnlocked())
    return;
  if (defer_admit_notify_)
    admit_notify_deferred_ = true;
  else
    admit_cv_.notify_all();
}

void Session::NotifyOutputUnlocked() {
  if (output_waiters_ > 0 && !output_notified_) {
    output_notified_ = true;
    output_cv_.notify_all();
  }
}

void Session::NotifyAllUnlocked() {
  generation_++;
  NotifyAdmitUnlocked();
  NotifyOutputUnlocked();
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// Replay: a failed lane hands over the items it held, and the fan-out sends
// them again to other lanes, so that the window still gets every one.
#include <algorithm>
#include <iterator>
#include <vector>

#include "gpufan/session.h"

namespace gpufan {

std::vector<ReplayItem> Session::FailLaneForReplay(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  std::vector<ReplayItem> out;
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return out;
  l->failed = true;
  // its frames go again: what it returned without our meta is not waited for
  unmatched_ += l->unmarked.size();
  l->unmarked.clear();
  for (const Outstanding& item : l->outstanding) {
    const bool in_push = l->in_push && l->pushing_seq == item.seq;
    if (in_push && item.replayed) {
      // Its push failed on a second lane: the frame, not the lanes, is
      // likely what fails.
      DropOutstandingUnlocked(*l, item, /*failed=*/true);
    } else if (item.awaited && window_.IsPending(item.seq)) {
      out.push_back(ReplayItem{item.seq, item.pts_ns, item.stream, item.frames,
                               item.sent_before + item.outputs});
      // Waiting since before the failure: it gets a whole stall timeout on
      // its next lane (Redispatch moves it there).
      if (window_.HeadPending() && window_.head_seq() == item.seq)
        window_.RestartHeadClock(clock_->NowNs());
    } else {
      DropOutstandingUnlocked(*l, item, false);
    }
  }
  l->counters.handed_over += out.size();
  l->outstanding.clear();
  l->queued = 0;
  NotifyAllUnlocked();
  return out;
}

uint32_t Session::PickReplayLaneUnlocked(const std::vector<uint32_t>& allowed) {
  // Active lanes first, stalled ones only when nothing else is left (as
  // SchedulableUnlocked ranks them); among those the soonest to finish one
  // more item.
  uint32_t best = kNoLane;
  bool best_stalled = true;
  double best_cost = 0.0;
  for (uint32_t id : allowed) {
    Lane *l = FindLaneUnlocked(id);
    if (!l || l->failed || !l->eligible || !l->claimed)
      continue;
    const double service =
        static_cast<double>(std::max<int64_t>(l->service.EstimateNs(), 1));
    const double weight = l->weight > 0.0 ? l->weight : 1.0;
    const double cost =
        static_cast<double>(l->outstanding.size() + 1) * service / weight;
    if (best == kNoLane || (best_stalled && !l->stalled) ||
        (best_stalled == l->stalled && cost < best_cost)) {
      best = id;
      best_stalled = l->stalled;
      best_cost = cost;
    }
  }
  return best;
}

Dispatch Session::Redispatch(uint64_t seq, uint32_t from_lane, int64_t pts_ns,
                             const std::vector<uint32_t>& allowed) {
  std::lock_guard<Mutex> lock(mutex_);
  if (flushing_)
    return Dispatch{DispatchStatus::kFlushing};
  // The slot's lane says who holds it: another thread that took it over
  // (its new lane failed too) sends it on, not this one.
  if (!window_.IsPending(seq) || window_.SlotLane(seq) != from_lane)
    return Dispatch{DispatchStatus::kGone};
  // Sent again already, to a lane that could not queue it: it moves.
  if (Lane *from = FindLaneUnlocked(from_lane)) {
    auto it = FindOutstandingUnlocked(*from, seq);
    if (it != from->outstanding.end()) {
      from->outstanding.erase(it);
      if (from->queued > 0)
        from->queued--;
      from->counters.replayed--;
    }
  }
  return ReassignUnlocked(seq, pts_ns, allowed);
}

Dispatch Session::ReassignUnlocked(uint64_t seq, int64_t pts_ns,
                                   const std::vector<uint32_t>& allowed) {
  const uint32_t lane_id = PickReplayLaneUnlocked(allowed);
  if (lane_id == kNoLane)
    return Dispatch{DispatchStatus::kNoLanes};
  Lane *l = FindLaneUnlocked(lane_id);
  const int64_t now = clock_->NowNs();
  Outstanding item;
  item.seq = seq;
  item.pts_ns = pts_ns;
  item.dispatched_ns = now;
  item.awaited = true;
  item.replayed = true;
  item.stream = window_.SlotStream(seq);
  // By seq, as FindOutstandingUnlocked expects.
  auto at = std::lower_bound(
      l->outstanding.begin(), l->outstanding.end(), seq,
      [](const Outstanding& o, uint64_t s) { return o.seq < s; });
  l->outstanding.insert(at, item);
  l->queued++;
  l->counters.replayed++;
  window_.Reassign(seq, lane_id, now);
  NotifyAllUnlocked();
  return Dispatch{DispatchStatus::kOk, lane_id, seq, true};
}

Dispatch Session::ReplayChunk(const ReplayItem& item, uint32_t from_lane,
                              const std::vector<uint32_t>& allowed) {
  std::lock_guard<Mutex> lock(mutex_);
  if (flushing_)
    return Dispatch{DispatchStatus::kFlushing};
  if (!window_.IsPending(item.seq) || window_.SlotLane(item.seq) != from_lane)
    return Dispatch{DispatchStatus::kGone};
  const Dispatch d = ReassignUnlocked(item.seq, item.pts_ns, allowed);
  if (d.status != DispatchStatus::kOk)
    return d;
  Lane *to = FindLaneUnlocked(d.lane);
  auto it = FindOutstandingUnlocked(*to, item.seq);
  it->frames = item.frames;
  it->sent_before = item.sent;
  // a chunk still being filled goes on filling there
  if (Lane *from = FindLaneUnlocked(from_lane); from && from->filling == item.seq) {
    from->filling.reset();
    to->filling = item.seq;
  }
  return d;
}

uint32_t Session::ChunkOutputsSent(uint32_t lane, uint64_t seq) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto l = lanes_.find(lane);
  if (l == lanes_.end())
    return 0;
  for (const Outstanding& o : l->second.outstanding)
    if (o.seq == seq)
      return o.sent_before;
  return 0;
}

void Session::GiveUpReplay(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  if (!window_.Drop(seq))
    return;
  if (Lane *l = FindLaneUnlocked(lane))
    l->counters.dropped++;
  NotifyAllUnlocked();
}

void Session::SetStallFailsLane(bool fails) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.stall_fails_lane = fails;
}

Dispatch Session::MoveUnstarted(uint64_t seq, uint32_t from_lane,
                                const std::vector<uint32_t>& allowed) {
  std::lock_guard<Mutex> lock(mutex_);
  if (flushing_)
    return Dispatch{DispatchStatus::kFlushing};
  Lane *from = FindLaneUnlocked(from_lane);
  if (!from || !window_.IsPending(seq) || window_.SlotLane(seq) != from_lane)
    return Dispatch{DispatchStatus::kGone};
  auto it = FindOutstandingUnlocked(*from, seq);
  if (it == from->outstanding.end() || it->started_ns != kNoTime)
    return Dispatch{DispatchStatus::kGone};
  std::vector<uint32_t> others;
  // A chunk still being filled goes only to a lane no other stream fills.
  const bool filling = from->filling == seq;
  std::copy_if(allowed.begin(), allowed.end(), std::back_inserter(others),
               [&](uint32_t id) {
                 if (id == from_lane)
                   return false;
                 Lane *l = FindLaneUnlocked(id);
                 return !filling || !l || !l->filling;
               });
  const uint32_t frames = it->frames;  // it has no outputs: not begun
  const Dispatch d = ReassignUnlocked(seq, it->pts_ns, others);
  if (d.status != DispatchStatus::kOk)
    return d;
  Lane *to = FindLaneUnlocked(d.lane);
  FindOutstandingUnlocked(*to, seq)->frames = frames;
  // a chunk still being filled goes on filling there
  if (from->filling == seq) {
    from->filling.reset();
    to->filling = seq;
  }
  from->outstanding.erase(FindOutstandingUnlocked(*from, seq));
  if (from->queued > 0)
    from->queued--;
  from->counters.handed_over++;
  return d;
}

void Session::SetChunkMode(bool chunks) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.chunks = chunks;
}

void Session::SetErrorsReplay(bool replay) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.errors_replay = replay;
}

bool Session::stall_fails_lane() const {
  std::lock_guard<Mutex> lock(mutex_);
  return config_.stall_fails_lane;
}

bool Session::IsLaneFailed(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.failed;
}

uint64_t Session::ReleasedThrough() const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.released_through();
}

uint64_t Session::StreamReleasedThrough(uint32_t stream) const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.StreamReleasedThrough(stream);
}

uint64_t Session::NextSeq() const {
  std::lock_guard<Mutex> lock(mutex_);
  return next_seq_;
}

}  // namespace gpufan

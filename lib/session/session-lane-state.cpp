// SPDX-License-Identifier: LGPL-2.1-or-later
// Where each lane stands (LaneHealth): which lanes the scheduler may pick, how
// a lane stalls, and how a marker or an arrival proves it alive again and its
// lost items dropped.
#include "gpufan/session.h"

#include <algorithm>
#include <vector>

namespace gpufan {

namespace {

constexpr size_t kExpiredKept = 32;

}  // namespace

const char *LaneHealthName(LaneHealth state) {
  switch (state) {
    case LaneHealth::kActive:
      return "active";
    case LaneHealth::kInactive:
      return "inactive";
    case LaneHealth::kJoining:
      return "joining";
    case LaneHealth::kStalled:
      return "stalled";
    case LaneHealth::kFailed:
      return "failed";
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

bool Session::AnyClaimedUnlocked() const {
  for (const auto& [id, l] : lanes_)
    if (l.claimed && l.eligible)
      return true;
  return false;
}

LaneHealth Session::StateOfUnlocked(const Lane& lane, bool any_claimed) {
  if (lane.failed)
    return LaneHealth::kFailed;
  if (!lane.eligible)
    return LaneHealth::kInactive;
  if (lane.stalled)
    return LaneHealth::kStalled;
  if (!lane.claimed && any_claimed)
    return LaneHealth::kJoining;
  return LaneHealth::kActive;
}

// The lanes the scheduler may pick, in lanes_ order: the active ones; while
// there are none, the joining ones (a fan-in whose lanes all went away must
// not stop the stream: their items are placed in turn or dropped as late,
// never released ahead of older ones); while there are none of those either,
// the stalled ones (one lane that is merely slow must not fail the stream).
void Session::SchedulableUnlocked(std::vector<bool> *schedulable,
                                  bool *joining) {
  // Higher is picked first; inactive lanes never.
  auto rank = [](LaneHealth state) {
    switch (state) {
      case LaneHealth::kActive:
        return 3;
      case LaneHealth::kJoining:
        return 2;
      case LaneHealth::kStalled:
        return 1;
      case LaneHealth::kInactive:
      case LaneHealth::kFailed:
        break;
    }
    return 0;
  };
  const bool any_claimed = AnyClaimedUnlocked();
  lane_ranks_.clear();
  int best = 0;
  *joining = false;
  for (const auto& [id, l] : lanes_) {
    const LaneHealth state = StateOfUnlocked(l, any_claimed);
    *joining |= state == LaneHealth::kJoining;
    lane_ranks_.push_back(rank(state));
    best = std::max(best, lane_ranks_.back());
  }
  schedulable->clear();
  for (int r : lane_ranks_)
    schedulable->push_back(best > 0 && r == best);
}

void Session::ProveLane(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  ProveLaneUnlocked(lane, seq);
  NotifyAllUnlocked();
}

ReadyBatch Session::ProveLaneAndTakeReady(uint32_t lane, uint64_t seq) {
  ReadyBatch batch;
  ProveLaneAndTakeReady(lane, seq, &batch);
  return batch;
}

void Session::ProveLaneAndTakeReady(uint32_t lane, uint64_t seq,
                                    ReadyBatch *batch) {
  StartBatch(batch);
  std::unique_lock<Mutex> lock(mutex_);
  defer_admit_notify_ = true;
  ProveLaneUnlocked(lane, seq);
  NotifyAdmitUnlocked();
  TakeReadyAndUnlock(lock, batch);
}

void Session::ProveLaneUnlocked(uint32_t lane, uint64_t seq) {
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return;
  HeardFromUnlocked(*l);
  // Behind a replayed item: it was queued ahead of the lane's own items, so
  // the marker proves only it.
  auto marker =
      std::find(l->replay_markers.begin(), l->replay_markers.end(), seq);
  if (marker != l->replay_markers.end()) {
    l->replay_markers.erase(marker);
    auto it = FindOutstandingUnlocked(*l, seq);
    if (it != l->outstanding.end()) {
      const Outstanding item = *it;
      l->outstanding.erase(it);
      DropOutstandingUnlocked(*l, item, false);
    }
    return;
  }
  // The marker followed item `seq` on the FIFO lane: the buffers held
  // without our meta came from it or before it, and what was pushed before
  // it and is still outstanding was dropped by the branch.
  for (Unmarked& u : l->unmarked)
    u.limit_seq = std::min(u.limit_seq, seq + 1);
  ResolveUnmarkedUnlocked(*l, true);
  auto& fifo = l->outstanding;
  auto end = std::find_if(fifo.begin(), fifo.end(),
                          [seq](const Outstanding& o) { return o.seq > seq; });
  SettleFrontUnlocked(*l, static_cast<size_t>(end - fifo.begin()), seq,
                      std::nullopt);
}

void Session::HeardFromUnlocked(Lane& lane) {
  if (!lane.stalled)
    return;
  // Something came back: the lane answers again.
  lane.stalled = false;
  lane.stall_kind = StallKind::kNone;
  NotifyAllUnlocked();
}

uint64_t Session::SetLaneFailed(uint32_t lane, bool failed) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return 0;
  l->failed = failed;
  if (!failed)
    return 0;
  uint64_t lost = 0;
  for (const Outstanding& item : l->outstanding) {
    if (!item.awaited || !window_.IsPending(item.seq))
      continue;
    if (!config_.chunks)
      lost++;  // a frame
    else if (item.frames > item.sent_before + item.outputs)
      // (none: its first is on its way)
      lost += item.frames - item.sent_before - item.outputs;
  }
  // Nothing more comes out of it. The item inside the push that failed
  // counts as failed, the others as dropped.
  DropAllOutstandingUnlocked(*l, /*push_failed=*/true);
  return lost;
}

void Session::NoteOutputFailed() {
  std::lock_guard<Mutex> lock(mutex_);
  output_failed_ = true;
}

bool Session::output_failed() const {
  std::lock_guard<Mutex> lock(mutex_);
  return output_failed_;
}

void Session::LaneEnded(uint32_t lane, std::optional<uint64_t> before_seq) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return;
  if (!before_seq) {
    DropAllOutstandingUnlocked(*l);
    return;
  }
  // Items dispatched after the EOS (a stream that started again) follow it
  // on the lane: only those before it are gone.
  ResolveUnmarkedUnlocked(*l, true);
  auto& fifo = l->outstanding;
  auto end = std::find_if(fifo.begin(), fifo.end(), [&](const Outstanding& o) {
    return o.seq >= *before_seq;
  });
  for (auto it = fifo.begin(); it != end; ++it)
    DropOutstandingUnlocked(*l, *it, false);
  fifo.erase(fifo.begin(), end);
  NotifyAllUnlocked();
}

void Session::DropAllOutstandingUnlocked(Lane& lane, bool push_failed) {
  // what it returned without our meta is matched now or never
  ResolveUnmarkedUnlocked(lane, true);
  for (const Outstanding& item : lane.outstanding)
    DropOutstandingUnlocked(
        lane, item,
        push_failed && lane.in_push && item.seq == lane.pushing_seq);
  lane.outstanding.clear();
  lane.queued = 0;
  NotifyAllUnlocked();
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
  if (now_ns < HeadDueUnlocked())
    return false;
  if (config_.stall_fails_lane && l && !l->failed) {
    // on-stall=replay: the lane fails instead, and the stall listener has
    // the fan-out send its items again (FailLaneForReplay). The head waits
    // once more meanwhile: given up only if nobody takes it over.
    l->failed = true;
    RecordStallUnlocked(*l, seq, now_ns);
    window_.RestartHeadClock(now_ns);
    stalls_to_announce_.push_back(window_.head_lane());
    NotifyAllUnlocked();
    return false;
  }
  window_.ExpireHead();
  if (!l)
    return true;
  l->counters.timed_out++;
  if (!lane_stalled) {
    StallLaneUnlocked(*l, seq, now_ns);
    stalls_to_announce_.push_back(window_.head_lane());
  }
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
  NotifySettledUnlocked();
  return true;
}

// Nothing came back from the lane while one of its items was the head for
// stall-timeout: it gets no new items while another lane can take them,
// until anything comes back from it (HeardFromUnlocked).
void Session::StallLaneUnlocked(Lane& lane, uint64_t head_seq, int64_t now_ns) {
  RecordStallUnlocked(lane, head_seq, now_ns);
  // The fan-out learns of a new stall now (the stall listener): its first
  // liveness marker is due stall-timeout later.
  if (!lane.stalled)
    lane.marker_due_ns = now_ns + config_.stall_timeout_ns;
  lane.stalled = true;
  NotifyAllUnlocked();
}

void Session::RecordStallUnlocked(Lane& lane, uint64_t head_seq,
                                  int64_t now_ns) {
  lane.counters.stalls++;
  lane.stall_kind = lane.in_push ? StallKind::kBlocked : StallKind::kSilent;
  lane.stalled_seq = lane.in_push ? lane.pushing_seq : head_seq;
  lane.stalled_ns = now_ns;
}

}  // namespace gpufan

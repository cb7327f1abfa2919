// SPDX-License-Identifier: LGPL-2.1-or-later
// Chunk mode (the fan-out's chunk=frames|keyframes): one item stands for a
// run of frames that goes whole to one lane. What differs from a frame is
// that a chunk takes long (its stall clock restarts with each sign of
// progress), has a length (its service time is learned per nominal chunk),
// and is drained at its end: the lane worker waits until it is settled
// before it resets the branch for the next one.
#include "gpufan/session.h"

#include <algorithm>

namespace gpufan {

bool Session::NoteProgressUnlocked(uint32_t lane, uint64_t seq) {
  if (!window_.HeadPending() || window_.head_seq() != seq ||
      window_.head_lane() != lane)
    return false;
  // The output's wait ends at the old deadline, finds the head not due and
  // waits again (one wake-up per stall-timeout, not one per frame).
  window_.RestartHeadClock(clock_->NowNs());
  return true;
}

void Session::NoteProgress(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  NoteProgressUnlocked(lane, seq);
}

void Session::NoteChunkFrame(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  NoteProgressUnlocked(lane, seq);
  if (Lane *l = FindLaneUnlocked(lane)) {
    auto it = FindOutstandingUnlocked(*l, seq);
    if (it != l->outstanding.end())
      it->frames++;
  }
}

void Session::EndChunkFill(uint32_t lane, uint64_t seq) {
  std::unique_lock<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || l->filling != seq)
    return;
  l->filling.reset();
  // room for the next chunk of any stream
  defer_admit_notify_ = true;
  NotifyAdmitUnlocked();
  UnlockAndNotifyAdmit(lock);
}

void Session::SetItemUnits(uint32_t lane, uint64_t seq, uint32_t units,
                           uint32_t nominal) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || units == 0 || nominal == 0)
    return;
  // Only a long chunk is scaled down: a short one (cut by a caps change,
  // EOS or a stall) costs its drain and reset like any other, and scaling
  // that up would make its lane look slow.
  auto it = FindOutstandingUnlocked(*l, seq);
  if (it != l->outstanding.end())
    it->work_scale = std::min(1.0, static_cast<double>(nominal) / units);
}

Session::ChunkState Session::ChunkOutput(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  if (NoteProgressUnlocked(lane, seq))
    return ChunkState::kHead;
  return window_.IsOpen(seq) ? ChunkState::kWaiting : ChunkState::kGone;
}

bool Session::NoteChunkStreamed(uint32_t lane, uint64_t seq, size_t outputs) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || !window_.IsPending(seq))
    return false;
  auto it = FindOutstandingUnlocked(*l, seq);
  if (it == l->outstanding.end())
    return false;
  it->outputs += static_cast<uint32_t>(outputs);
  return true;
}

bool Session::IsOpen(uint64_t seq) const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.IsOpen(seq);
}

std::optional<uint64_t> Session::PendingHeadSeq() const {
  std::lock_guard<Mutex> lock(mutex_);
  if (!window_.HeadPending())
    return std::nullopt;
  return window_.head_seq();
}

uint32_t Session::ItemStream(uint64_t seq) const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.SlotStream(seq);
}

bool Session::WaitSettled(uint32_t lane, uint64_t seq) {
  std::unique_lock<Mutex> lock(mutex_);
  bool settled = false;
  auto done = [&] {
    Lane *l = FindLaneUnlocked(lane);
    if (!l || FindOutstandingUnlocked(*l, seq) == l->outstanding.end()) {
      settled = true;
      return true;
    }
    // ended by its branch, kept for replay (EndChunkByBranch)
    if (l->ended_by_branch == seq)
      return true;
    return flushing_ || !l->eligible;
  };
  // Every wake-up is an event: a completion, drop or give-up
  // (NotifySettledUnlocked), a flush, a lane change (NotifyAllUnlocked). A
  // pending item is given up at the latest stall-timeout without progress
  // after it heads the window.
  settle_waiters_++;
  settle_cv_.wait(lock, done);
  settle_waiters_--;
  return settled;
}

void Session::EndChunkByBranch(uint32_t lane, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l)
    return;
  l->ended_by_branch = seq;
  auto it = FindOutstandingUnlocked(*l, seq);
  // replay: the lane fails next (its worker sees this), and the chunk goes
  // again with its other items
  if (it != l->outstanding.end() && !config_.errors_replay) {
    const Outstanding item = *it;
    l->outstanding.erase(it);
    DropOutstandingUnlocked(*l, item, /*failed=*/true);
  }
  NotifyAllUnlocked();
}

bool Session::ChunkEndedByBranch(uint32_t lane, uint64_t seq) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.ended_by_branch == seq;
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// The fan-in side: an item comes back from its branch and is matched to what
// was dispatched (by seq, pts, or FIFO order), completed and put in the
// window.
#include "gpufan/session.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace gpufan {

Arrival Session::Arrive(uint32_t lane, std::optional<uint64_t> seq,
                        int64_t pts_ns, PayloadPtr payload, bool wake_output) {
  std::lock_guard<Mutex> lock(mutex_);
  return ArriveUnlocked(lane, seq, pts_ns, std::move(payload), wake_output);
}

ReadyBatch Session::ArriveAndTakeReady(uint32_t lane,
                                       std::optional<uint64_t> seq,
                                       int64_t pts_ns, PayloadPtr payload,
                                       Arrival *arrival) {
  ReadyBatch batch;
  ArriveAndTakeReady(lane, seq, pts_ns, std::move(payload), arrival, &batch);
  return batch;
}

void Session::ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                                 int64_t pts_ns, PayloadPtr payload,
                                 Arrival *arrival, ReadyBatch *batch) {
  StartBatch(batch);
  std::unique_lock<Mutex> lock(mutex_);
  // Once both are done, and after unlocking: the dispatcher this wakes would
  // block on the lock at once otherwise.
  defer_admit_notify_ = true;
  *arrival = ArriveUnlocked(lane, seq, pts_ns, std::move(payload), false);
  TakeReadyAndUnlock(lock, batch);
}

Arrival Session::ArriveUnlocked(uint32_t lane, std::optional<uint64_t> seq,
                                int64_t pts_ns, PayloadPtr payload,
                                bool wake_output) {
  Lane *l = FindLaneUnlocked(lane);
  if (l && l->failed) {
    // Its items were given up or sent again (FailLaneForReplay): what it
    // still returns is late, or it would leave twice.
    l->counters.late++;
    return Arrival{ArrivalStatus::kLate, seq.value_or(0)};
  }

  if (l) {
    HeardFromUnlocked(*l);
    if (!seq && pts_ns != kNoTime && MustHoldUnmarkedUnlocked(*l, pts_ns)) {
      l->unmarked.push_back(Unmarked{pts_ns, next_seq_, std::move(payload)});
      ResolveUnmarkedUnlocked(*l, false);
      if (wake_output)
        NotifyAllUnlocked();
      else
        NotifyAdmitUnlocked();
      return Arrival{ArrivalStatus::kAccepted, 0};
    }
    // what this one carries ends the guessing for those held before it
    ResolveUnmarkedUnlocked(*l, true);
    auto& fifo = l->outstanding;
    auto match = fifo.end();
    if (seq) {
      match = FindOutstandingUnlocked(*l, *seq);
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
      // Each lane is FIFO: what comes out first is the oldest item (a
      // replayed one was queued out of the lane's order).
      if (match == fifo.end())
        match = std::find_if(fifo.begin(), fifo.end(),
                             [](const Outstanding& o) { return !o.replayed; });
      if (match == fifo.end() && !fifo.empty())
        match = fifo.begin();
    }
    if (match != fifo.end())
      return TakeMatchUnlocked(*l, match, std::move(payload), wake_output);
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
    uint32_t stream = kMainStream;
    for (const auto& [unawaited_seq, of] : unawaited_streams_)
      if (unawaited_seq == *seq)
        stream = of;
    if (window_.InsertArrived(*seq, lane, std::move(payload), stream) ==
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

Arrival Session::TakeMatchUnlocked(Lane& l,
                                   std::deque<Outstanding>::iterator match,
                                   PayloadPtr payload, bool wake_output) {
  auto& fifo = l.outstanding;
  const Outstanding item = *match;
  if (item.replayed)
    fifo.erase(match);
  else  // everything dispatched to this lane before it is proven gone
    SettleFrontUnlocked(l, static_cast<size_t>(match - fifo.begin()) + 1,
                        std::nullopt, item.seq);
  const int64_t now = clock_->NowNs();
  CompleteUnlocked(l, item, now);
  if (item.awaited) {
    RecordSojournUnlocked(now - item.dispatched_ns);
    if (window_.Arrive(item.seq, std::move(payload)) ==
        ReorderWindow::ArriveResult::kLate) {
      // Its slot was forgotten while it was out (FlushStream): the
      // window dropped it. It still completed.
      l.counters.late++;
      NotifyAdmitUnlocked();
      return Arrival{ArrivalStatus::kLate, item.seq};
    }
    if (window_.HeadPending() && window_.head_seq() != item.seq)
      l.counters.reorder_waits++;
  } else if (window_.InsertArrived(item.seq, l.counters.lane,
                                   std::move(payload), item.stream) ==
             ReorderWindow::ArriveResult::kLate) {
    // Nobody kept its place, and the output has moved past it. It still
    // completed: its lane has room again.
    l.counters.late++;
    NotifyAdmitUnlocked();
    return Arrival{ArrivalStatus::kLate, item.seq};
  }
  if (wake_output)
    NotifyAllUnlocked();
  else
    NotifyAdmitUnlocked();
  return Arrival{ArrivalStatus::kAccepted, item.seq};
}

void Session::AttachBefore(uint64_t seq, PayloadPtr payload) {
  std::lock_guard<Mutex> lock(mutex_);
  // "After everything in flight" is the next item's place.
  window_.AttachBefore(std::min(seq, next_seq_), std::move(payload));
  NotifyAllUnlocked();
}

void Session::CompleteUnlocked(Lane& lane, const Outstanding& item,
                               int64_t now_ns) {
  lane.counters.completed++;
  if (trace_->enabled())
    trace_->Instant(TraceWriter::LaneOutTrack(lane.counters.lane), "arrive",
                    now_ns, item.seq);
  // Work on this item began when it started (after its copy to the lane's
  // GPU, made first and counted apart as the transfer) or when the lane
  // finished the one before, whichever is later: queueing inside the branch
  // is not service time.
  const int64_t began =
      std::max(item.started_ns != kNoTime ? item.started_ns + item.copy_ns
                                          : item.dispatched_ns,
               lane.last_completion_ns);
  const int64_t before = lane.service.EstimateNs();
  lane.service.AddSample(static_cast<int64_t>(
      static_cast<double>(now_ns - began) * item.work_scale));
  if (lane.service.EstimateNs() != before) {
    lane.queue_limit_peak =
        std::max(lane.queue_limit_peak, LaneQueueLimitUnlocked(lane));
    UpdateSpreadAllowanceUnlocked();
  }
  lane.last_completion_ns = now_ns;
  if (!item.awaited)
    DecrementInFlightUnlocked(item.stream);
  NotifySettledUnlocked();
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
    DecrementInFlightUnlocked(item.stream);
  NotifySettledUnlocked();
}

void Session::SettleFrontUnlocked(Lane& lane, size_t count,
                                  std::optional<uint64_t> proven,
                                  std::optional<uint64_t> taken) {
  auto& fifo = lane.outstanding;
  const auto end = fifo.begin() + static_cast<std::ptrdiff_t>(count);
  const auto kept_end =
      std::remove_if(fifo.begin(), end, [&](const Outstanding& o) {
        if (taken && o.seq == *taken)
          return true;
        if (o.replayed && !(proven && o.seq == *proven))
          return false;
        DropOutstandingUnlocked(lane, o, false);
        return true;
      });
  fifo.erase(kept_end, end);
}

void Session::DecrementInFlightUnlocked(uint32_t stream) {
  // Reset() zeroes the count while lane workers may still report; never wrap.
  if (in_flight_ > 0)
    --in_flight_;
  if (stream == kMainStream)
    return;
  auto it = streams_.find(stream);
  if (it != streams_.end() && it->second.in_flight > 0)
    --it->second.in_flight;
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// The reorder window: items leave in sequence order, whatever order they come
// back in. Bounded by Session, which opens slots only for items in flight
// (its limit plus at most one lane queue of probes), so this class only counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "gpufan/payload.h"
#include "gpufan/prelude.h"

namespace gpufan {

constexpr uint32_t kNoLane = UINT32_MAX;
// No time (a clock reading never is negative).
constexpr int64_t kNoTime = -1;
// The stream of a fan-out with one input (its `sink` pad); the streams of
// request sink pads are numbered from 1.
constexpr uint32_t kMainStream = 0;

// One released entry, in output order.
struct Released {
  PayloadPtr payload;  // null for an item that was dropped or expired
  uint64_t seq = 0;    // the slot's sequence number
  // kNoLane for attachments (events) and for items nobody waited for
  // (InsertArrived): only awaited items count as leaving the in-flight set.
  uint32_t lane = kNoLane;
  uint32_t stream = kMainStream;  // the input stream it belongs to
  int64_t opened_ns = kNoTime;    // an item's dispatch (Open), for latency
  // Set by Session::TakeReady on one payload per item of an input stream:
  // the item still counts against its stream's bound until the fan-in's
  // output of that stream is done with it (Session::StreamOutputDone).
  bool holds_stream_slot = false;
};

// Not thread-safe: owned and locked by Session.
//
// Sequence numbers opened must increase (they need not be dense: items that
// nobody waits for are never opened). A slot is *pending* until it arrives,
// is dropped, or expires; the leading run of settled slots is released.
//
// Streams: every slot and attachment belongs to an input stream (one
// sequence numbering for all). Order is kept within each stream only: a
// settled slot leaves once no slot of its own stream before it is pending,
// so a pending item of one stream holds back no other stream. Released
// slots behind a pending one stay as markers until they reach the front.
// The head (for the stall timeout) is the oldest pending slot of any stream.
class GPUFAN_API ReorderWindow {
 public:
  enum class ArriveResult {
    kStored,  // kept; released when every earlier slot has settled
    kLate,  // its slot was already released (dropped/expired): caller drops it
    kUnknown,  // never opened here
  };

  ReorderWindow() = default;

  // Opens the slot for `seq` (greater than every seq opened before).
  // `now_ns` is when it was dispatched.
  void Open(uint64_t seq, uint32_t lane, int64_t now_ns,
            uint32_t stream = kMainStream);

  // The item came back. Several payloads for one seq are kept in arrival order.
  ArriveResult Arrive(uint64_t seq, PayloadPtr payload);

  // An item that nobody opened a slot for (its lane was not claimed when it
  // was dispatched) came back with its seq: it takes its place in the order
  // if the window has not moved past it (kStored), else kLate. It never
  // leaves ahead of an older item.
  ArriveResult InsertArrived(uint64_t seq, uint32_t lane, PayloadPtr payload,
                             uint32_t stream = kMainStream);

  // The lane proved the item gone (a later item came on the same FIFO lane,
  // or the lane ended). Returns false if the slot is not pending.
  bool Drop(uint64_t seq);
  // Gives up on a pending slot anywhere in the window (its lane stalled).
  // Returns false if the slot is not pending.
  bool Expire(uint64_t seq);

  // Attaches `payload` so that it leaves right before slot `seq` (or the first
  // slot after it); when no such slot is open, it leaves once every open slot
  // has been released (before any slot opened later). Of `stream`: only that
  // stream's slots hold it back.
  void AttachBefore(uint64_t seq, PayloadPtr payload,
                    uint32_t stream = kMainStream);
  // Forgets `stream` (a flush of that stream alone): its pending and
  // arrived slots count as dropped (their empty entries still leave, so
  // that the caller counts them out), its attachments are discarded.
  // Returns how many slots it dropped.
  size_t DropStream(uint32_t stream);

  // Moves the leading settled run (and attachments before it) to `out`.
  // Returns the number of entries appended.
  // `now_ns` starts the stall clock of the new head.
  size_t PopSettled(std::vector<Released>& out, int64_t now_ns);

  // Head (oldest open slot) introspection for stall handling.
  bool empty() const { return slots_.empty(); }
  bool HeadPending() const;
  uint64_t head_seq() const;   // requires !empty()
  uint32_t head_lane() const;  // requires !empty()
  // When the head became the head (max of its dispatch time and the release of
  // the slot before it). Requires !empty().
  int64_t head_since_ns() const;
  // Gives up on a pending head (the lane stalled): marks it expired so that the
  // next PopSettled releases past it. Returns false if the head is not pending.
  bool ExpireHead();
  // A pending slot's item was sent again, to `lane` (replay): the slot is
  // its now; as the head, it waits stall-timeout from `now_ns` again.
  // Returns false if the slot is not pending.
  bool Reassign(uint64_t seq, uint32_t lane, int64_t now_ns);
  bool IsPending(uint64_t seq) const;
  // The lane of the slot for `seq` (kNoLane: no such slot).
  uint32_t SlotLane(uint64_t seq) const;
  // The stream of the slot for `seq` (kMainStream: no such slot).
  uint32_t SlotStream(uint64_t seq) const;
  // Every slot of `stream` below it has left the window: released_through()
  // or, with several streams, the stream's own mark past it (its slots
  // leave while another stream's earlier slot is pending).
  uint64_t StreamReleasedThrough(uint32_t stream) const;
  // Every seq below it has left the window.
  uint64_t released_through() const { return released_through_; }
  // The head's item made progress (chunk mode: its lane took or returned part
  // of it): its stall clock starts again at `now_ns`. Requires !empty().
  void RestartHeadClock(int64_t now_ns);

  size_t occupancy() const { return slots_.size() - released_markers_; }
  // Slots of items that were in flight (opened at dispatch), not counting
  // the ones InsertArrived placed.
  size_t awaited_occupancy() const { return occupancy() - inserted_; }
  size_t peak_occupancy() const { return peak_; }
  // True while the slot for `seq` is in the window (pending or settled).
  bool IsOpen(uint64_t seq) const;
  // True while an item of `lane` has arrived but not left yet.
  bool HoldsArrivedFrom(uint32_t lane) const;
  // True once `seq` was opened and has left the window. Sequence numbers are
  // not dense: a seq below the last release that was never opened also counts.
  bool IsReleased(uint64_t seq) const;

  // Drops every slot and attachment (flush). Keeps the peak figure.
  void Clear();

 private:
  // kReleased: it left while a slot before it (of another stream) was
  // pending; it stays as a marker until it reaches the front.
  enum class SlotState { kPending, kArrived, kDropped, kExpired, kReleased };
  // An attachment and its place: it goes out right before item `pos`, so
  // once it is out every item below `pos` is late.
  struct Attached {
    PayloadPtr payload;
    uint64_t pos = 0;
    uint32_t stream = kMainStream;
  };
  // Moves the attachments of `from` placed at or before `seq` to `to`.
  static void MoveAttachedUpTo(std::vector<Attached>& from, uint64_t seq,
                               std::vector<Attached>& to);
  void ReleaseAttached(std::vector<Attached>& attached, uint64_t seq,
                       std::vector<Released>& out);
  // Several streams: releases what `blocked` (streams with a pending slot
  // before) does not hold back.
  void ReleaseAttachedUnblocked(std::vector<Attached>& attached, uint64_t seq,
                                const std::vector<uint32_t>& blocked,
                                std::vector<Released>& out);
  struct Slot {
    uint64_t seq = 0;
    uint32_t lane = kNoLane;
    uint32_t stream = kMainStream;
    SlotState state = SlotState::kPending;
    int64_t since_ns = 0;
    int64_t opened_ns = kNoTime;  // Open's now (since_ns restarts as head)
    std::vector<Attached> before;  // attachments that precede this slot
    // What came back for it (kArrived), in arrival order: the first one
    // inline (the usual case needs no allocation), any further ones after.
    PayloadPtr payload;
    std::vector<PayloadPtr> more;
    bool awaited = true;  // opened at dispatch (false: InsertArrived)
  };

  Slot *Find(uint64_t seq);
  // PopSettled with slots of several streams.
  void PopSettledStreams(std::vector<Released>& out);
  // Releases settled slot `slot` (its entries go to `out`).
  void ReleaseSlot(Slot& slot, std::vector<Released>& out);
  // Removes released markers from the front, restarting the new head's
  // stall clock at `now_ns`.
  void PopReleasedFront(int64_t now_ns);

  std::deque<Slot> slots_;
  std::vector<Attached> trailing_;  // attachments after every open slot
  uint64_t released_through_ = 0;   // every seq < this has left
  bool any_released_ = false;
  size_t peak_ = 0;
  size_t inserted_ = 0;  // slots placed by InsertArrived, still held
  // kReleased slots still held (behind a pending one).
  size_t released_markers_ = 0;
  // A slot or attachment of a stream other than kMainStream was seen: the
  // release looks past pending slots (PopSettledStreams).
  bool streams_ = false;
  // Several streams: per stream, the release mark of its own slots and
  // attachments (each stream leaves in order, but not in step with the
  // others: released_through_ is only the front's). An item InsertArrived
  // would place below its stream's mark would leave after a later one.
  std::vector<std::pair<uint32_t, uint64_t>> stream_released_through_;
  void NoteStreamReleased(uint32_t stream, uint64_t through);
  bool BelowStreamRelease(uint32_t stream, uint64_t seq) const;
};

}  // namespace gpufan

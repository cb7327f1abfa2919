// SPDX-License-Identifier: LGPL-2.1-or-later
// The reorder window: items leave in sequence order, whatever order they come
// back in. Bounded by Session, which opens slots only for items in flight
// (its limit plus at most one lane queue of probes), so this class only counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "gpufan/payload.h"
#include "gpufan/prelude.h"

namespace gpufan {

constexpr uint32_t kNoLane = UINT32_MAX;

// One released entry, in output order.
struct Released {
  PayloadPtr payload;  // null for an item that was dropped or expired
  uint64_t seq = 0;    // the slot's sequence number
  // kNoLane for attachments (events) and for items nobody waited for
  // (InsertArrived): only awaited items count as leaving the in-flight set.
  uint32_t lane = kNoLane;
};

// Not thread-safe: owned and locked by Session.
//
// Sequence numbers opened must increase (they need not be dense: items that
// nobody waits for are never opened). A slot is *pending* until it arrives,
// is dropped, or expires; the leading run of settled slots is released.
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
  void Open(uint64_t seq, uint32_t lane, int64_t now_ns);

  // The item came back. Several payloads for one seq are kept in arrival order.
  ArriveResult Arrive(uint64_t seq, PayloadPtr payload);

  // An item that nobody opened a slot for (its lane was not claimed when it
  // was dispatched) came back with its seq: it takes its place in the order
  // if the window has not moved past it (kStored), else kLate. It never
  // leaves ahead of an older item.
  ArriveResult InsertArrived(uint64_t seq, uint32_t lane, PayloadPtr payload);

  // The lane proved the item gone (a later item came on the same FIFO lane,
  // or the lane ended). Returns false if the slot is not pending.
  bool Drop(uint64_t seq);
  // Gives up on a pending slot anywhere in the window (its lane stalled).
  // Returns false if the slot is not pending.
  bool Expire(uint64_t seq);

  // Attaches `payload` so that it leaves right before slot `seq` (or the first
  // slot after it); when no such slot is open, it leaves once every open slot
  // has been released (before any slot opened later).
  void AttachBefore(uint64_t seq, PayloadPtr payload);

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
  // Every seq below it has left the window.
  uint64_t released_through() const { return released_through_; }
  // The head's item made progress (chunk mode: its lane took or returned part
  // of it): its stall clock starts again at `now_ns`. Requires !empty().
  void RestartHeadClock(int64_t now_ns);

  size_t occupancy() const { return slots_.size(); }
  // Slots of items that were in flight (opened at dispatch), not counting
  // the ones InsertArrived placed.
  size_t awaited_occupancy() const { return slots_.size() - inserted_; }
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
  enum class SlotState { kPending, kArrived, kDropped, kExpired };
  // An attachment and its place: it goes out right before item `pos`, so
  // once it is out every item below `pos` is late.
  struct Attached {
    PayloadPtr payload;
    uint64_t pos = 0;
  };
  // Moves the attachments of `from` placed at or before `seq` to `to`.
  static void MoveAttachedUpTo(std::vector<Attached>& from, uint64_t seq,
                               std::vector<Attached>& to);
  void ReleaseAttached(std::vector<Attached>& attached, uint64_t seq,
                       std::vector<Released>& out);
  struct Slot {
    uint64_t seq = 0;
    uint32_t lane = kNoLane;
    SlotState state = SlotState::kPending;
    int64_t since_ns = 0;
    std::vector<Attached> before;  // attachments that precede this slot
    // What came back for it (kArrived), in arrival order: the first one
    // inline (the usual case needs no allocation), any further ones after.
    PayloadPtr payload;
    std::vector<PayloadPtr> more;
    bool awaited = true;  // opened at dispatch (false: InsertArrived)
  };

  Slot *Find(uint64_t seq);

  std::deque<Slot> slots_;
  std::vector<Attached> trailing_;  // attachments after every open slot
  uint64_t released_through_ = 0;   // every seq < this has left
  bool any_released_ = false;
  size_t peak_ = 0;
  size_t inserted_ = 0;  // slots placed by InsertArrived, still held
};

}  // namespace gpufan

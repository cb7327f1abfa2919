// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/reorder-window.h"

#include <algorithm>
#include <iterator>

namespace gpufan {

namespace {

// First slot with seq >= `seq` (slots are sorted by seq).
template <typename Slots>
auto LowerBound(Slots& slots, uint64_t seq) {
  return std::lower_bound(slots.begin(), slots.end(), seq,
                          [](const auto& s, uint64_t v) { return s.seq < v; });
}

}  // namespace

ReorderWindow::Slot *ReorderWindow::Find(uint64_t seq) {
  // Slots are usually consecutive seqs (every awaited item opens one): the
  // offset from the head finds it without a search.
  if (!slots_.empty() && seq >= slots_.front().seq) {
    const uint64_t offset = seq - slots_.front().seq;
    if (offset < slots_.size() && slots_[offset].seq == seq)
      return &slots_[offset];
  }
  auto it = LowerBound(slots_, seq);
  return it != slots_.end() && it->seq == seq ? &*it : nullptr;
}

void ReorderWindow::Open(uint64_t seq, uint32_t lane, int64_t now_ns,
                         uint32_t stream) {
  Slot slot;
  slot.seq = seq;
  slot.lane = lane;
  slot.stream = stream;
  streams_ = streams_ || stream != kMainStream;
  slot.since_ns = now_ns;
  slot.opened_ns = now_ns;
  // Attachments waiting behind every released slot precede this one.
  slot.before = std::move(trailing_);
  trailing_.clear();
  slots_.push_back(std::move(slot));
  peak_ = std::max(peak_, occupancy());
}

ReorderWindow::ArriveResult ReorderWindow::Arrive(uint64_t seq,
                                                  PayloadPtr payload) {
  Slot *slot = Find(seq);
  if (!slot)
    return any_released_ && seq < released_through_ ? ArriveResult::kLate
                                                    : ArriveResult::kUnknown;
  switch (slot->state) {
    case SlotState::kPending:
      slot->state = SlotState::kArrived;
      slot->payload = std::move(payload);
      return ArriveResult::kStored;
    case SlotState::kArrived:
      slot->more.push_back(std::move(payload));
      return ArriveResult::kStored;
    case SlotState::kDropped:
    case SlotState::kExpired:
    case SlotState::kReleased:
      // Its place in the output was given up (or taken); keeping it would
      // reorder.
      return ArriveResult::kLate;
  }
  return ArriveResult::kUnknown;
}

ReorderWindow::ArriveResult ReorderWindow::InsertArrived(uint64_t seq,
                                                         uint32_t lane,
                                                         PayloadPtr payload,
                                                         uint32_t stream) {
  if (any_released_ && seq < released_through_)
    return ArriveResult::kLate;
  auto it = LowerBound(slots_, seq);
  if (it != slots_.end() && it->seq == seq)
    return Arrive(seq, std::move(payload));
  if (streams_ && BelowStreamRelease(stream, seq))
    return ArriveResult::kLate;
  Slot slot;
  slot.seq = seq;
  slot.lane = lane;
  slot.stream = stream;
  streams_ = streams_ || stream != kMainStream;
  slot.state = SlotState::kArrived;
  slot.awaited = false;
  slot.payload = std::move(payload);
  // Attachments placed at or before it precede it; later ones follow it.
  if (it == slots_.end()) {
    MoveAttachedUpTo(trailing_, seq, slot.before);
  } else {
    MoveAttachedUpTo(it->before, seq, slot.before);
    // A new head takes over the stall clock of the old one.
    slot.since_ns = it->since_ns;
  }
  slots_.insert(it, std::move(slot));
  inserted_++;
  peak_ = std::max(peak_, occupancy());
  return ArriveResult::kStored;
}

bool ReorderWindow::Drop(uint64_t seq) {
  Slot *slot = Find(seq);
  if (!slot || slot->state != SlotState::kPending)
    return false;
  slot->state = SlotState::kDropped;
  return true;
}

bool ReorderWindow::Expire(uint64_t seq) {
  Slot *slot = Find(seq);
  if (!slot || slot->state != SlotState::kPending)
    return false;
  slot->state = SlotState::kExpired;
  return true;
}

void ReorderWindow::AttachBefore(uint64_t seq, PayloadPtr payload,
                                 uint32_t stream) {
  streams_ = streams_ || stream != kMainStream;
  auto it = LowerBound(slots_, seq);
  if (it == slots_.end())
    trailing_.push_back(Attached{std::move(payload), seq, stream});
  else
    it->before.push_back(Attached{std::move(payload), seq, stream});
}

size_t ReorderWindow::DropStream(uint32_t stream) {
  auto of_stream = [stream](const Attached& a) {
    return a.stream == stream;
  };
  size_t dropped = 0;
  for (Slot& slot : slots_) {
    slot.before.erase(
        std::remove_if(slot.before.begin(), slot.before.end(), of_stream),
        slot.before.end());
    if (slot.stream != stream || (slot.state != SlotState::kPending &&
                                  slot.state != SlotState::kArrived))
      continue;
    slot.state = SlotState::kDropped;
    slot.payload.reset();
    slot.more.clear();
    dropped++;
  }
  trailing_.erase(std::remove_if(trailing_.begin(), trailing_.end(), of_stream),
                  trailing_.end());
  return dropped;
}

void ReorderWindow::MoveAttachedUpTo(std::vector<Attached>& from, uint64_t seq,
                                     std::vector<Attached>& to) {
  auto keep =
      std::stable_partition(from.begin(), from.end(),
                            [seq](const Attached& a) { return a.pos <= seq; });
  for (auto it = from.begin(); it != keep; ++it)
    to.push_back(std::move(*it));
  from.erase(from.begin(), keep);
}

void ReorderWindow::ReleaseAttached(std::vector<Attached>& attached,
                                    uint64_t seq, std::vector<Released>& out) {
  for (Attached& a : attached) {
    out.push_back(Released{std::move(a.payload), seq, kNoLane, a.stream});
    if (a.pos > 0 && (!any_released_ || a.pos > released_through_)) {
      released_through_ = a.pos;
      any_released_ = true;
    }
  }
  attached.clear();
}

void ReorderWindow::ReleaseSlot(Slot& slot, std::vector<Released>& out) {
  if (slot.state != SlotState::kArrived) {
    // Dropped or expired: one empty entry so that the caller can count it
    // (as in flight only if it was: DropStream drops InsertArrived's too).
    out.push_back(Released{nullptr, slot.seq,
                           slot.awaited ? slot.lane : kNoLane, slot.stream});
  } else {
    const uint32_t lane = slot.awaited ? slot.lane : kNoLane;
    out.push_back(Released{std::move(slot.payload), slot.seq, lane,
                           slot.stream, slot.opened_ns});
    for (PayloadPtr& p : slot.more)
      out.push_back(
          Released{std::move(p), slot.seq, lane, slot.stream, slot.opened_ns});
    slot.more.clear();
  }
  // Counted out as it leaves: a marker is no longer held (awaited_occupancy).
  if (!slot.awaited)
    inserted_--;
  if (streams_)
    NoteStreamReleased(slot.stream, slot.seq + 1);
  slot.state = SlotState::kReleased;
  released_markers_++;
}

void ReorderWindow::NoteStreamReleased(uint32_t stream, uint64_t through) {
  for (auto& [id, mark] : stream_released_through_) {
    if (id == stream) {
      mark = std::max(mark, through);
      return;
    }
  }
  stream_released_through_.emplace_back(stream, through);
}

bool ReorderWindow::BelowStreamRelease(uint32_t stream, uint64_t seq) const {
  for (const auto& [id, mark] : stream_released_through_)
    if (id == stream)
      return seq < mark;
  return false;
}

void ReorderWindow::PopReleasedFront(int64_t now_ns) {
  while (!slots_.empty() && slots_.front().state == SlotState::kReleased) {
    Slot& head = slots_.front();
    released_through_ = head.seq + 1;
    any_released_ = true;
    released_markers_--;
    // Nothing is ever held back before the front; kept in place regardless.
    std::vector<Attached> before = std::move(head.before);
    slots_.pop_front();
    if (slots_.empty()) {
      trailing_.insert(trailing_.begin(),
                       std::make_move_iterator(before.begin()),
                       std::make_move_iterator(before.end()));
      break;
    }
    Slot& next = slots_.front();
    next.before.insert(next.before.begin(),
                       std::make_move_iterator(before.begin()),
                       std::make_move_iterator(before.end()));
    next.since_ns = std::max(next.since_ns, now_ns);
  }
}

size_t ReorderWindow::PopSettled(std::vector<Released>& out, int64_t now_ns) {
  const size_t start = out.size();
  if (streams_) {
    PopSettledStreams(out);
    PopReleasedFront(now_ns);
    return out.size() - start;
  }
  while (!slots_.empty()) {
    Slot& head = slots_.front();
    // Whatever precedes the head may always leave, settled or not.
    ReleaseAttached(head.before, head.seq, out);
    if (head.state == SlotState::kPending)
      break;
    ReleaseSlot(head, out);
    PopReleasedFront(now_ns);
  }
  if (slots_.empty() && !trailing_.empty())
    ReleaseAttached(trailing_, released_through_, out);
  return out.size() - start;
}

void ReorderWindow::ReleaseAttachedUnblocked(
    std::vector<Attached>& attached, uint64_t seq,
    const std::vector<uint32_t>& blocked, std::vector<Released>& out) {
  auto is_blocked = [&blocked](uint32_t stream) {
    return std::find(blocked.begin(), blocked.end(), stream) != blocked.end();
  };
  auto kept = attached.begin();
  for (Attached& a : attached) {
    if (is_blocked(a.stream)) {
      *kept++ = std::move(a);
      continue;
    }
    out.push_back(Released{std::move(a.payload), seq, kNoLane, a.stream});
    // Once it is out, every item of its stream below its place is late.
    if (a.pos > 0)
      NoteStreamReleased(a.stream, a.pos);
  }
  attached.erase(kept, attached.end());
}

void ReorderWindow::PopSettledStreams(std::vector<Released>& out) {
  // Streams with a pending slot so far: their later slots and attachments
  // wait; every other stream's leave in their order.
  std::vector<uint32_t> blocked;
  for (Slot& slot : slots_) {
    ReleaseAttachedUnblocked(slot.before, slot.seq, blocked, out);
    if (slot.state == SlotState::kReleased)
      continue;
    const bool stream_blocked =
        std::find(blocked.begin(), blocked.end(), slot.stream) != blocked.end();
    if (slot.state == SlotState::kPending) {
      if (!stream_blocked)
        blocked.push_back(slot.stream);
      continue;
    }
    if (!stream_blocked)
      ReleaseSlot(slot, out);
  }
  const uint64_t after =
      slots_.empty() ? released_through_ : slots_.back().seq + 1;
  ReleaseAttachedUnblocked(trailing_, after, blocked, out);
}

bool ReorderWindow::HeadPending() const {
  return !slots_.empty() && slots_.front().state == SlotState::kPending;
}

uint64_t ReorderWindow::head_seq() const {
  return slots_.front().seq;
}

uint32_t ReorderWindow::head_lane() const {
  return slots_.front().lane;
}

int64_t ReorderWindow::head_since_ns() const {
  return slots_.front().since_ns;
}

void ReorderWindow::RestartHeadClock(int64_t now_ns) {
  slots_.front().since_ns = std::max(slots_.front().since_ns, now_ns);
}

bool ReorderWindow::ExpireHead() {
  return !slots_.empty() && Expire(slots_.front().seq);
}

bool ReorderWindow::Reassign(uint64_t seq, uint32_t lane, int64_t now_ns) {
  Slot *slot = Find(seq);
  if (!slot || slot->state != SlotState::kPending)
    return false;
  slot->lane = lane;
  if (slot == &slots_.front())
    slot->since_ns = std::max(slot->since_ns, now_ns);
  return true;
}

bool ReorderWindow::IsPending(uint64_t seq) const {
  auto it = LowerBound(slots_, seq);
  return it != slots_.end() && it->seq == seq &&
         it->state == SlotState::kPending;
}

uint32_t ReorderWindow::SlotLane(uint64_t seq) const {
  auto it = LowerBound(slots_, seq);
  return it != slots_.end() && it->seq == seq ? it->lane : kNoLane;
}

uint32_t ReorderWindow::SlotStream(uint64_t seq) const {
  auto it = LowerBound(slots_, seq);
  return it != slots_.end() && it->seq == seq ? it->stream : kMainStream;
}

uint64_t ReorderWindow::StreamReleasedThrough(uint32_t stream) const {
  for (const auto& [id, mark] : stream_released_through_)
    if (id == stream)
      return std::max(mark, released_through_);
  return released_through_;
}

bool ReorderWindow::IsOpen(uint64_t seq) const {
  auto it = LowerBound(slots_, seq);
  return it != slots_.end() && it->seq == seq &&
         it->state != SlotState::kReleased;
}

bool ReorderWindow::HoldsArrivedFrom(uint32_t lane) const {
  for (const Slot& slot : slots_) {
    if (slot.lane == lane && slot.state == SlotState::kArrived)
      return true;
  }
  return false;
}

bool ReorderWindow::IsReleased(uint64_t seq) const {
  // Sequence numbers are not dense, so "below the release mark and not open"
  // is the best this class can say without remembering every seq.
  return any_released_ && seq < released_through_ && !IsOpen(seq);
}

void ReorderWindow::Clear() {
  // What was open before a flush counts as given up: if it still comes back,
  // it is late rather than unknown.
  if (!slots_.empty()) {
    released_through_ = std::max(released_through_, slots_.back().seq + 1);
    any_released_ = true;
  }
  slots_.clear();
  trailing_.clear();
  inserted_ = 0;
  released_markers_ = 0;
}

}  // namespace gpufan

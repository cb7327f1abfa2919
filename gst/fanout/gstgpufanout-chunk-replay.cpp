/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chunk mode's replay (on-lane-error=replay, on-stall=replay): the fan-out
 * keeps a reference to each item of a chunk (its buffers, GAPs and end) as
 * it is queued, until the chunk has left gpufanin. When a lane fails, each
 * chunk it held goes again whole, with its seq, to the lane the Session
 * picks (Session::ReplayChunk): a fresh start of the chunk there, drained
 * and reset as any chunk.
 *
 * Where it goes in that lane's queue: at a chunk boundary, behind the
 * chunk the worker is in, behind the serialized events that came before it
 * and the chunks sent again before it, ahead of the events that came after
 * it. A lane whose queue ends inside the chain function's open chunk, which
 * its worker has begun, has no such place until that chunk's end is queued:
 * the chunk waits in the lane's replay_held meanwhile. The failed lane's
 * open chunk goes to a lane without one, at its queue's end, and the chain
 * function goes on filling it there (open_chunk_moved_to), as a move does
 * (gstgpufanout-chunk-move.cpp).
 *
 * What left gpufanin already of a chunk that headed the window is not sent
 * twice: gpufanin drops as many of the new lane's first outputs
 * (ReplayItem::sent). That holds for a branch that makes the same outputs
 * from the same chunk, which every chunk's reset of the branch gives
 * decoders and encoders with fixed settings. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <iterator>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

namespace {

QueuedItem
copy_part (const QueuedItem & item)
{
  QueuedItem c (item.obj ? gst_mini_object_ref (item.obj) : nullptr, item.seq,
      item.kind);
  c.awaited = item.awaited;
  c.caps_epoch = item.caps_epoch;
  c.chunk_first = item.chunk_first;
  c.segment_epoch = item.segment_epoch;
  c.chunk_frames = item.chunk_frames;
  c.stream = item.stream;
  if (item.chunk_caps)
    c.chunk_caps = gst_event_ref (item.chunk_caps);
  if (item.chunk_segment)
    c.chunk_segment = gst_event_ref (item.chunk_segment);
  return c;
}

bool
is_chunk_part (const QueuedItem & item)
{
  return item.kind == ItemKind::kChunkBuffer
      || item.kind == ItemKind::kChunkEnd;
}

/* Where chunk @seq goes in @lane's queue (see above); FALSE when the queue
 * has no boundary there yet. With the lane lock held. */
bool
replay_point_unlocked (const LanePtr & lane, guint64 seq,
    std::deque<QueuedItem>::iterator * point)
{
  auto & queue = lane->queue;
  /* the worker is inside a chunk when the queue's first chunk item is not
   * a chunk's first */
  auto first_part = std::find_if (queue.begin (), queue.end (), is_chunk_part);
  bool inside = first_part != queue.end () && !first_part->chunk_first;
  /* its open chunk, begun, with nothing of it queued */
  if (first_part == queue.end () && lane->chunk_open)
    inside = true;
  size_t lower = 0, index = 0;
  for (auto it = queue.begin (); it != queue.end (); ++it, ++index) {
    if (it->kind == ItemKind::kEvent) {
      if (it->position <= seq)
        lower = index + 1;
      else if (!inside)
        break; /* it came after the chunk */
      continue;
    }
    if (it->chunk_first)
      inside = true;
    if (it->kind == ItemKind::kChunkEnd) {
      inside = false;
      /* behind the chunks sent again before it */
      if (it->replayed && it->seq < seq)
        lower = index + 1;
    }
  }
  /* the first boundary at or after `lower` */
  inside = first_part != queue.end () && !first_part->chunk_first;
  index = 0;
  for (auto it = queue.begin (); it != queue.end (); ++it, ++index) {
    if (index >= lower && !inside) {
      if (it->kind == ItemKind::kEvent && it->position > seq) {
        *point = it;
        return true;
      }
      if (it->kind != ItemKind::kEvent && it->chunk_first) {
        *point = it;
        return true;
      }
    }
    if (it->kind == ItemKind::kEvent)
      continue;
    if (it->chunk_first)
      inside = true;
    if (it->kind == ItemKind::kChunkEnd)
      inside = false;
  }
  if (inside || lane->chunk_open)
    return false;
  *point = queue.end ();
  return true;
}

void
insert_parts_unlocked (const LanePtr & lane,
    std::deque<QueuedItem>::iterator at, std::vector<QueuedItem> & parts)
{
  for (QueuedItem & part : parts)
    at = std::next (lane->queue.insert (at, std::move (part)));
  parts.clear ();
}

enum class Sent { kSent, kGone, kLost };

/* Sends chunk @item again, with @parts (its kept items), from failed lane
 * @from; @open: the chain function is still filling it. With
 * chunk_move_lock held. */
Sent
send_chunk_again (GstGpuFanOut * self, const LanePtr & from,
    const gpufan::ReplayItem & item, std::vector<QueuedItem> & parts,
    bool open, const std::vector<LanePtr> & lanes)
{
  std::vector<uint32_t> allowed;
  for (const LanePtr & lane : lanes) {
    if (lane == from)
      continue;
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    /* the open chunk goes on filling there: not beside another */
    if (lane_takes_replay_unlocked (lane, item.seq)
        && !(open && lane->chunk_open))
      allowed.push_back (lane->id);
  }
  const gpufan::Dispatch d
      = self->priv->session->ReplayChunk (item, from->id, allowed);
  if (d.status == gpufan::DispatchStatus::kGone
      || d.status == gpufan::DispatchStatus::kFlushing)
    return Sent::kGone;
  if (d.status != gpufan::DispatchStatus::kOk)
    return Sent::kLost;
  auto target = std::find_if (lanes.begin (), lanes.end (),
      [&d] (const LanePtr & lane) { return lane->id == d.lane; });
  /* stopped meanwhile: its flush or removal settles the chunk */
  if (target == lanes.end ())
    return Sent::kGone;
  const LanePtr & to = *target;
  for (QueuedItem & part : parts) {
    part.replayed = true;
    part.woke_worker = false;
    if (part.chunk_first)
      part.awaited = true;
  }
  bool wake;
  {
    std::lock_guard<gpufan::Mutex> lk (to->lock);
    if (!to->accepts_items_unlocked ())
      return Sent::kGone;
    std::deque<QueuedItem>::iterator at;
    if (open) {
      /* its rest follows at the queue's end */
      auto end = to->queue.end ();
      while (end != to->queue.begin () && std::prev (end)->kind
          == ItemKind::kEvent && std::prev (end)->position > item.seq)
        --end;
      insert_parts_unlocked (to, end, parts);
      to->chunk_open = true;
      to->open_chunk_seq = item.seq;
      to->open_chunk_stays = false;
    } else if (to->replay_held.empty ()
        && replay_point_unlocked (to, item.seq, &at)) {
      insert_parts_unlocked (to, at, parts);
    } else {
      for (QueuedItem & part : parts)
        to->replay_held.push_back (std::move (part));
      parts.clear ();
    }
    wake = to->worker_waiting;
  }
  if (wake)
    to->cond.notify_all ();
  GST_DEBUG_OBJECT (self, "lane %u failed: chunk %" G_GUINT64_FORMAT
      " (%u frames, %u outputs out) sent again, to lane %u", from->id,
      item.seq, item.frames, item.sent, to->id);
  if (open) {
    std::lock_guard<gpufan::Mutex> lk (from->lock);
    from->chunk_open = false;
    from->open_chunk_moved_to = to->id;
  }
  return Sent::kSent;
}

}  // namespace

void
fanout::replay_listen (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (!priv->replay_listening.exchange (true))
    priv->session->SetReleaseListener (
        [self] (guint64 released) { replay_release (self, released); });
}

void
fanout::chunk_replay_keep (GstGpuFanOut * self, const QueuedItem & item)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
  ChunkCopy & copy = priv->replay_chunks[item.seq];
  if (item.kind == ItemKind::kChunkEnd)
    copy.ended = true;
  copy.parts.push_back (copy_part (item));
}

void
fanout::chunk_replay_release_unlocked (GstGpuFanOut * self,
    const std::vector<std::pair<guint32, guint64>> & marks, guint64 through,
    std::vector<GstMiniObject *> * gone)
{
  auto & chunks = self->priv->replay_chunks;
  for (auto it = chunks.begin (); it != chunks.end ();) {
    guint64 mark = through;
    const guint32 stream
        = it->second.parts.empty () ? 0 : it->second.parts.front ().stream;
    for (const auto & m : marks)
      if (m.first == stream)
        mark = m.second;
    if (it->first >= mark) {
      ++it;
      continue;
    }
    for (QueuedItem & part : it->second.parts) {
      if (GstMiniObject * obj = part.Steal ())
        gone->push_back (obj);
    }
    it = chunks.erase (it);
  }
}

guint
fanout::chunk_replay_lane (GstGpuFanOut * self, const LanePtr & lane,
    guint * lost)
{
  GstGpuFanOutPrivate * priv = self->priv;
  *lost = 0;
  guint sent = 0;
  const std::vector<gpufan::ReplayItem> items
      = priv->session->FailLaneForReplay (lane->id);
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  /* chunks sent to it again that it never began: they are among its items
   * (unreffed outside the locks) */
  std::deque<QueuedItem> held;
  {
    std::lock_guard<gpufan::Mutex> mv (priv->chunk_move_lock);
    bool open;
    guint64 open_seq;
    {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      open = lane->chunk_open;
      open_seq = lane->open_chunk_seq;
      lane->chunk_moves_pending = false;
      held.swap (lane->replay_held);
    }
    for (const gpufan::ReplayItem & item : items) {
      std::vector<QueuedItem> parts;
      bool ended = false;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
        auto it = priv->replay_chunks.find (item.seq);
        if (it != priv->replay_chunks.end ()) {
          ended = it->second.ended;
          for (const QueuedItem & part : it->second.parts)
            parts.push_back (copy_part (part));
        }
      }
      const bool is_open = open && item.seq == open_seq && !ended;
      /* nothing kept: dispatched while replay was off, or its first buffer
       * not queued yet (the chain function opens another chunk) */
      const Sent result = parts.empty () ? Sent::kLost
          : send_chunk_again (self, lane, item, parts, is_open, lanes);
      if (result == Sent::kSent) {
        sent += item.frames;
      } else if (result == Sent::kLost) {
        priv->session->GiveUpReplay (lane->id, item.seq);
        if (item.frames > item.sent)
          *lost += item.frames - item.sent;
      }
    }
  }
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->fail_handled = true;
  }
  lane->cond.notify_all ();
  return sent;
}

void
fanout::chunk_replay_place_held_unlocked (const LanePtr & lane)
{
  while (!lane->replay_held.empty ()) {
    const guint64 seq = lane->replay_held.front ().seq;
    std::deque<QueuedItem>::iterator at;
    if (!replay_point_unlocked (lane, seq, &at))
      return;
    std::vector<QueuedItem> parts;
    while (!lane->replay_held.empty () && lane->replay_held.front ().seq == seq) {
      parts.push_back (std::move (lane->replay_held.front ()));
      lane->replay_held.pop_front ();
    }
    insert_parts_unlocked (lane, at, parts);
  }
  if (lane->worker_waiting)
    lane->cond.notify_all ();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chunk mode: a chunk given to a lane that stalls before it began goes to
 * another lane whole, with its seq (Session::MoveUnstarted; the window
 * waits for it meanwhile, SessionConfig::chunks).
 *
 * Its items go into the new lane's queue at a chunk boundary: behind the
 * lane's last chunk, ahead of the events that came after the moved chunk (a
 * caps or segment change ends chunks, and the chunk belongs before it). The
 * queue of the lane that holds the chain function's open chunk ends in the
 * middle of that chunk: no boundary there. So:
 *   - the stall listener moves the stalled lane's whole chunks (their end is
 *     queued) to lanes without the open chunk; when only such a lane could
 *     take one, it leaves the move to the chain function
 *     (chunk_moves_pending), which makes it once its open chunk ends;
 *   - the chain function moves its open chunk itself, when it finds its
 *     lane stalled and the chunk not begun, and goes on filling it there.
 * The stalled lane's worker begins no chunk while a move is pending (it
 * could not move any more). Movers hold chunk_move_lock: the open chunk's
 * lane changes only under it. A lane that fails (drop-lane) hands its whole
 * chunks that have not begun to other lanes the same way, before the
 * Session gives up what it held. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <iterator>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

namespace {

bool
is_chunk_item (const QueuedItem & item, guint64 seq)
{
  return (item.kind == ItemKind::kChunkBuffer
          || item.kind == ItemKind::kChunkEnd) && item.seq == seq;
}

/* Chunk @seq has not begun on @lane: its first buffer is still queued.
 * Call with the lane lock held. */
bool
chunk_queued_whole_unlocked (const LanePtr & lane, guint64 seq)
{
  return std::any_of (lane->queue.begin (), lane->queue.end (),
      [seq] (const QueuedItem & item) {
        return item.kind == ItemKind::kChunkBuffer && item.chunk_first
            && item.seq == seq;
      });
}

bool
chunk_end_queued_unlocked (const LanePtr & lane, guint64 seq)
{
  return std::any_of (lane->queue.begin (), lane->queue.end (),
      [seq] (const QueuedItem & item) {
        return item.kind == ItemKind::kChunkEnd && item.seq == seq;
      });
}

/* Where chunk @seq goes in @lane's queue (which has no open chunk): behind
 * its last chunk, ahead of the trailing events that came after @seq. */
std::deque<QueuedItem>::iterator
chunk_boundary_unlocked (const LanePtr & lane, guint64 seq)
{
  auto at = lane->queue.end ();
  while (at != lane->queue.begin ()) {
    auto prev = std::prev (at);
    if (prev->kind != ItemKind::kEvent || prev->position <= seq)
      break;
    at = prev;
  }
  return at;
}

enum class Moved {
  kMoved,
  kNoLane,     /* no lane takes it */
  kOpenLanes,  /* only lanes with the open chunk would */
  kGone,       /* it is no longer @from's to move */
};

/* Moves chunk @seq, not begun, from @from's queue to the lane the Session
 * picks among @lanes (those that take it, and, unless @open_ok, have no
 * open chunk). With chunk_move_lock and from->lock held; takes the
 * target's lock. */
Moved
move_chunk_unlocked (GstGpuFanOut * self, const LanePtr & from, guint64 seq,
    const std::vector<LanePtr> & lanes, LanePtr * moved_to)
{
  std::vector<uint32_t> allowed;
  bool open_lanes = false;
  for (const LanePtr & lane : lanes) {
    if (lane == from)
      continue;
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (!lane_takes_replay_unlocked (lane, seq))
      continue;
    if (lane->chunk_open)
      open_lanes = true;
    else
      allowed.push_back (lane->id);
  }
  const gpufan::Dispatch d
      = self->priv->session->MoveUnstarted (seq, from->id, allowed);
  if (d.status == gpufan::DispatchStatus::kNoLanes)
    return open_lanes ? Moved::kOpenLanes : Moved::kNoLane;
  if (d.status != gpufan::DispatchStatus::kOk)
    return Moved::kGone;
  auto target = std::find_if (lanes.begin (), lanes.end (),
      [&d] (const LanePtr & lane) { return lane->id == d.lane; });
  std::deque<QueuedItem> items;
  for (auto it = from->queue.begin (); it != from->queue.end ();) {
    if (is_chunk_item (*it, seq)) {
      items.push_back (std::move (*it));
      it = from->queue.erase (it);
    } else {
      ++it;
    }
  }
  /* the picked lane stopped meanwhile: its flush or removal settles the
   * chunk in the Session, and the items go */
  if (target == lanes.end ())
    return Moved::kGone;
  const LanePtr & to = *target;
  bool wake;
  {
    std::lock_guard<gpufan::Mutex> lk (to->lock);
    if (!to->accepts_items_unlocked ())
      return Moved::kGone;
    auto at = chunk_boundary_unlocked (to, seq);
    for (QueuedItem & item : items) {
      item.replayed = true;
      item.woke_worker = false;
      at = std::next (to->queue.insert (at, std::move (item)));
    }
    wake = to->worker_waiting;
  }
  if (wake)
    to->cond.notify_all ();
  GST_DEBUG_OBJECT (self, "lane %u stalled: chunk %" G_GUINT64_FORMAT
      " had not begun, moved to lane %u", from->id, seq, to->id);
  *moved_to = to;
  return Moved::kMoved;
}

/* Moves @lane's whole chunks that have not begun (with chunk_move_lock
 * and the lane's lock held). TRUE when some could go only to a lane with
 * the open chunk. */
bool
move_whole_chunks_unlocked (GstGpuFanOut * self, const LanePtr & lane,
    const std::vector<LanePtr> & lanes)
{
  std::vector<guint64> seqs;
  for (const QueuedItem & item : lane->queue) {
    if (item.kind == ItemKind::kChunkBuffer && item.chunk_first
        && chunk_end_queued_unlocked (lane, item.seq))
      seqs.push_back (item.seq);
  }
  bool pending = false;
  for (guint64 seq : seqs) {
    LanePtr to;
    if (move_chunk_unlocked (self, lane, seq, lanes, &to) == Moved::kOpenLanes)
      pending = true;
  }
  lane->chunk_moves_pending = pending;
  lane->cond.notify_all ();
  return pending;
}

}  // namespace

void
fanout::chunk_move_off_stalled (GstGpuFanOut * self, const LanePtr & lane)
{
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
  /* marked and moved under one hold of its lock: its worker begins nothing
   * in between (chunk_begin_held_unlocked) */
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  lane_mark_stalled_unlocked (lane);
  if (move_whole_chunks_unlocked (self, lane, lanes))
    self->priv->chunk_moves_pending = true;
}

void
fanout::chunk_move_off_failed (GstGpuFanOut * self, const LanePtr & lane)
{
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  /* the Session drops what stays (SetLaneFailed): nothing is left for
   * later */
  move_whole_chunks_unlocked (self, lane, lanes);
  lane->chunk_moves_pending = false;
  /* the open chunk too, if it has not begun: the chain function follows it
   * (chunk_move_open) */
  if (!lane->chunk_open)
    return;
  auto first = std::find_if (lane->queue.begin (), lane->queue.end (),
      [] (const QueuedItem & item) {
        return item.kind == ItemKind::kChunkBuffer && item.chunk_first;
      });
  LanePtr to;
  if (first == lane->queue.end ())
    return;
  const guint64 open_seq = first->seq;
  if (move_chunk_unlocked (self, lane, open_seq, lanes, &to) != Moved::kMoved)
    return;
  lane->chunk_open = false;
  lane->open_chunk_moved_to = to->id;
  std::lock_guard<gpufan::Mutex> tl (to->lock);
  to->chunk_open = true;
  to->open_chunk_seq = open_seq;
  to->open_chunk_stays = false;
}

void
fanout::chunk_run_pending_moves (GstGpuFanOut * self)
{
  if (!self->priv->chunk_moves_pending.load ())
    return;
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
  bool pending = false;
  for (const LanePtr & lane : lanes) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (lane->chunk_moves_pending)
      pending |= move_whole_chunks_unlocked (self, lane, lanes);
  }
  self->priv->chunk_moves_pending = pending;
}

LanePtr
fanout::chunk_move_open (GstGpuFanOut * self, const LanePtr & from,
    guint64 seq)
{
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
  LanePtr to;
  {
    std::lock_guard<gpufan::Mutex> lk (from->lock);
    /* moved already, when the lane failed */
    if (from->open_chunk_moved_to != G_MAXUINT) {
      const guint id = from->open_chunk_moved_to;
      from->open_chunk_moved_to = G_MAXUINT;
      auto it = std::find_if (lanes.begin (), lanes.end (),
          [id] (const LanePtr & lane) { return lane->id == id; });
      return it != lanes.end () ? *it : nullptr;
    }
    /* its worker waits for the outcome (chunk_begin_held_unlocked) */
    from->cond.notify_all ();
    if (!chunk_queued_whole_unlocked (from, seq)
        || move_chunk_unlocked (self, from, seq, lanes, &to) != Moved::kMoved) {
      from->open_chunk_stays = true;
      return nullptr;
    }
    from->chunk_open = false;
    chunk_replay_place_held_unlocked (from);
  }
  std::lock_guard<gpufan::Mutex> lk (to->lock);
  to->chunk_open = true;
  to->open_chunk_seq = seq;
  to->open_chunk_stays = false;
  return to;
}

void
fanout::chunk_queue_end (GstGpuFanOut * self, LanePtr & lane, QueuedItem && end)
{
  const std::vector<LanePtr> lanes = snapshot_lanes (self);
  std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
  guint moved_to;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    moved_to = lane->open_chunk_moved_to;
    lane->open_chunk_moved_to = G_MAXUINT;
  }
  /* the chunk moved when its lane failed: its end follows it */
  auto it = std::find_if (lanes.begin (), lanes.end (),
      [moved_to] (const LanePtr & l) { return l->id == moved_to; });
  if (it != lanes.end ())
    lane = *it;
  const guint64 seq = end.seq;
  /* kept before it can go: a lane that failed meanwhile refuses it, and the
   * chunk goes again whole (chunk_replay_lane, under chunk_move_lock) */
  if (replay_on (self))
    chunk_replay_keep (self, end);
  lane_enqueue (lane, std::move (end));
  {
    /* its queue ends at a chunk boundary again: chunks may move there, and
     * those sent again to it go in */
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->chunk_open = false;
    chunk_replay_place_held_unlocked (lane);
  }
  /* and another stream's chunk may go there (after the flag: at most one
   * chain function fills a lane) */
  self->priv->session->EndChunkFill (lane->id, seq);
}

void
fanout::chunk_set_open (GstGpuFanOut * self, const LanePtr & lane, bool open,
    guint64 seq)
{
  {
    std::lock_guard<gpufan::Mutex> mv (self->priv->chunk_move_lock);
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->chunk_open = open;
    lane->open_chunk_seq = seq;
    lane->open_chunk_stays = false;
    lane->open_chunk_moved_to = G_MAXUINT;
    if (!open)
      chunk_replay_place_held_unlocked (lane);
  }
  if (!open)
    self->priv->session->EndChunkFill (lane->id, seq);
}

bool
fanout::chunk_begin_held_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  const QueuedItem & front = lane->queue.front ();
  if (front.kind != ItemKind::kChunkBuffer || !front.chunk_first)
    return false;
  if (lane->chunk_moves_pending)
    return true;
  /* stalled, and the chain function is to move its open chunk (it finds
   * the lane stalled with its next buffer) */
  if (lane->stalled_unlocked ())
    return lane->chunk_open && !lane->open_chunk_stays
        && !chunk_end_queued_unlocked (lane, front.seq);
  /* stalled, and the stall listener (which moves what it can) has not run
   * yet (the Session's lock is a leaf under ours) */
  return self->priv->session->IsLaneStalled (lane->id);
}

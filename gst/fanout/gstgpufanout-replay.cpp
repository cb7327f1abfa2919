/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Replay (on-lane-error=replay, on-stall=replay): the fan-out keeps a
 * reference to each frame until it has left gpufanin, and when a lane fails,
 * the frames it held go to the other lanes (Session::FailLaneForReplay and
 * Redispatch), each ahead of the serialized events that followed it.
 *
 * Several input streams: each sink_%u pad's thread dispatches its own
 * stream's items, at the same time as the others. The Session numbers
 * every stream's items in one sequence, so the copies are kept per stream
 * (ReplayStream): each stream's thread keeps or passes over its items in
 * its own seq order, whatever the other threads do in between. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

bool
fanout::replay_on (GstGpuFanOut * self)
{
  /* chunk mode keeps whole chunks (gstgpufanout-chunk-replay.cpp) */
  return self->priv->on_lane_error.load () == GST_GPUFAN_LANE_ERROR_REPLAY
      || self->priv->on_stall.load () == GST_GPUFAN_STALL_REPLAY;
}

void
fanout::replay_note_dispatched (GstGpuFanOut * self,
    const gpufan::Dispatch & d, const QueuedItem & item, gint64 pts,
    guint32 stream)
{
  if (!d.awaited)
    return;
  if (replay_on (self))
    replay_keep (self, stream, d.seq, item.obj, item.kind, item.caps_epoch,
        pts);
  else if (self->priv->replay_orphans_possible.load ())
    replay_not_kept (self, stream, d.seq);
}

bool
fanout::replay_took_over (GstGpuFanOut * self, const gpufan::Dispatch & d)
{
  return d.awaited && replay_on (self)
      && self->priv->session->IsLaneFailed (d.lane);
}

/* Sends item @item, held by lane @from (the failed lane), again with the
 * reference in @copy, to a lane that may take it. FALSE when none can. */
static bool
send_again (GstGpuFanOut * self, guint from, const gpufan::ReplayItem & item,
    const ReplayCopy & copy)
{
  gpufan::FanOutPort & session = *self->priv->session;
  std::vector<uint32_t> refused;
  for (;;) {
    std::vector<uint32_t> allowed;
    for (const LanePtr & lane : snapshot_lanes (self)) {
      if (std::find (refused.begin (), refused.end (), lane->id)
              == refused.end ()
          && lane_takes_replay (lane, item.seq))
        allowed.push_back (lane->id);
    }
    const gpufan::Dispatch d
        = session.Redispatch (item.seq, from, item.pts_ns, allowed);
    /* it came back meanwhile, a flush forgot it, or the thread that took
     * over the lane it was sent to sends it on */
    if (d.status == gpufan::DispatchStatus::kGone)
      return true;
    if (d.status != gpufan::DispatchStatus::kOk)
      return false;
    LanePtr target = find_lane (self, d.lane);
    QueuedItem queued (gst_mini_object_ref (copy.obj), item.seq, copy.kind);
    queued.awaited = true;
    queued.caps_epoch = copy.caps_epoch;
    if (target && lane_enqueue_replay (target, std::move (queued))) {
      GST_LOG_OBJECT (self, "item %" G_GUINT64_FORMAT " sent again, to lane %u",
          item.seq, d.lane);
      return true;
    }
    /* it passed a later event or stopped meanwhile: another lane; the item
     * is that lane's now */
    refused.push_back (d.lane);
    from = d.lane;
  }
}

/* The kept copy of @seq of @stream, or none (copy.obj null); call with
 * replay_lock held. */
static ReplayCopy
find_copy_unlocked (GstGpuFanOutPrivate * priv, guint32 stream, guint64 seq)
{
  auto found = priv->replay_streams.find (stream);
  if (found == priv->replay_streams.end ())
    return ReplayCopy ();
  auto & copies = found->second.copies;
  auto it = std::lower_bound (copies.begin (), copies.end (), seq,
      [] (const ReplayCopy & c, guint64 s) { return c.seq < s; });
  if (it == copies.end () || it->seq != seq)
    return ReplayCopy ();
  ReplayCopy copy = *it;
  gst_mini_object_ref (copy.obj);
  return copy;
}

/* The chain function of @stream decided about @seq (kept in @copy, or
 * not): takes the orphan of that seq, if a failed lane left one. Call with
 * replay_lock held. */
static bool
take_orphan_unlocked (GstGpuFanOutPrivate * priv, guint32 stream, guint64 seq,
    ReplayOrphan * orphan)
{
  priv->replay_streams[stream].decided_through = seq + 1;
  auto & orphans = priv->replay_orphans;
  auto it = std::find_if (orphans.begin (), orphans.end (),
      [seq] (const ReplayOrphan & o) { return o.item.seq == seq; });
  if (it == orphans.end ())
    return false;
  *orphan = *it;
  orphans.erase (it);
  return true;
}

void
fanout::replay_keep (GstGpuFanOut * self, guint32 stream, guint64 seq,
    GstMiniObject * obj, ItemKind kind, guint32 caps_epoch, gint64 pts)
{
  GstGpuFanOutPrivate * priv = self->priv;
  /* from the first kept frame on, what leaves gpufanin is let go (the
   * output pays for the listener only where replay keeps frames) */
  replay_listen (self);
  ReplayCopy copy{ seq, gst_mini_object_ref (obj), kind, caps_epoch, pts };
  ReplayOrphan orphan;
  bool orphaned;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    /* this stream's thread alone adds to its copies: in seq order */
    priv->replay_streams[stream].copies.push_back (copy);
    orphaned = take_orphan_unlocked (priv, stream, seq, &orphan);
  }
  /* its lane failed between its dispatch and now: it goes again from here */
  if (orphaned && !send_again (self, orphan.lane, orphan.item, copy))
    priv->session->GiveUpReplay (orphan.lane, seq);
}

void
fanout::replay_not_kept (GstGpuFanOut * self, guint32 stream, guint64 seq)
{
  GstGpuFanOutPrivate * priv = self->priv;
  ReplayOrphan orphan;
  bool orphaned;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    orphaned = take_orphan_unlocked (priv, stream, seq, &orphan);
  }
  if (orphaned)
    priv->session->GiveUpReplay (orphan.lane, seq);
}

void
fanout::replay_release (GstGpuFanOut * self, guint64 released_through)
{
  GstGpuFanOutPrivate * priv = self->priv;
  /* Several streams: a stream's items leave while another stream's earlier
   * item waits (its lane stalled, say); their references go at once, or an
   * upstream pool of that stream would run dry meanwhile. The marks are
   * asked outside replay_lock, a leaf lock; a stream seen only since then
   * goes by released_through. One stream asks nothing more. */
  std::vector<std::pair<guint32, guint64>> marks;
  if (priv->stream_inputs_used.load ()) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
      for (const auto & kv : priv->replay_streams)
        marks.emplace_back (kv.first, released_through);
      for (const auto & kv : priv->replay_chunks)
        if (!kv.second.parts.empty ())
          marks.emplace_back (kv.second.parts.front ().stream,
              released_through);
    }
    for (auto & mark : marks)
      mark.second = MAX (mark.second,
          priv->session->StreamReleasedThrough (mark.first));
  }
  std::vector<GstMiniObject *> gone;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    for (auto & kv : priv->replay_streams) {
      guint64 through = released_through;
      for (const auto & mark : marks)
        if (mark.first == kv.first)
          through = mark.second;
      auto & copies = kv.second.copies;
      while (!copies.empty () && copies.front ().seq < through) {
        gone.push_back (copies.front ().obj);
        copies.pop_front ();
      }
    }
    chunk_replay_release_unlocked (self, marks, released_through, &gone);
  }
  /* outside the lock: a buffer going back to its pool may wake upstream */
  for (GstMiniObject * o : gone)
    gst_mini_object_unref (o);
}

void
fanout::replay_forget (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::map<guint32, ReplayStream> streams;
  std::map<guint64, ChunkCopy> chunks;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    streams.swap (priv->replay_streams);
    chunks.swap (priv->replay_chunks);
    priv->replay_orphans.clear ();
  }
  for (const auto & kv : streams)
    for (const ReplayCopy & c : kv.second.copies)
      gst_mini_object_unref (c.obj);
}

guint
fanout::replay_lane (GstGpuFanOut * self, guint id, guint * lost)
{
  GstGpuFanOutPrivate * priv = self->priv;
  guint sent = 0;
  *lost = 0;
  priv->replay_orphans_possible = true;
  for (const gpufan::ReplayItem & item :
      priv->session->FailLaneForReplay (id)) {
    ReplayCopy copy;
    bool orphan = false;
    {
      std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
      copy = find_copy_unlocked (priv, item.stream, item.seq);
      /* dispatched, and its stream's chain function has not said yet
       * whether it keeps it: it sends it on (or gives it up) when it
       * does */
      auto stream = priv->replay_streams.find (item.stream);
      const guint64 decided_through = stream == priv->replay_streams.end ()
          ? 0 : stream->second.decided_through;
      if (!copy.obj && item.seq >= decided_through) {
        priv->replay_orphans.push_back (ReplayOrphan{ id, item });
        orphan = true;
      }
    }
    if (orphan) {
      sent++;
      continue;
    }
    /* no copy: dispatched while replay was off */
    const bool ok = copy.obj && send_again (self, id, item, copy);
    if (copy.obj)
      gst_mini_object_unref (copy.obj);
    if (ok) {
      sent++;
    } else {
      priv->session->GiveUpReplay (id, item.seq);
      (*lost)++;
    }
  }
  return sent;
}

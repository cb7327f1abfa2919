/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Replay (on-lane-error=replay, on-stall=replay): the fan-out keeps a
 * reference to each frame until it has left gpufanin, and when a lane fails,
 * the frames it held go to the other lanes (Session::FailLaneForReplay and
 * Redispatch), each ahead of the serialized events that followed it. */
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
  /* a chunk whose lane pushed part of its output cannot go again: chunk
   * mode's lanes leave as with drop-lane; so do the lanes of several
   * streams (the copies kept for replay follow one chain thread's order) */
  return (self->priv->on_lane_error.load () == GST_GPUFAN_LANE_ERROR_REPLAY
             || self->priv->on_stall.load () == GST_GPUFAN_STALL_REPLAY)
      && !chunk_mode_on (self) && !self->priv->stream_inputs_used.load ();
}

void
fanout::replay_note_dispatched (GstGpuFanOut * self,
    const gpufan::Dispatch & d, const QueuedItem & item, gint64 pts)
{
  if (!d.awaited)
    return;
  if (replay_on (self))
    replay_keep (self, d.seq, item.obj, item.kind, item.caps_epoch, pts);
  else if (self->priv->replay_orphans_possible.load ())
    replay_not_kept (self, d.seq);
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
  gpufan::Session & session = *self->priv->session;
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

/* The kept copy of @seq, or none (copy.obj null); call with replay_lock
 * held. The copies are in ascending seq order. */
static ReplayCopy
find_copy_unlocked (GstGpuFanOutPrivate * priv, guint64 seq)
{
  auto & copies = priv->replay_copies;
  auto it = std::lower_bound (copies.begin (), copies.end (), seq,
      [] (const ReplayCopy & c, guint64 s) { return c.seq < s; });
  if (it == copies.end () || it->seq != seq)
    return ReplayCopy ();
  ReplayCopy copy = *it;
  gst_mini_object_ref (copy.obj);
  return copy;
}

/* The chain function decided about @seq (kept in @copy, or not): takes the
 * orphan of that seq, if a failed lane left one. Call with replay_lock
 * held. */
static bool
take_orphan_unlocked (GstGpuFanOutPrivate * priv, guint64 seq,
    ReplayOrphan * orphan)
{
  priv->replay_decided_through = seq + 1;
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
fanout::replay_keep (GstGpuFanOut * self, guint64 seq, GstMiniObject * obj,
    ItemKind kind, guint32 caps_epoch, gint64 pts)
{
  GstGpuFanOutPrivate * priv = self->priv;
  /* from the first kept frame on, what leaves gpufanin is let go (the
   * output pays for the listener only where replay keeps frames) */
  if (!priv->replay_listening.exchange (true))
    priv->session->SetReleaseListener (
        [self] (guint64 released) { replay_release (self, released); });
  ReplayCopy copy{ seq, gst_mini_object_ref (obj), kind, caps_epoch, pts };
  ReplayOrphan orphan;
  bool orphaned;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    priv->replay_copies.push_back (copy);
    orphaned = take_orphan_unlocked (priv, seq, &orphan);
  }
  /* its lane failed between its dispatch and now: it goes again from here */
  if (orphaned && !send_again (self, orphan.lane, orphan.item, copy))
    priv->session->GiveUpReplay (orphan.lane, seq);
}

void
fanout::replay_not_kept (GstGpuFanOut * self, guint64 seq)
{
  GstGpuFanOutPrivate * priv = self->priv;
  ReplayOrphan orphan;
  bool orphaned;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    orphaned = take_orphan_unlocked (priv, seq, &orphan);
  }
  if (orphaned)
    priv->session->GiveUpReplay (orphan.lane, seq);
}

void
fanout::replay_release (GstGpuFanOut * self, guint64 released_through)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::vector<GstMiniObject *> gone;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    auto & copies = priv->replay_copies;
    while (!copies.empty () && copies.front ().seq < released_through) {
      gone.push_back (copies.front ().obj);
      copies.pop_front ();
    }
  }
  /* outside the lock: a buffer going back to its pool may wake upstream */
  for (GstMiniObject * o : gone)
    gst_mini_object_unref (o);
}

void
fanout::replay_forget (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::deque<ReplayCopy> copies;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    copies.swap (priv->replay_copies);
    priv->replay_orphans.clear ();
    priv->replay_decided_through = 0;
  }
  for (const ReplayCopy & c : copies)
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
      copy = find_copy_unlocked (priv, item.seq);
      /* dispatched, and the chain function has not said yet whether it
       * keeps it: it sends it on (or gives it up) when it does */
      if (!copy.obj && item.seq >= priv->replay_decided_through) {
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

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
   * mode's lanes leave as with drop-lane */
  return (self->priv->on_lane_error.load () == GST_GPUFAN_LANE_ERROR_REPLAY
             || self->priv->on_stall.load () == GST_GPUFAN_STALL_REPLAY)
      && !chunk_mode_on (self);
}

/* Sends item @seq (a reference in @copy) again, to a lane that may take it;
 * FALSE when none can (or it is no longer awaited). */
static bool
send_again (GstGpuFanOut * self, const gpufan::ReplayItem & item,
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
        = session.Redispatch (item.seq, item.pts_ns, allowed);
    if (d.status == gpufan::DispatchStatus::kGone)
      return true; /* it came back meanwhile, or a flush forgot it */
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
    /* it passed a later event or stopped meanwhile: another lane */
    refused.push_back (d.lane);
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

void
fanout::replay_keep (GstGpuFanOut * self, guint64 seq, GstMiniObject * obj,
    ItemKind kind, guint32 caps_epoch, gint64 pts)
{
  GstGpuFanOutPrivate * priv = self->priv;
  /* asked before the lock: the Session's is a leaf lock too */
  const guint64 released = priv->session->ReleasedThrough ();
  ReplayCopy copy{ seq, gst_mini_object_ref (obj), kind, caps_epoch, pts };
  std::vector<GstMiniObject *> gone;
  bool orphan = false;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
    auto & copies = priv->replay_copies;
    while (!copies.empty () && copies.front ().seq < released) {
      gone.push_back (copies.front ().obj);
      copies.pop_front ();
    }
    copies.push_back (copy);
    priv->replay_last_kept = seq;
    priv->replay_any_kept = true;
    auto & orphans = priv->replay_orphans;
    auto it = std::find_if (orphans.begin (), orphans.end (),
        [seq] (const gpufan::ReplayItem & i) { return i.seq == seq; });
    if (it != orphans.end ()) {
      orphan = true;
      orphans.erase (it);
    }
  }
  for (GstMiniObject * o : gone)
    gst_mini_object_unref (o);
  /* its lane failed between its dispatch and now: it goes again from here */
  if (orphan && !send_again (self, gpufan::ReplayItem{ seq, pts }, copy))
    priv->session->GiveUpReplay (gpufan::kNoLane, seq);
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
    priv->replay_any_kept = false;
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
  for (const gpufan::ReplayItem & item :
      priv->session->FailLaneForReplay (id)) {
    ReplayCopy copy;
    bool orphan = false;
    {
      std::lock_guard<gpufan::Mutex> lk (priv->replay_lock);
      copy = find_copy_unlocked (priv, item.seq);
      /* dispatched, its copy not kept yet: the chain function sends it */
      if (!copy.obj
          && (!priv->replay_any_kept || item.seq > priv->replay_last_kept)) {
        priv->replay_orphans.push_back (item);
        orphan = true;
      }
    }
    if (orphan) {
      sent++;
      continue;
    }
    /* kept since before a switch to replay: not kept */
    const bool ok = copy.obj && send_again (self, item, copy);
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

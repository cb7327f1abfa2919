/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chunk mode (chunk=frames|keyframes): a run of buffers goes whole to one
 * lane, so that stateful branches (encoders, decoders, trackers) see a
 * contiguous stream. The Session sees a chunk as one item: one seq, one
 * lane, one slot in the window.
 *
 * The chain function opens a chunk (DispatchItem picks its lane), queues its
 * buffers on that lane (up to 2 x chunk-frames, so that upstream can fill the
 * next lane's chunk while this one works) and closes it at the next cut, a
 * caps or segment change, or EOS.
 *
 * The lane's worker makes each chunk self-contained
 * (gstgpufanout-chunk-worker.cpp, the chunk item handler):
 *   - before its first buffer: a chunk-start event (the fan-in collects what
 *     follows as the chunk's output) and a force-key-unit event
 *     (all-headers), and the buffer is DISCONT;
 *   - at its end, the drain: an EOS, which every element answers by
 *     finishing its work (an encoder's lookahead and reordered B-frames, a
 *     decoder's delayed pictures); the fan-in takes it as the chunk's end and
 *     does not pass it on. Once the Session has the chunk (or gave it up),
 *     a FLUSH_START/FLUSH_STOP pair resets the branch for the next chunk
 *     (the EOS left its elements refusing data) and the segment goes again.
 *     The three events carry the chunk's item fields; gpufanin hides them.
 * A lane that no gpufanin claimed is not drained: a sink in its branch would
 * take the EOS for the stream's end. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include <gst/video/video.h>

#include <algorithm>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

bool
fanout::chunk_mode_on (GstGpuFanOut * self)
{
  return self->priv->streaming.chunk_mode != GST_GPUFAN_CHUNK_FRAME;
}

void
fanout::chunk_close (GstGpuFanOut * self, ChunkCursor & chunk)
{
  if (!chunk.lane)
    return;
  QueuedItem end (nullptr, chunk.seq, ItemKind::kChunkEnd);
  end.chunk_frames = chunk.frames;
  GST_LOG_OBJECT (self, "chunk %" G_GUINT64_FORMAT " ends after %u buffers",
      chunk.seq, chunk.frames);
  /* a lane that stopped meanwhile has nothing to drain: a flush or its
   * removal settled the chunk */
  chunk_queue_end (self, chunk.lane, std::move (end));
  /* its drain starts a fresh stretch of stall-timeout */
  self->priv->session->NoteProgress (chunk.lane->id, chunk.seq);
  chunk.lane = nullptr;
  chunk_run_pending_moves (self);
}

void
fanout::chunk_forget (GstGpuFanOut * self, ChunkCursor & chunk)
{
  if (chunk.lane)
    chunk_set_open (self, chunk.lane, false, chunk.seq);
  chunk.lane = nullptr;
  chunk.frames = 0;
  chunk.skip_to_keyframe = false;
}

/* Whether a chunk starting at @obj decodes on its own (keyframes mode): see
 * gstgpufanout-cut.cpp. The rule follows the caps of the input's pad
 * @pad. */
static bool
is_keyframe (GstPad * pad, ChunkCursor & chunk, GstMiniObject * obj)
{
  if (!GST_IS_BUFFER (obj))
    return false;
  GstCaps * caps = gst_pad_get_current_caps (pad);
  if (caps != chunk.cut_caps) {
    chunk.cut = cut_rule_from_caps (caps);
    gst_caps_replace (&chunk.cut_caps, caps);
    chunk.no_cut_warned = false;
  }
  gst_clear_caps (&caps);
  return is_clean_cut (chunk.cut, GST_BUFFER_CAST (obj));
}

/* A chunk this long that passed a keyframe which is no clean cut is worth
 * a warning (not a closed GOP that is merely longer than chunk-frames). */
static constexpr guint kNoCutWarnChunks = 4;

/* Where the open chunk ends before @obj. */
static bool
chunk_ends_before (GstGpuFanOut * self, GstPad * pad, ChunkCursor & chunk,
    GstMiniObject * obj)
{
  const guint frames = chunk.frames;
  const guint wanted = self->priv->streaming.chunk_frames;
  if (frames < wanted)
    return false;
  if (self->priv->streaming.chunk_mode == GST_GPUFAN_CHUNK_FRAMES)
    return true;
  /* keyframes: only where the next one can be decoded on its own */
  if (is_keyframe (pad, chunk, obj))
    return true;
  /* a keyframe that is no clean cut (an open GOP's) in a chunk already
   * long: the chunk grows, which is correct but parallel only as far as
   * clean cuts allow */
  if (GST_IS_BUFFER (obj) && !chunk.no_cut_warned
      && frames >= kNoCutWarnChunks * (guint64)wanted
      && !GST_BUFFER_FLAG_IS_SET (GST_BUFFER_CAST (obj),
          GST_BUFFER_FLAG_DELTA_UNIT)) {
    chunk.no_cut_warned = true;
    GST_ELEMENT_WARNING (self, STREAM, FORMAT,
        ("No clean cut point in %u frames: chunks grow longer", frames),
        ("chunk=keyframes cuts only where a chunk decodes on its own (an "
         "IDR picture for H.264/H.265; an open GOP's I picture or an "
         "H.265 CRA is not one). Encode closed GOPs with IDRs at most "
         "chunk-frames apart for parallel chunks (x264enc: key-int-max, "
         "and no open-gop=1 in option-string; x265enc: "
         "option-string=open-gop=0:keyint=N); output stays correct"));
  }
  return false;
}

/* A lane's queue holds up to two chunks' worth: the lane works on one while
 * upstream fills the next lane's. */
static size_t
chunk_queue_limit (GstGpuFanOut * self)
{
  return std::max<size_t> (self->priv->session->lane_queue_size (),
      2 * (size_t)self->priv->streaming.chunk_frames);
}

enum class Queued {
  kOk,
  kStalled, /* the lane is stalled and has no room for the chunk's rest */
  kStopped, /* the lane does not run (flush, deactivation, release) or
             * failed */
  kMove,    /* the lane stalled and the chunk has not begun: it may move */
};

/* Queues @item on the open chunk's lane, waiting for room. Every wait ends
 * at an event: the worker took an item (it notifies producer_waiting), the
 * lane stopped or stalled (lane_changed_unlocked, lane_note_health), the
 * sink pad was deactivated (it wakes the lanes). A lane the Session stalled
 * does not hold a chunk (kStalled): the rest of it, or all of it when it
 * has not begun, goes elsewhere. Unless the lane was the Session's last
 * resort (@last_resort: stalled when it was picked, no other lane could
 * take the chunk): then the chunk's first buffer waits for room, and asks
 * again every stall-timeout (another lane may have come back). */
static Queued
chunk_enqueue (GstGpuFanOut * self, const LanePtr & lane, QueuedItem && item,
    bool last_resort, bool move_failed)
{
  gpufan::FanOutPort & session = *self->priv->session;
  const size_t limit = chunk_queue_limit (self);
  bool wake;
  {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    for (;;) {
      /* the Session's lock is a leaf under the lane's */
      if (!lane->accepts_items_unlocked () || session.flushing ())
        return Queued::kStopped;
      /* failed: lane_fail sends its chunks again (or moves them) at once;
       * where the open chunk went is known after that */
      if (lane->failed_unlocked () && !lane->fail_handled) {
        lane->cond.wait (lk);
        continue;
      }
      /* a stalled lane may never begin the chunk, a failed one's worker
       * would drop it: it goes to another lane if it has not begun, or
       * follows it there (chunk_move_off_failed moved it) */
      if ((lane->stalled_unlocked () || lane->failed_unlocked ()) && !item.chunk_first
          && (lane->open_chunk_moved_to != G_MAXUINT || !move_failed))
        return Queued::kMove;
      if (lane->failed_unlocked ())
        return Queued::kStopped;
      if (lane->queue.size () < limit)
        break;
      bool stalled = false;
      if (lane->stalled_unlocked ()) {
        stalled = session.IsLaneStalled (lane->id);
        if (!stalled)
          /* it answered again meanwhile */
          lane->transition_unlocked (LaneEvent::kCameBack);
      }
      lane->producer_waiting = true;
      if (stalled && !(item.chunk_first && last_resort)) {
        lane->producer_waiting = false;
        return Queued::kStalled;
      }
      if (stalled) {
        const gint64 retry_due = session.LastResortRetryDueNs ();
        if (session.WaitUntilDue (lane->cond, lk, retry_due)
            == std::cv_status::timeout) {
          lane->producer_waiting = false;
          return Queued::kStalled;
        }
      } else {
        lane->cond.wait (lk);
      }
      lane->producer_waiting = false;
    }
    /* its input arriving is progress (a chunk that waits for upstream is
     * not a stalled one), and one more frame it stands for: counted before
     * the worker can take it */
    session.NoteChunkFrame (lane->id, item.seq);
    if (replay_on (self))
      chunk_replay_keep (self, item);
    wake = lane->worker_waiting;
    item.woke_worker = wake && lane->queue.empty ();
    lane->queue.push_back (std::move (item));
  }
  if (wake)
    lane->cond.notify_all ();
  return Queued::kOk;
}

std::unique_ptr<Dispatcher>
fanout::make_chunk_dispatcher (GstGpuFanOut * self)
{
  return std::make_unique<ChunkDispatcher> (self, self->sinkpad);
}

GstFlowReturn
ChunkDispatcher::Chain (GstMiniObject * obj, bool, gint64 pts, gint64)
{
  GstGpuFanOut * self = self_;
  GstGpuFanOutPrivate * priv = self->priv;
  ChunkCursor & chunk = cursor_;
  const bool keyframes
      = priv->streaming.chunk_mode == GST_GPUFAN_CHUNK_KEYFRAMES;

  if (chunk.lane && chunk_ends_before (self, pad_, chunk, obj))
    chunk_close (self, chunk);
  if (chunk.skip_to_keyframe) {
    if (!is_keyframe (pad_, chunk, obj)) {
      gst_mini_object_unref (obj);
      return GST_FLOW_OK;
    }
    chunk.skip_to_keyframe = false;
  }

  for (;;) {
    bool first = false;
    gpufan::Dispatch d;
    if (!chunk.lane) {
      LanePtr lane;
      GstFlowReturn ret = PrepareDispatch ();
      /* no origin GPU: a chunk's copies are many frames' (the learned
       * transfer is one frame's) */
      if (ret == GST_FLOW_OK)
        ret = RequestLane (pts, &d, &lane);
      if (ret != GST_FLOW_OK) {
        gst_mini_object_unref (obj);
        return ret;
      }
      chunk.lane = lane;
      chunk.seq = d.seq;
      chunk.frames = 0;
      chunk.move_failed = false;
      if (replay_on (self))
        replay_listen (self);
      chunk_set_open (self, lane, true, d.seq);
      first = true;
      GST_LOG_OBJECT (self, "chunk %" G_GUINT64_FORMAT " -> lane %u", d.seq,
          d.lane);
    }

    QueuedItem item (obj, chunk.seq, ItemKind::kChunkBuffer);
    item.chunk_first = first;
    item.segment_epoch = priv->segment_epoch;
    item.awaited = first && d.awaited;
    item.caps_epoch = priv->caps_epoch.load ();
    item.stream = Stream ();
    if (first)
      PrepareFirst (item);
    LanePtr lane = chunk.lane;
    switch (chunk_enqueue (self, lane, std::move (item),
        first && d.last_resort, chunk.move_failed)) {
      case Queued::kOk:
        chunk.frames++;
        maybe_post_interval_stats (self);
        return GST_FLOW_OK;
      case Queued::kMove: {
        /* the chunk so far goes to another lane, the rest follows it */
        LanePtr to = chunk_move_open (self, lane, chunk.seq);
        if (to)
          chunk.lane = to;
        else
          chunk.move_failed = true;
        obj = item.Steal ();
        continue;
      }
      case Queued::kStalled:
        if (first) {
          /* it never began: all of it goes to the lane the Session picks
           * now (this one only as its last resort) */
          /* (closed first: another stream's chunk may go there once the
           * Session forgot it) */
          chunk_set_open (self, lane, false, chunk.seq);
          priv->session->WithdrawItem (lane->id, chunk.seq);
          chunk.lane = nullptr;
          break;
        }
        /* the rest of the chunk goes elsewhere; the lane drains what it
         * took if it ever answers again */
        GST_DEBUG_OBJECT (self,
            "lane %u stalled: chunk %" G_GUINT64_FORMAT " ends early", lane->id,
            chunk.seq);
        chunk_close (self, chunk);
        if (keyframes && !is_keyframe (pad_, chunk, obj)) {
          chunk.skip_to_keyframe = true;
          gst_mini_object_unref (item.Steal ());
          return GST_FLOW_OK;
        }
        break;
      case Queued::kStopped:
        chunk_set_open (self, lane, false, chunk.seq);
        if (first) {
          priv->session->WithdrawItem (lane->id, chunk.seq);
          /* (a failed lane is out of the Session's choice already) */
          if (!lane_failed (lane))
            priv->session->SetLaneEligible (lane->id, false);
        }
        chunk.lane = nullptr;
        if (priv->session->flushing ()) {
          gst_mini_object_unref (item.Steal ());
          return GST_FLOW_FLUSHING;
        }
        /* the lane went away mid-chunk: nothing decodes before the next
         * keyframe */
        if (keyframes && !first && !is_keyframe (pad_, chunk, obj)) {
          chunk.skip_to_keyframe = true;
          gst_mini_object_unref (item.Steal ());
          return GST_FLOW_OK;
        }
        break;
    }
    /* a new chunk on another lane */
    obj = item.Steal ();
  }
}

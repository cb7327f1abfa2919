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
 * The lane's worker makes each chunk self-contained:
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

static bool
flow_is_fatal_result (GstFlowReturn ret)
{
  return ret < GST_FLOW_EOS;
}

bool
fanout::chunk_mode_on (GstGpuFanOut * self)
{
  return self->priv->streaming.chunk_mode != GST_GPUFAN_CHUNK_FRAME;
}

void
fanout::chunk_close (GstGpuFanOut * self)
{
  auto & chunk = self->priv->chunk;
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
fanout::chunk_forget (GstGpuFanOut * self)
{
  auto & chunk = self->priv->chunk;
  if (chunk.lane)
    chunk_set_open (self, chunk.lane, false);
  chunk.lane = nullptr;
  chunk.frames = 0;
  chunk.skip_to_keyframe = false;
}

/* Whether a chunk starting at @obj decodes on its own (keyframes mode): see
 * gstgpufanout-cut.cpp. The rule follows the input caps. */
static bool
is_keyframe (GstGpuFanOut * self, GstMiniObject * obj)
{
  if (!GST_IS_BUFFER (obj))
    return false;
  auto & chunk = self->priv->chunk;
  const guint32 epoch = self->priv->caps_epoch.load ();
  if (chunk.cut_epoch != epoch) {
    GstCaps * caps = gst_pad_get_current_caps (self->sinkpad);
    chunk.cut = cut_rule_from_caps (caps);
    gst_clear_caps (&caps);
    chunk.cut_epoch = epoch;
    chunk.no_cut_warned = false;
  }
  return is_clean_cut (chunk.cut, GST_BUFFER_CAST (obj));
}

/* A chunk this long that passed a keyframe which is no clean cut is worth
 * a warning (not a closed GOP that is merely longer than chunk-frames). */
static constexpr guint kNoCutWarnChunks = 4;

/* Where the open chunk ends before @obj. */
static bool
chunk_ends_before (GstGpuFanOut * self, GstMiniObject * obj)
{
  auto & chunk = self->priv->chunk;
  const guint frames = chunk.frames;
  const guint wanted = self->priv->streaming.chunk_frames;
  if (frames < wanted)
    return false;
  if (self->priv->streaming.chunk_mode == GST_GPUFAN_CHUNK_FRAMES)
    return true;
  /* keyframes: only where the next one can be decoded on its own */
  if (is_keyframe (self, obj))
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
 * lane stopped or stalled (lane_changed_unlocked, lane_note_stalled), the
 * sink pad was deactivated (it wakes the lanes). A lane the Session stalled
 * does not hold a chunk (kStalled): the rest of it, or all of it when it
 * has not begun, goes elsewhere. Unless the lane was the Session's last
 * resort (@last_resort: stalled when it was picked, no other lane could
 * take the chunk): then the chunk's first buffer waits for room, and asks
 * again every stall-timeout (another lane may have come back). */
static Queued
chunk_enqueue (GstGpuFanOut * self, const LanePtr & lane, QueuedItem && item,
    bool last_resort)
{
  gpufan::Session & session = *self->priv->session;
  const size_t limit = chunk_queue_limit (self);
  bool wake;
  {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    for (;;) {
      /* the Session's lock is a leaf under the lane's */
      if (lane->state != LaneState::kRunning || session.flushing ())
        return Queued::kStopped;
      /* a stalled lane may never begin the chunk, a failed one's worker
       * would drop it: it goes to another lane if it has not begun, or
       * follows it there (chunk_move_off_failed moved it) */
      if ((lane->stalled || lane->failed) && !item.chunk_first
          && (lane->open_chunk_moved_to != G_MAXUINT
              || !self->priv->chunk.move_failed))
        return Queued::kMove;
      if (lane->failed)
        return Queued::kStopped;
      if (lane->queue.size () < limit)
        break;
      bool stalled = false;
      if (lane->stalled) {
        stalled = session.IsLaneStalled (lane->id);
        if (!stalled)
          lane->stalled = false; /* it answered again meanwhile */
      }
      lane->producer_waiting = true;
      if (stalled && !(item.chunk_first && last_resort)) {
        lane->producer_waiting = false;
        return Queued::kStalled;
      }
      if (stalled) {
        const auto deadline = std::chrono::steady_clock::now ()
            + std::chrono::nanoseconds (session.stall_timeout_ns ());
        if (lane->cond.wait_until (lk, deadline) == std::cv_status::timeout) {
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
    wake = lane->worker_waiting;
    item.woke_worker = wake && lane->queue.empty ();
    lane->queue.push_back (std::move (item));
  }
  if (wake)
    lane->cond.notify_all ();
  return Queued::kOk;
}

namespace {

/* Chunk mode's dispatcher: the open chunk is the element's (priv->chunk),
 * since the stall listener and the lanes' workers see it too. */
class ChunkDispatcher final : public Dispatcher {
public:
  using Dispatcher::Dispatcher;
  /* @obj into the open chunk, opening one where a chunk ends */
  GstFlowReturn Chain (GstMiniObject * obj, bool is_buffer, gint64 pts,
      gint64 max_wait_ns) override;
  void Cut () override { chunk_close (self_); }
  void Forget () override { chunk_forget (self_); }
};

} // namespace

std::unique_ptr<Dispatcher>
fanout::make_chunk_dispatcher (GstGpuFanOut * self)
{
  return std::make_unique<ChunkDispatcher> (self);
}

GstFlowReturn
ChunkDispatcher::Chain (GstMiniObject * obj, bool, gint64 pts, gint64)
{
  GstGpuFanOut * self = self_;
  GstGpuFanOutPrivate * priv = self->priv;
  auto & chunk = priv->chunk;
  const bool keyframes
      = priv->streaming.chunk_mode == GST_GPUFAN_CHUNK_KEYFRAMES;

  if (chunk.lane && chunk_ends_before (self, obj))
    chunk_close (self);
  if (chunk.skip_to_keyframe) {
    if (!is_keyframe (self, obj)) {
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
      chunk_set_open (self, lane, true);
      first = true;
      GST_LOG_OBJECT (self, "chunk %" G_GUINT64_FORMAT " -> lane %u", d.seq,
          d.lane);
    }

    QueuedItem item (obj, chunk.seq, ItemKind::kChunkBuffer);
    item.chunk_first = first;
    item.segment_epoch = priv->segment_epoch;
    item.awaited = first && d.awaited;
    item.caps_epoch = priv->caps_epoch.load ();
    LanePtr lane = chunk.lane;
    switch (
        chunk_enqueue (self, lane, std::move (item), first && d.last_resort)) {
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
          priv->session->WithdrawItem (lane->id, chunk.seq);
          chunk_set_open (self, lane, false);
          chunk.lane = nullptr;
          break;
        }
        /* the rest of the chunk goes elsewhere; the lane drains what it
         * took if it ever answers again */
        GST_DEBUG_OBJECT (self,
            "lane %u stalled: chunk %" G_GUINT64_FORMAT " ends early", lane->id,
            chunk.seq);
        chunk_close (self);
        if (keyframes && !is_keyframe (self, obj)) {
          chunk.skip_to_keyframe = true;
          gst_mini_object_unref (item.Steal ());
          return GST_FLOW_OK;
        }
        break;
      case Queued::kStopped:
        if (first) {
          priv->session->WithdrawItem (lane->id, chunk.seq);
          /* (a failed lane is out of the Session's choice already) */
          if (!lane_failed (lane))
            priv->session->SetLaneEligible (lane->id, false);
        }
        chunk_set_open (self, lane, false);
        chunk.lane = nullptr;
        if (priv->session->flushing ()) {
          gst_mini_object_unref (item.Steal ());
          return GST_FLOW_FLUSHING;
        }
        /* the lane went away mid-chunk: nothing decodes before the next
         * keyframe */
        if (keyframes && !first && !is_keyframe (self, obj)) {
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

/* Before chunk @seq's first buffer: what tells the fan-in where its output
 * begins, and what asks an encoder for a keyframe with the stream headers
 * (one the branch resets anyway after a drain; the first chunk's lane may
 * have encoded before). */
static void
push_chunk_start (GstGpuFanOut * self, const LanePtr & lane,
    const QueuedItem & first)
{
  const guint64 session_id = self->priv->session->id ();
  const guint64 seq = first.seq;
  gst_pad_push_event (lane->pad,
      gst_gpufan_chunk_start_new (session_id, lane->id, seq, first.caps_epoch,
          first.segment_epoch));
  GstEvent * fku
      = gst_video_event_new_downstream_force_key_unit (GST_CLOCK_TIME_NONE,
          GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, TRUE, 0);
  gst_gpufan_event_set_item (fku, session_id, seq);
  gst_pad_push_event (lane->pad, fku);
}

/* After the drain: the branch's elements saw EOS and refuse data until a
 * flush ends; the pair resets them (an encoder starts a new stream with an
 * IDR and its headers), and the segment goes again (a flush resets
 * theirs). An element that drops flushes but passes sticky events (valve
 * drop-mode=forward-sticky-events) passed the EOS, and the pads behind it
 * would refuse everything from now on: when the fan-in did not get the
 * flush, the stream-start goes again, which ends their EOS too. */
static void
reset_branch (GstGpuFanOut * self, const LanePtr & lane, guint64 seq)
{
  gpufan::Session & session = *self->priv->session;
  const guint64 session_id = session.id ();
  /* the flush removes it from the pad */
  GstEvent * segment
      = gst_pad_get_sticky_event (lane->pad, GST_EVENT_SEGMENT, 0);
  const guint64 resets = session.LaneResets (lane->id);
  GstEvent * start = gst_event_new_flush_start ();
  gst_gpufan_event_set_item (start, session_id, seq);
  gst_pad_push_event (lane->pad, start);
  GstEvent * stop = gst_event_new_flush_stop (FALSE);
  gst_gpufan_event_set_item (stop, session_id, seq);
  gst_pad_push_event (lane->pad, stop);
  if (session.LaneResets (lane->id) == resets) {
    GstEvent * stream_start
        = gst_pad_get_sticky_event (lane->pad, GST_EVENT_STREAM_START, 0);
    if (stream_start) {
      GST_DEBUG_OBJECT (lane->pad, "the fan-in did not get the reset of "
          "chunk %" G_GUINT64_FORMAT ": stream-start again", seq);
      /* a copy: the pad sends only a sticky event it does not hold */
      gst_pad_push_event (lane->pad, gst_event_copy (stream_start));
      gst_event_unref (stream_start);
    }
  }
  if (segment)
    gst_pad_push_event (lane->pad, segment);
}

/* The branch refused the drain's EOS while the lane runs: not our flush,
 * deactivation or unlink, so an element of the branch failed (a queue whose
 * downstream returned an error answers EOS with that error). */
static bool
drain_refused_by_branch (GstGpuFanOut * self, const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  return lane->state == LaneState::kRunning && lane->linked.load ()
      && !self->priv->session->flushing ();
}

/* The chunk's end: drain the branch, wait until the fan-in has the chunk,
 * reset the branch. A branch that failed without a push telling (an element
 * behind a queue) is found here, before the reset would hide it: the drain's
 * EOS is refused, or the chunk ends at an EOS the branch made itself
 * (Session::EndChunkByBranch). Either fails the lane as a fatal push result
 * does (on-lane-error). */
static void
drain_chunk (GstGpuFanOut * self, const LanePtr & lane, const QueuedItem & end,
    guint link_generation)
{
  gpufan::Session & session = *self->priv->session;
  auto & chunk = lane->chunk;
  chunk.started = false;
  session.SetItemUnits (lane->id, end.seq, end.chunk_frames,
      self->priv->streaming.chunk_frames);
  const bool claimed = session.IsLaneClaimed (lane->id);
  bool refused = false;
  if (claimed && !chunk.failed) {
    GstEvent * eos = gst_event_new_eos ();
    gst_gpufan_event_set_item (eos, session.id (), end.seq);
    GST_LOG_OBJECT (lane->pad, "draining chunk %" G_GUINT64_FORMAT, end.seq);
    const gint64 drain_start = session_now (self);
    if (!gst_pad_push_event (lane->pad, eos)
        && drain_refused_by_branch (self, lane)) {
      GST_DEBUG_OBJECT (lane->pad, "the branch refused the drain of chunk %"
          G_GUINT64_FORMAT, end.seq);
      chunk.failed = refused = true;
    }
    lane->timer->Add (gpufan::LaneTime::kPush, drain_start, session_now (self),
        end.seq);
  }
  const gpufan::PushOutcome outcome = chunk.failed
      ? gpufan::PushOutcome::kFailed
      : chunk.delivered ? gpufan::PushOutcome::kDelivered
                        : gpufan::PushOutcome::kDropped;
  /* no marker: the drain's EOS proves what did not come back */
  session.OnPushed (lane->id, end.seq, outcome);
  struct TraceChunk {
    GstGpuFanOut * self;
    const LanePtr & lane;
    guint64 seq;
    ~TraceChunk ()
    {
      lane->timer->Trace ("chunk", lane->chunk.started_ns, session_now (self),
          seq);
    }
  } trace_chunk{ self, lane, end.seq };
  if (refused) {
    lane_set_result (self, lane, GST_FLOW_ERROR, link_generation);
    return;
  }
  if (!claimed || chunk.failed)
    return;
  /* A branch with a queue returns from the EOS push at once: its outputs
   * are out only when the fan-in has the EOS. */
  const gint64 settle_start = session_now (self);
  session.WaitSettled (lane->id, end.seq);
  lane->timer->Add (gpufan::LaneTime::kSettle, settle_start,
      session_now (self), end.seq);
  if (session.ChunkEndedByBranch (lane->id, end.seq)) {
    GST_DEBUG_OBJECT (lane->pad, "the branch ended chunk %" G_GUINT64_FORMAT
        " without its drain", end.seq);
    lane_set_result (self, lane, GST_FLOW_ERROR, link_generation);
    return;
  }
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    /* a flush of our own, or the lane's end, resets the branch anyway */
    if (lane->state != LaneState::kRunning)
      return;
  }
  if (session.flushing ())
    return;
  reset_branch (self, lane, end.seq);
}

void
fanout::chunk_push_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item, GstFlowReturn result, guint link_generation)
{
  gpufan::Session & session = *self->priv->session;
  auto & chunk = lane->chunk;

  if (item.kind == ItemKind::kChunkEnd) {
    if (chunk.started && chunk.seq == item.seq)
      drain_chunk (self, lane, item, link_generation);
    return;
  }

  if (item.chunk_first) {
    lane_report_push (self, lane);
    chunk.seq = item.seq;
    chunk.delivered = false;
    chunk.failed = flow_is_fatal_result (result);
    chunk.started = session.MarkStarted (lane->id, item.seq, item.woke_worker);
    chunk.started_ns = session_now (self);
    if (!chunk.started) {
      GST_LOG_OBJECT (lane->pad,
          "chunk %" G_GUINT64_FORMAT " no longer awaited, not pushed",
          item.seq);
      return;
    }
    lane->last_seq = item.seq;
    if (!chunk.failed)
      push_chunk_start (self, lane, item);
  } else if (!chunk.started || chunk.seq != item.seq) {
    return; /* the rest of a chunk that was given up */
  }

  /* never feed a failed branch */
  if (chunk.failed || flow_is_fatal_result (result)) {
    chunk.failed = true;
    return;
  }
  tag_item (self, lane, item);
  if (GST_IS_EVENT (item.obj)) {
    /* a GAP */
    if (gst_pad_push_event (lane->pad, GST_EVENT_CAST (item.Steal ())))
      chunk.delivered = true;
  } else {
    stage_item (lane, item);
    GstBuffer * buffer = GST_BUFFER_CAST (item.Steal ());
    if (item.chunk_first) {
      buffer = gst_buffer_make_writable (buffer);
      GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    }
    const gint64 push_start = session_now (self);
    GstFlowReturn ret = gst_pad_push (lane->pad, buffer);
    lane->timer->Add (gpufan::LaneTime::kPush, push_start, session_now (self),
        item.seq);
    if (ret == GST_FLOW_OK)
      chunk.delivered = true;
    else {
      chunk.failed |= flow_is_fatal_result (ret);
      lane_set_result (self, lane, ret, link_generation);
    }
  }
  session.NoteProgress (lane->id, item.seq);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gpufanin's instance state, shared by its files (see gstgpufanin.cpp).
 *
 * Locks, outermost first (a thread holding one may take those below it):
 *   1. a pad's stream lock: a sink pad's (held by its lane's streaming thread
 *      in the chain function and serialized events and queries) or the src
 *      pad's (held by its task). gst_pad_pause_task and gst_pad_stop_task
 *      take the src pad's, so they are called with neither 2 nor 3 held;
 *   2. GstGpuFanInPrivate::output_lock: its holder owns the output state
 *      (out_*) and pushes downstream; held across those pushes (and the
 *      statistics message before EOS), nothing else that blocks. The flush
 *      handlers own out_* while no output runs;
 *   2b. GstGpuFanInPrivate::stats_lock: with several streams, the final
 *      statistics' claim (streams_stats_posted) and post, so that they go
 *      out once and before the last stream's EOS; held across that post
 *      only;
 *   3. GstGpuFanInPrivate::lock, with cond: pads, pairing, the Output's
 *      flow result (gstgpufanin-output.h), batch counters. Never held across
 *      a push, a peer query, a message post or a blocking Session call
 *      (WaitOutput);
 *   4. the Session's lock (innermost, in lib/): any Session call may be made
 *      with 2 and 3 held, except WaitOutput, made with neither.
 * Atomics (settings, flags read by the lanes' threads, the item handler)
 * need no lock.
 */
#pragma once

#include "gstgpufanin.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpufan/mutex.h"
#include "gpufan/fanin-port.h"
#include "common/gstgpufangpumove.h"
#include "common/gstgpufanprotocol.h"
#include "common/gstgpufanutils.h"
#include "gstgpufanin-handler.h"
#include "gstgpufanin-stream-output.h"
#include "gstgpufanin-output.h"

GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_in_debug);
#define GST_CAT_DEFAULT gst_gpufan_in_debug

#define DEFAULT_STALL_TIMEOUT (2 * GST_SECOND)

/* Which outputs of a chunk that is not the head are held as copies (the
 * copy-held property; gstgpufanin-held.cpp). */
typedef enum {
  GST_GPUFAN_HELD_COPY_AUTO,
  GST_GPUFAN_HELD_COPY_ALWAYS,
  GST_GPUFAN_HELD_COPY_NEVER,
} GstGpuFanHeldCopy;

#define GST_TYPE_GPUFAN_HELD_COPY (gst_gpufan_held_copy_get_type ())
GType gst_gpufan_held_copy_get_type (void);

namespace gpufanin {

/* The sticky events current on a sink pad. Items share the set that was
 * current when they arrived (one reference per item instead of one per
 * event); a new sticky event replaces the pad's set, never changes it. */
struct StickyEvents {
  GstEvent * stream_start = nullptr;
  GstEvent * caps = nullptr;
  GstEvent * segment = nullptr;

  StickyEvents () = default;
  StickyEvents (const StickyEvents & other)
  {
    gst_event_replace (&stream_start, other.stream_start);
    gst_event_replace (&caps, other.caps);
    gst_event_replace (&segment, other.segment);
  }
  StickyEvents & operator= (const StickyEvents &) = delete;
  ~StickyEvents ()
  {
    gst_clear_event (&stream_start);
    gst_clear_event (&caps);
    gst_clear_event (&segment);
  }
};

using StickyPtr = std::shared_ptr<const StickyEvents>;

/* A few events known to carry what downstream has (each lane's sink pad has
 * its own caps event, say, with the same caps): an item with one of them
 * needs no parsing nor comparing. Holds a reference to each. */
class KnownEvents {
public:
  KnownEvents () = default;
  KnownEvents (const KnownEvents &) = delete;
  KnownEvents & operator= (const KnownEvents &) = delete;
  ~KnownEvents () { Clear (); }

  bool Has (GstEvent * event) const
  {
    for (GstEvent * e : events_)
      if (e == event)
        return true;
    return false;
  }
  void Add (GstEvent * event)
  {
    if (Has (event))
      return;
    gst_event_replace (&events_[next_], event);
    next_ = (next_ + 1) % G_N_ELEMENTS (events_);
  }
  void Clear ()
  {
    for (GstEvent *& e : events_)
      gst_clear_event (&e);
  }

private:
  GstEvent * events_[4] = {};
  guint next_ = 0;
};

/* A buffer or event on its way through the reorder window, with the sticky
 * events that were current on its sink pad when it arrived. */
struct FanInItem : public gpufan::Payload {
  GstMiniObject * obj = nullptr;
  /* set by SetSticky: the events of `sticky`, which keeps them alive */
  GstEvent * stream_start = nullptr;
  GstEvent * caps = nullptr;
  GstEvent * segment = nullptr;
  guint lane = 0;
  guint32 caps_epoch = 0;
  bool has_caps_epoch = false;
  /* attachments (positioned events) only fill in missing sticky events */
  bool is_attachment = false;
  /* part of a chunk's output: the epoch of its input's segment */
  guint32 segment_epoch = 0;
  /* Chunk mode: the chunk's output, in the order its lane made it (this
   * item then has no obj of its own). */
  std::unique_ptr<std::vector<gpufan::PayloadPtr>> chunk;

  void SetSticky (StickyPtr events)
  {
    sticky = std::move (events);
    stream_start = sticky ? sticky->stream_start : nullptr;
    caps = sticky ? sticky->caps : nullptr;
    segment = sticky ? sticky->segment : nullptr;
  }

  ~FanInItem () override
  {
    if (obj)
      gst_mini_object_unref (obj);
  }

private:
  StickyPtr sticky;
};

struct PadState {
  guint index = 0; /* sink_<index> */
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  /* the lane's time split: its thread's serialized queries and output
   * pushes here (set with the pairing) */
  std::shared_ptr<gpufan::LaneTimer> timer;
  bool paired = false;
  bool eos = false;
  bool flushing = false;
  StickyPtr sticky; /* null until the first sticky event */
  /* Chunk mode: the chunk whose output the lane is returning (between its
   * chunk-start event and its drain EOS), collected here. */
  std::unique_ptr<FanInItem> chunk;
  guint64 chunk_seq = 0;
  guint32 chunk_caps_epoch = 0; /* of the chunk's input */
  guint32 chunk_segment_epoch = 0;

  void ClearSticky () { sticky.reset (); }
  /* FLUSH_START: what the lane returns is dropped, an open chunk too */
  void StartFlush ()
  {
    flushing = true;
    chunk.reset ();
  }
};

/* An item (or a marker: see gst_gpufan_marker_new) that came out of a
 * lane, on its way into the window. */
struct PendingArrival {
  guint lane;
  std::optional<guint64> seq;
  gint64 pts;
  gpufan::PayloadPtr payload;
  bool marker = false; /* proves the lane's items up to seq */
};


} // namespace gpufanin

using gpufanin::FanInItem;
using gpufanin::PadState;
using gpufanin::PendingArrival;
using gpufanin::StickyEvents;
using gpufanin::StickyPtr;

struct GstGpuFanInPrivate {
  gpufan::Mutex lock;
  /* Under lock: the src task's wait for a session (before any pad paired)
   * and serialized queries (wait_lane_released); the task's other waits are
   * WaitOutput's. Notified with every change they look at:
   * gst_gpufan_in_wake_output_unlocked (flush, EOS, a released pad, a
   * stopped output, a new stall-timeout, deactivation, which also wakes
   * WaitOutput), pairing, and the end of an output batch. */
  gpufan::CondVar cond;
  std::map<GstPad *, PadState> pads;
  /* several input streams: their src_%u pads, by Session stream id */
  std::map<guint32, gpufanin::StreamOutputPtr> stream_outputs;
  std::shared_ptr<gpufan::FanInPort> session;
  std::string fanout_name; /* of the session's gpufanout, for messages */
  /* The session's gpufanout: the source of every gpufan-stats message
   * (gst_gpufan_in_post_stats). Weak: the fan-in never keeps it alive. */
  GWeakRef fanout;
  /* the flow result (under lock), the src task and the waits */
  gpufanin::Output output{ cond, session };
  /* what differs per mode (gstgpufanin-handler.h) */
  std::atomic<const gpufanin::ItemHandler *> handler{
    &gpufanin::frame_handler ()
  };
  GstGpuFanSeqnumMemory forwarded_seqnums; /* events sent once */
  std::atomic<guint64> stall_timeout{ DEFAULT_STALL_TIMEOUT };
  guint32 eos_seqnum = GST_SEQNUM_INVALID; /* of the last EOS that came in */
  /* downstream asked to renegotiate: lanes may change caps one by one */
  std::atomic<bool> reconfigure_requested{ false };

  /* Output state: what downstream has seen last. */
  GstEvent * out_stream_start = nullptr;
  GstCaps * out_caps = nullptr;
  /* While out_caps is set: caps events that carry out_caps. */
  gpufanin::KnownEvents out_caps_events;
  guint32 out_caps_epoch = 0;
  bool out_has_caps_epoch = false;
  GstSegment out_segment;
  bool out_segment_valid = false;
  /* Chunk mode: the input segment epoch of the chunk that last went out
   * (retime_chunk_item moves only chunks of that one). */
  guint32 out_segment_epoch = 0;
  bool out_has_segment_epoch = false;
  /* Chunk mode with several streams: each stream's segment as its own
   * events passed the output (gstgpufanin-chunk-streams.cpp) */
  std::map<guint32, GstSegment> out_stream_segments;
  /* While out_segment_valid: segment events that carry out_segment. */
  gpufanin::KnownEvents out_segment_events;
  /* While downstream renegotiates, items of the epoch current then may come
   * with either caps: not an error. Ends with the first item of a newer
   * epoch. */
  bool renegotiating = false;
  guint32 renegotiating_epoch = 0;

  /* Output batches started (under lock, by the holder of output_lock) and
   * finished: items leave the window when a batch starts and go downstream
   * while it runs. batch_waiters: serialized queries waiting for a batch to
   * finish (counted under lock before they look at batches_done), the only
   * ones a finished batch has to wake. */
  guint64 batches_started = 0;
  std::atomic<guint64> batches_done{ 0 };
  std::atomic<guint> batch_waiters{ 0 };

  /* Output runs in one thread at a time, the holder of output_lock: the src
   * pad's task, or the streaming thread of a lane that just delivered an item
   * and finds the output free (as funnel pushes from its sink pads' threads).
   * That spares waking the task for every item. output_pending: an item came
   * while another thread held the output; the holder takes it too. */
  gpufan::Mutex output_lock;
  gpufan::ReadyBatch out_batch; /* under output_lock; empty between batches */
  std::atomic<bool> output_pending{ false };
  /* output-device: the GPU frames in CUDA memory leave on, -1 as the lanes
   * deliver them; and what copies them there (under output_lock). */
  std::atomic<gint> output_device{ -1 };
  /* the copy-held property (GstGpuFanHeldCopy) */
  std::atomic<gint> copy_held{ GST_GPUFAN_HELD_COPY_AUTO };
  std::unique_ptr<GstGpuFanGpuMove> output_move;
  GstAllocator * output_host_allocator = nullptr; /* its GPU's node pool */
  bool output_move_warned = false;                /* under output_lock */
  /* What ordering adds to the latency grew: post a LATENCY message (after
   * letting go of output_lock). */
  std::atomic<bool> latency_post_pending{ false };
  /* The lanes said they are live (latency query). Then only the src task
   * pushes downstream: a sync=true sink holds the pushing thread until the
   * frame's time, and a lane thread held there would delay the lane's next
   * items by the latency, which would raise the measured latency, which
   * would hold it longer. */
  std::atomic<bool> live{ false };
  /* Several streams (src_%u pads requested): as when live, only the src task
   * pushes (the streams handler's OutputFromTask). A lane's thread that pushed several streams' output downstream
   * itself would leave its branch idle meanwhile, and with one branch
   * instance shared by every stream that idle time is the lanes' loss. */
  std::atomic<bool> streams_out{ false };
  /* Several streams: the gpufan-stats message went out before the last
   * stream's EOS (the pipeline's EOS follows that one, not the lanes').
   * Claimed under stats_lock: the lanes' end and the last stream's EOS
   * race to post it. */
  std::atomic<bool> streams_stats_posted{ false };
  gpufan::Mutex stats_lock;

  GstGpuFanInPrivate () { g_weak_ref_init (&fanout, nullptr); }

  ~GstGpuFanInPrivate ()
  {
    g_weak_ref_clear (&fanout);
    for (auto & kv : pads)
      kv.second.ClearSticky ();
    gst_clear_event (&out_stream_start);
    gst_clear_caps (&out_caps);
  }
};

struct _GstGpuFanIn {
  GstElement parent;
  GstPad * srcpad;
  GstGpuFanInPrivate * priv;
};

/* gstgpufanin-pairing.cpp */
gboolean gst_gpufan_in_ensure_paired (GstGpuFanIn * self, GstPad * pad,
    std::string * conflict = nullptr);
gboolean gst_gpufan_in_answer_pair_query (GstGpuFanIn * self, GstPad * pad,
    GstQuery * query);
gboolean gst_gpufan_in_cross_pair_query (GstGpuFanIn * self, GstQuery * query);

/* The mode's item handler (gstgpufanin-handler.h). */
inline const gpufanin::ItemHandler &
gst_gpufan_in_handler (GstGpuFanIn * self)
{
  return *self->priv->handler.load (std::memory_order_acquire);
}
/* From now on @handler's mode (see gstgpufanin-handler.h). */
void gst_gpufan_in_use_handler (GstGpuFanIn * self,
    const gpufanin::ItemHandler & handler);

/* gstgpufanin-sink.cpp */
void gst_gpufan_in_setup_sink_pad (GstPad * pad);
/* Takes @obj, which came out of @pad's lane (pairing the pad first if need
 * be): *@taken gets its item (and the handler's TakeUnlocked its say).
 * FALSE when it cannot go into the window: @obj was dropped, and *@ret is
 * what the lane gets back. */
bool gst_gpufan_in_take_item (GstGpuFanIn * self, GstPad * pad,
    GstMiniObject * obj, gpufanin::TakenItem * taken, GstFlowReturn * ret);

/* gstgpufanin-frame.cpp: a taken item (no chunk's) into the window, the
 * lane's thread then outputting what that made releasable. */
GstFlowReturn gst_gpufan_in_arrive_item (GstGpuFanIn * self, GstPad * pad,
    gpufanin::TakenItem & taken);

/* gstgpufanin-output.cpp */
void gst_gpufan_in_wake_output_unlocked (GstGpuFanIn * self);
void gst_gpufan_in_restart_output_unlocked (GstGpuFanIn * self);
GstFlowReturn gst_gpufan_in_push_sticky (GstGpuFanIn * self, FanInItem * item);
/* One buffer or event out of the src pad, with the sticky events it needs.
 * Under output_lock. */
GstFlowReturn gst_gpufan_in_push_item (GstGpuFanIn * self, FanInItem * item,
    guint64 session_id);
/* A push returned @ret (not OK) for @item: the output stops as GstQueue's
 * does; *@pause is set when the task is to pause. Under output_lock. */
void gst_gpufan_in_output_failed (GstGpuFanIn * self, gpufan::FanInPort & session,
    GstFlowReturn ret, FanInItem * item, bool * pause);
/* Output from the calling thread (a lane's): what may leave the window goes
 * downstream now, or the task is woken to send it. */
void gst_gpufan_in_output_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session);
gpufan::Arrival gst_gpufan_in_output_from_lane (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session,
    PendingArrival && arrival);
void gst_gpufan_in_src_loop (gpointer user_data);

/* gstgpufanin.cpp: the src pads' functions (src_%u pads use them too) */
gboolean gst_gpufan_in_src_event (GstPad * pad, GstObject * parent,
    GstEvent * event);
gboolean gst_gpufan_in_src_query (GstPad * pad, GstObject * parent,
    GstQuery * query);

/* gstgpufanin-streams.cpp: several input streams, each out of its src_%u */
GstPad * gst_gpufan_in_stream_request_pad (GstGpuFanIn * self,
    GstPadTemplate * templ, const gchar * name);
void gst_gpufan_in_stream_release_pad (GstGpuFanIn * self, GstPad * pad);
/* An item or event of stream @released.stream left the window: to its src
 * pad's queue (gstgpufanin-stream-output.h). Under output_lock; never
 * waits for downstream. */
void gst_gpufan_in_push_stream_released (GstGpuFanIn * self,
    gpufan::Released & released);
/* A new session: its streams' flushes reach our src pads (unset on none). */
void gst_gpufan_in_listen_stream_flushes (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, bool listen);
/* The end: every stream's src pad that has not had EOS gets it (after what
 * its queue holds). Under output_lock. */
void gst_gpufan_in_end_streams_unlocked (GstGpuFanIn * self);
/* gstgpufanin-eos.cpp: the final gpufan-stats message of @session, posted
 * in the name of its gpufanout (by us only if that one is gone). */
void gst_gpufan_in_post_stats (GstGpuFanIn * self,
    const gpufan::StatsView & session);
/* @pad's new stream-start after its EOS; TRUE when
 * our EOS had gone out and the src task is to start again. */
bool gst_gpufan_in_restart_after_eos (GstGpuFanIn * self, GstPad * pad);
/* A new start: every stream's output starts over. */
void gst_gpufan_in_restart_streams (GstGpuFanIn * self);
/* gstgpufanin-chunk.cpp: a chunk-start event of our fan-out (consumed:
 * TRUE) puts the fan-in in chunk mode, if it was not yet. */
bool gst_gpufan_in_chunk_start (GstGpuFanIn * self, GstPad * pad,
    GstEvent * event);
/* Chunk mode: @position in segment @from as a position in @to, through its
 * running time (rate 1.0 only; FALSE when it would lie before @to). */
gboolean gst_gpufan_in_translate_position (const GstSegment * from,
    const GstSegment * to, GstClockTime * position);
/* gstgpufanin-chunk-streams.cpp, chunk mode with several streams (under
 * output_lock): @released (a chunk, or one of its stream's events) to its
 * stream's src pad; the head chunk @seq's @parts that came so far. */
void gst_gpufan_in_push_stream_chunk (GstGpuFanIn * self,
    gpufan::Released & released);
/* Every released item of a stream passes here, in the stream's order,
 * whatever the mode (the streams' events leave before the first chunk
 * tells the fan-in it is in chunk mode): its segment is what src_k has
 * when the stream's later chunks go out. */
void gst_gpufan_in_note_stream_event (GstGpuFanInPrivate * priv,
    const gpufan::Released & released);
void gst_gpufan_in_push_stream_chunk_parts (GstGpuFanIn * self,
    guint32 stream, guint64 seq, std::vector<gpufan::PayloadPtr> & parts);
/* Chunk mode: what to hold of @obj, an output of @pad's lane, while its
 * chunk waits for earlier ones (gstgpufanin-held.cpp): @obj, or a copy
 * that leaves the branch's bounded pool its buffer (@obj is then unreffed).
 * Call without locks. */
GstMiniObject *gst_gpufan_in_hold_chunk_output (GstGpuFanIn * self,
    GstPad * pad, GstMiniObject * obj);

/* output-device's copy of @buffer, for frames leaving on @pad (output.cpp) */
void gst_gpufan_in_move_to_output_device (GstGpuFanIn * self, GstPad * pad,
    GstBuffer ** buffer);

/* gstgpufanin-eos.cpp */
bool gst_gpufan_in_all_pads_eos_unlocked (GstGpuFanInPrivate * priv);
bool gst_gpufan_in_stream_ends_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, std::string * missing,
    gint64 * deadline_ns);
void gst_gpufan_in_finish_stream (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session,
    const std::string & missing = std::string ());

/* gstgpufanin-latency.cpp */
void gst_gpufan_in_maybe_post_latency (GstGpuFanIn * self);
gboolean gst_gpufan_in_query_latency (GstGpuFanIn * self, GstQuery * query);
void gst_gpufan_in_lanes_changed (GstGpuFanIn * self);

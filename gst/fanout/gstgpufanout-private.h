/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's internals, shared by its source files:
 *   gstgpufanout.cpp             the element: request pads, states, properties
 *   gstgpufanout-dispatch.cpp    the sink pad: each buffer to a lane's queue
 *   gstgpufanout-dispatcher.h    the chain's strategy per mode (frame, chunk,
 *                                streams)
 *   gstgpufanout-settings.h      property ids, defaults, enums, Settings
 *   gstgpufanout-properties.cpp  the properties; the settings snapshot
 *   gstgpufanout-sinkpad.cpp     the sink_%u pad class
 *   gstgpufanout-lane.cpp        a lane's queue, worker thread, flush and EOS
 *   gstgpufanout-pad.cpp         the src pad class and its pad functions
 *   gstgpufanout-pairing.cpp     the probe that lets a gpufanin claim lanes
 *   gstgpufanout-placement.cpp   which device a lane runs on; staging copies
 *   gstgpufanout-allocation.cpp  the ALLOCATION answer over all lanes
 *   gstgpufanout-chunk.cpp       chunk mode: runs of frames to one lane, drained
 *   gstgpufanout-replay.cpp      a failed lane's frames sent to the others
 *   gstgpufanout-stats.cpp       statistics messages (interval, final)
 *   gstgpufanout-streams.cpp     several input streams (sink_%u pads)
 *   gstgpufanout-enums.cpp       the policy and staging enums */
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpufan/cuda.h"
#include "gpufan/cut-point.h"
#include "gpufan/device.h"
#include "gpufan/mutex.h"
#include "gpufan/placement.h"
#include "gpufan/session.h"
#include "gpufan/staging.h"
#include "common/gstgpufangpumove.h"
#include "gstgpufanout-settings.h"
#include "gstgpufanout.h"
#include "gstgpufantaskpool.h"
#include "common/gstgpufanhostmemory.h"
#include "common/gstgpufanprotocol.h"
#include "common/gstgpufanutils.h"

GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_out_debug);

/* *INDENT-OFF* */
/* Locks, outermost first (a thread holding one may take only those below):
 *   1. priv->settings_lock   property values (priv->settings)
 *   2. priv->lanes_lock      the lane map and each lane's placement
 *   3. priv->chunk_move_lock chunk mode: moving chunks off a stalled lane
 *   4. Lane::lock            a lane's queue, state and condition variable;
 *      only a chunk move nests two (the stalled lane's first)
 *   5. a pad's object lock   pad properties (weight, device, task pool)
 *   6. Leaf locks, never held while taking another: Lane::staging_lock (the
 *      lane's host pool; ALLOCATION queries read it from any thread),
 *      priv->upstream_lock (upstream event seqnums), priv->replay_lock (the
 *      frames kept for replay), and the Session's own
 *      lock (the Session never calls back into us with it held).
 * The Session's one callback, its stall listener (lane_note_stalled), runs
 * from the fan-in's TakeReady calls without the Session's lock and takes
 * lanes_lock, then a Lane::lock: no thread of ours makes those calls.
 * No lock of ours is held across a push, a peer query, a pad (de)activation
 * or a blocking Session call (DispatchItem, WaitSettled). In chunk mode the
 * chain function waits on a Lane::cond for room (chunk_enqueue), asking the
 * Session (a leaf lock) with that lane's lock held. */
/* *INDENT-ON* */

namespace fanout {
enum class ItemKind {
  kBuffer,         /* a scheduled buffer (has a seq) */
  kScheduledEvent, /* a GAP event, scheduled like a buffer (has a seq) */
  kEvent,          /* a serialized event every lane gets (no seq) */
  /* chunk mode (gstgpufanout-chunk.cpp): a buffer (or GAP) of chunk `seq`,
   * and the chunk's end, where the worker drains the branch */
  kChunkBuffer,
  kChunkEnd,
};

/* What a clean cut is in keyframes mode (gstgpufanout-cut.cpp): for
 * H.264/H.265 in access units, an IDR found by scanning the buffer
 * (nal_length_size 0: start codes; else length prefixes of that size);
 * kOther: a buffer without DELTA_UNIT. */
struct CutRule {
  gpufan::VideoCodec codec = gpufan::VideoCodec::kOther;
  guint nal_length_size = 0;
};

/* Where a lane is in its life. Only kRunning takes items. */
enum class LaneState {
  kInactive, /* its pad is not active: not yet activated, deactivated, or
              * being released */
  kFlushing, /* between the stream's FLUSH_START and FLUSH_STOP */
  kRunning,
};

/* Owns one reference to a buffer or event. */
struct QueuedItem {
  GstMiniObject * obj = nullptr;
  guint64 seq = 0;
  ItemKind kind = ItemKind::kEvent;
  bool awaited = false; /* a gpufanin completes it (Dispatch::awaited) */
  /* the input caps' epoch when it was dispatched (a scheduled item's; the
   * worker tags it with seq and epoch, see tag_item) */
  guint32 caps_epoch = 0;
  /* it went into the empty queue of a worker asleep waiting for items: its
   * start measures the worker's wake-up (Session::MarkStarted) */
  bool woke_worker = false;
  /* kChunkBuffer: the chunk's first, and the input segment's epoch;
   * kChunkEnd: how many buffers it had */
  bool chunk_first = false;
  guint32 segment_epoch = 0;
  guint chunk_frames = 0;
  /* kEvent: its place in the item sequence (Session::MarkEventPosition):
   * it came before item `position`, after every item below it */
  guint64 position = 0;
  /* sent again after its first lane failed (lane_enqueue_replay) */
  bool replayed = false;

  QueuedItem () = default;
  QueuedItem (GstMiniObject * o, guint64 s, ItemKind k)
      : obj (o), seq (s), kind (k)
  {
  }
  QueuedItem (QueuedItem && other) noexcept
      : obj (other.obj), seq (other.seq), kind (other.kind),
        awaited (other.awaited), caps_epoch (other.caps_epoch),
        woke_worker (other.woke_worker), chunk_first (other.chunk_first),
        segment_epoch (other.segment_epoch), chunk_frames (other.chunk_frames),
        position (other.position), replayed (other.replayed)
  {
    other.obj = nullptr;
  }
  QueuedItem & operator= (QueuedItem && other) noexcept
  {
    if (this != &other) {
      if (obj)
        gst_mini_object_unref (obj);
      obj = other.Steal ();
      seq = other.seq;
      kind = other.kind;
      awaited = other.awaited;
      caps_epoch = other.caps_epoch;
      woke_worker = other.woke_worker;
      chunk_first = other.chunk_first;
      segment_epoch = other.segment_epoch;
      chunk_frames = other.chunk_frames;
      position = other.position;
      replayed = other.replayed;
    }
    return *this;
  }
  QueuedItem (const QueuedItem &) = delete;
  QueuedItem & operator= (const QueuedItem &) = delete;
  ~QueuedItem ()
  {
    if (obj)
      gst_mini_object_unref (obj);
  }
  GstMiniObject * Steal ()
  {
    GstMiniObject * o = obj;
    obj = nullptr;
    return o;
  }
};

class Dispatcher;

struct Lane {
  Lane (GstGpuFanOut * e, GstPad * p, guint i)
      : element (e), pad (GST_PAD (gst_object_ref (p))), id (i)
  {
  }

  GstGpuFanOut * const element; /* not reffed: the element owns the lane */
  GstPad * const pad;
  const guint id;

  /* The lane's state, one lock for all of it (as gstqueue.c's qlock): the
   * chain function, the worker, the pad functions and flushes change it
   * through the lane_* functions of gstgpufanout-lane.cpp, which notify
   * `cond` and tell the Session whether the lane takes items. */
  gpufan::Mutex lock;
  gpufan::CondVar cond;
  LaneState state = LaneState::kInactive;
  /* The branch's last push result, sticky until a link, a flush or a new
   * start resets it (queue's srcresult without the flushing part, which is
   * `state`). */
  GstFlowReturn result = GST_FLOW_OK;
  /* Its branch failed and on-lane-error took it out of service until the
   * next start (its fatal result then no longer stops the stream). */
  bool failed = false;
  std::deque<QueuedItem> queue; /* bounded by the Session's lane queue size */
  bool busy = false;            /* the worker is handling an item */
  /* Several input streams: the lane_order (Session) of the next item to
   * queue, and how many threads wait for their turn (lane_enqueue_in_turn) */
  guint64 next_order = 0;
  guint order_waiters = 0;
  bool eos_pushed = false;
  /* Who waits on `cond`: notify only when someone does (a notify per item
   * costs a futex call). */
  bool worker_waiting = false;
  guint drain_waiters = 0;
  /* chunk mode: the chain function waits for room in the queue */
  bool producer_waiting = false;
  /* The Session stalled the lane (see lane_note_stalled): its worker sends
   * a marker every stall-timeout while idle, and a drain does not wait for
   * it. Cleared when the Session no longer says so. */
  bool stalled = false;
  /* Chunk mode, written under chunk_move_lock and `lock`: the chain
   * function's open chunk is queued here (its end is not yet), so the
   * queue's end is no chunk boundary; this stalled lane holds chunks that
   * have not begun and wait for the chain function to move them (no other
   * lane had a boundary when it stalled), and its worker begins none. */
  bool chunk_open = false;
  bool chunk_moves_pending = false;
  /* stalled with the open chunk not begun: the chain function found no
   * other lane for it, and the worker may begin it */
  bool open_chunk_stays = false;
  /* failed: the lane the open chunk went to (chunk_move_off_failed), for
   * the chain function to follow; G_MAXUINT when none */
  guint open_chunk_moved_to = G_MAXUINT;
  /* Counts links: a NOT_LINKED from a push that began before the latest
   * link is stale. */
  guint link_generation = 0;
  /* The stream's FLUSH_START went into this lane (it had not failed): its
   * FLUSH_STOP goes there too, even if it failed meanwhile, or gpufanin's
   * pad would stay flushing. */
  bool flush_started = false;
  /* The latest place among the serialized events the worker took (their
   * position): an item sent again from a failed lane must precede what
   * came after it, so only a lane that has not passed it may take it. */
  guint64 events_taken_through = 0;
  /* The last item the worker pushed, and when an idle stalled lane next
   * sends a marker to see whether its branch answers again. */
  guint64 last_seq = 0;
  std::chrono::steady_clock::time_point next_liveness;
  /* The worker's own (no lock): a push whose end the Session has not been
   * told yet. The worker tells it with the next item's start, under one
   * Session lock, when that item is already queued; otherwise before it
   * waits or handles anything else (report_push). A report left when the
   * task was paused (flush, deactivation) goes out at its next start, for an
   * item the Session has forgotten by then: seqs are never reused. */
  struct {
    bool pending = false;
    guint64 seq = 0;
    gpufan::PushOutcome outcome = gpufan::PushOutcome::kDelivered;
  } unreported_push;

  /* The worker's own (no lock), chunk mode: the chunk it is pushing, whether
   * the Session still tracks it (else its buffers are dropped unpushed), and
   * how its pushes went. */
  struct {
    guint64 seq = 0;
    bool started = false;
    bool delivered = false; /* some push returned OK */
    bool failed = false;    /* a push returned a fatal error */
    gint64 started_ns = 0;  /* its first push began (the trace's span) */
  } chunk;

  /* Whether the pad is linked. Atomic, not under `lock`: the unlink
   * function runs with pad locks held, and starting a task takes a pad lock
   * with `lock` held. */
  std::atomic<bool> linked{ false };
  /* Ask the branch whether a gpufanin is at its end before the next item
   * (the pairing probe's, not the lane's state). */
  std::atomic<bool> needs_probe{ true };

  /* Where the lane runs (under the element's lanes_lock). Placed once per
   * NULL->READY cycle, or earlier when a branch asks for its CUDA context,
   * and kept: a branch that bound to a GPU must not see its lane move. */
  bool placed = false;
  gpufan::Device device;

  /* The host pool of the device's NUMA node and whether frames are copied
   * into it before they enter the branch. Under staging_lock, a leaf lock
   * never held across a call into GStreamer: ALLOCATION queries read these
   * from any thread. (The statistics read the pool through the Session's
   * LaneInfo.) */
  gpufan::Mutex staging_lock;
  GstAllocator * allocator = nullptr;
  gpufan::StagingPlan staging; /* gpufan::PlanStaging's, at placement */
  /* staging.stage, also read without staging_lock: spares a lock per item
   * when the lane does not stage */
  std::atomic<bool> stages{ false };
  /* The lane's first frame in CUDA memory was checked for the context it
   * is in (note_frame_context); again after the next placement. */
  std::atomic<bool> context_checked{ false };
  /* The lane's GPU as placed, -1 for a CPU lane: read by its thread
   * without lanes_lock. */
  std::atomic<int> gpu{ -1 };
  /* Frames in CUDA memory of another GPU are copied to the lane's GPU by
   * this (move_to_lane_gpu; the lane's thread only). */
  std::unique_ptr<GstGpuFanGpuMove> gpu_move;
  bool gpu_copy_warned = false;
  /* Where its threads' time goes (the Session's timer of the lane, taken
   * when the lane is added): the worker adds its pushes, idle waits and
   * chunk settles. */
  std::shared_ptr<gpufan::LaneTimer> timer;

  ~Lane ()
  {
    gst_object_unref (pad);
    if (allocator)
      gst_object_unref (allocator);
  }
};

using LanePtr = std::shared_ptr<Lane>;

/* One input stream of several: a sink_%u pad (gstgpufanout-streams.cpp).
 * Under GstGpuFanOutPrivate::streams_lock. */
struct StreamInput {
  guint index = 0;          /* sink_<index> */
  guint32 stream = 0;       /* its id in the Session */
  GstCaps * caps = nullptr; /* its current caps */
  bool ended = false;       /* EOS came (until a flush or a new start) */

  StreamInput () = default;
  StreamInput (const StreamInput &) = delete;
  StreamInput & operator= (const StreamInput &) = delete;
  ~StreamInput () { gst_clear_caps (&caps); }
};

/* An item a failed lane handed over before the chain function kept it:
 * the chain function sends it on (or gives it up) once it decides. */
struct ReplayOrphan {
  guint lane = 0; /* the lane that failed */
  gpufan::ReplayItem item;
};

/* What the fan-out keeps of a dispatched item to send it again. */
struct ReplayCopy {
  guint64 seq = 0;
  GstMiniObject * obj = nullptr; /* a reference */
  ItemKind kind = ItemKind::kBuffer;
  guint32 caps_epoch = 0;
  gint64 pts = -1;
};

} // namespace fanout

struct GstGpuFanOutPrivate {
  /* holds policy, queue-size and max-in-flight (thread-safe) */
  std::shared_ptr<gpufan::Session> session = gpufan::Session::Create (
      gpufan::SessionConfig{ fanout::policy_from_enum (DEFAULT_POLICY),
          DEFAULT_QUEUE_SIZE, DEFAULT_MAX_IN_FLIGHT });

  /* Property values (gstgpufanout-settings.h), under settings_lock; the
   * streaming side's copy of them, taken at READY->PAUSED. */
  gpufan::Mutex settings_lock;
  fanout::Settings settings;
  fanout::StreamingSettings streaming;
  /* Settings documented as changeable while PLAYING and read where they
   * act (each buffer, a lane's failure or stall): atomics, so that a change
   * counts from the next buffer or failure without a lock there. */
  std::atomic<guint> stats_interval_ms{ DEFAULT_STATS_INTERVAL };
  std::atomic<gint> on_lane_error{ DEFAULT_ON_LANE_ERROR };
  std::atomic<gint> on_stall{ DEFAULT_ON_STALL };
  /* The single sink pad's way to the lanes (gstgpufanout-dispatcher.h):
   * chosen from `streaming` at READY->PAUSED, when no buffer flows;
   * streaming thread only. */
  std::unique_ptr<fanout::Dispatcher> dispatcher;
  /* the stream's caps are in system memory (no caps features but
   * memory:SystemMemory): only then is staging or a host pool of use */
  std::atomic<bool> host_memory_caps{ true };
  /* the "No GPU" warning was posted since the last READY->NULL */
  std::atomic<bool> no_gpu_warned{ false };
  /* some lane's needs_probe is set: saves looking at every lane per buffer */
  std::atomic<bool> probe_pending{ true };
  /* While a lane is joining (its branch may not reach the fan-in yet), its
   * branch is probed again every so many dispatches, doubling up to
   * kMaxJoiningProbeInterval; a link resets it. Streaming thread only. */
  guint joining_probe_interval = 1;
  guint dispatches_since_joining_probe = 0;
  std::atomic<bool> reset_joining_probe{ false };

  gpufan::Mutex lanes_lock;
  std::map<guint, fanout::LanePtr> lanes;
  /* The device the next new lane gets instead of its placement
   * (request_lane_like; under lanes_lock). */
  std::optional<gpufan::Device> next_lane_device;

  /* Some lane's result changed, or a lane came or went: the chain function
   * combines the results again (combined_result is its cache, streaming
   * thread only). */
  std::atomic<bool> lane_results_changed{ true };
  GstFlowReturn combined_result = GST_FLOW_NOT_LINKED;

  /* Chunk mode: whoever moves chunks off a stalled lane (the stall
   * listener, the chain function) holds it, so that the one place where two
   * Lane::locks nest (the stalled lane's, then its target's) has one thread
   * at a time; and some stalled lane has chunk_moves_pending. */
  gpufan::Mutex chunk_move_lock;
  std::atomic<bool> chunk_moves_pending{ false };

  /* The chunk being filled (streaming thread only; reset by FLUSH_STOP and
   * READY->PAUSED, when no buffer flows). */
  struct {
    fanout::LanePtr lane; /* null: no chunk open */
    guint64 seq = 0;
    guint frames = 0;
    /* keyframes mode: the rest of a chunk whose lane stalled is dropped up
     * to the next keyframe (nothing decodes without it) */
    bool skip_to_keyframe = false;
    /* its lane stalled before it began, and no other lane took it */
    bool move_failed = false;
    /* keyframes mode: what a clean cut is for the caps of caps_epoch
     * cut_epoch (gstgpufanout-cut.cpp), and whether the "no clean cut"
     * warning was posted for them */
    fanout::CutRule cut;
    guint32 cut_epoch = G_MAXUINT32;
    bool no_cut_warned = false;
  } chunk;

  std::atomic<guint32> caps_epoch{ 0 };
  /* counts the input's segments (streaming thread only): chunk mode tells
   * the fan-in which chunks share one (see retime_chunk_item) */
  guint32 segment_epoch = 0;
  std::atomic<gint64> last_stats_post_ns{ 0 };
  std::atomic<bool> stats_posted{ false };
  std::atomic<bool> lane_error_posted{ false };

  /* What replay needs (gstgpufanout-replay.cpp), under replay_lock, a leaf
   * lock: a reference to each awaited item dispatched while replay is on,
   * oldest first, until it has left the fan-in's window; the last seq
   * kept; and the items a failed lane handed over before their reference
   * was kept (the chain function sends those again itself). */
  gpufan::Mutex replay_lock;
  std::deque<fanout::ReplayCopy> replay_copies;
  /* the latest seq the chain function kept or went without keeping, plus
   * one (0: none yet) */
  guint64 replay_decided_through = 0;
  std::vector<fanout::ReplayOrphan> replay_orphans;
  /* the Session's release listener is set (replay_keep, once) */
  std::atomic<bool> replay_listening{ false };
  /* a lane failed with replay this run: the chain function tells whether
   * it kept each item even while replay is off (a switch) */
  std::atomic<bool> replay_orphans_possible{ false };

  /* Several input streams (sink_%u pads, gstgpufanout-streams.cpp): under
   * streams_lock, a leaf lock except that the lanes' events are queued
   * with it held (lanes_lock, then each Lane::lock, below it). It also
   * serializes the streams' threads where they do what one streaming
   * thread does alone with one input (prepare_dispatch, reprobes). */
  gpufan::Mutex streams_lock;
  std::map<guint, std::unique_ptr<fanout::StreamInput>> inputs;
  /* What the lanes got of the streams: one stream-start, the caps all
   * streams share, the first segment; and whether they ended (every
   * stream did). */
  bool lanes_stream_started = false;
  GstCaps * lanes_caps = nullptr;
  bool lanes_segment_sent = false;
  std::atomic<bool> lanes_ended{ false };
  /* data came on the single `sink` pad (then sink_%u pads are refused at
   * their first data, and the other way round) */
  std::atomic<bool> main_input_used{ false };
  std::atomic<bool> stream_inputs_used{ false };

  /* Upstream events come once per lane (gpufanin forwards to all its sink
   * pads): forward each seqnum once. */
  gpufan::Mutex upstream_lock;
  GstGpuFanSeqnumMemory upstream_seqnums;
};

struct _GstGpuFanOut {
  GstElement parent;
  GstPad * sinkpad;
  GstGpuFanOutPrivate * priv;
};

/* A sink_%u pad: one input stream of several. */
struct _GstGpuFanOutSinkPad {
  GstPad parent;
  GstGpuFanOut * fanout; /* not reffed: the element outlives its pads */
  guint index;           /* sink_<index> */
  /* its frames' way to the lanes (owned; set when the element makes it) */
  fanout::Dispatcher * dispatcher;
  /* under the object lock */
  gdouble weight;
  guint max_in_flight;
  gboolean leaky;
};

struct _GstGpuFanOutPad {
  GstPad parent;
  GstGpuFanOut * fanout; /* not reffed: the element outlives its pads */
  guint lane;
  gdouble weight; /* under the object lock */
  gint device;    /* GPU ordinal, -1: from the element; under the object lock */
  /* Threads for the lane's task, bound to the device's CPUs (or nullptr:
   * GStreamer's default pool). Under the object lock: read when the task is
   * created, with the lane lock held. */
  GstGpuFanTaskPool * task_pool;
};

enum {
  PROP_PAD_0,
  PROP_PAD_WEIGHT,
  PROP_PAD_LANE,
  PROP_PAD_DEVICE,
};

enum {
  PROP_SINK_PAD_0,
  PROP_SINK_PAD_WEIGHT,
  PROP_SINK_PAD_MAX_IN_FLIGHT,
  PROP_SINK_PAD_LEAKY,
};

namespace fanout {

/* The Session's clock: what the lanes' times (Lane::timer) are taken on. */
inline gint64
session_now (GstGpuFanOut * self)
{
  return self->priv->session->clock ().NowNs ();
}

/* The lane: its queue, worker thread, flush, results and EOS (gstgpufanout-lane.cpp) */
LanePtr find_lane (GstGpuFanOut * self, guint id);
std::vector<LanePtr> snapshot_lanes (GstGpuFanOut * self);
/* The lane's transitions: each under the lane lock, each telling the
 * Session whether the lane takes items. */
gboolean lane_enqueue (const LanePtr & lane, QueuedItem && item);
/* lane_enqueue for one of several streams' threads: after every item
 * dispatched to the lane before it (@order: Dispatch::lane_order), so that
 * the lane stays FIFO by seq. */
gboolean lane_enqueue_in_turn (const LanePtr & lane, QueuedItem && item,
    guint64 order);
gboolean lane_activate (GstGpuFanOut * self, const LanePtr & lane,
    bool start_task);
void lane_start_deferred_task (const LanePtr & lane);
void lane_stop (GstGpuFanOut * self, const LanePtr & lane, LaneState state);
void lane_restart (GstGpuFanOut * self, const LanePtr & lane);
void lane_reset_result (GstGpuFanOut * self, const LanePtr & lane, bool all);
void lane_set_linked (GstGpuFanOut * self, const LanePtr & lane, bool linked);
/* The Session stalled lane @id (its listener, called without its lock). */
void lane_note_stalled (GstGpuFanOut * self, guint id);
/* Every frame has left the fan-in after the input ended (the Session's drain
 * listener): lanes holding their EOS back let it go. */
void lanes_note_drained (GstGpuFanOut * self);
/* A lane came or went: the results are combined again. */
void lanes_changed (GstGpuFanOut * self);
GstFlowReturn combine_lane_results (GstGpuFanOut * self);
bool any_lane_inactive (GstGpuFanOut * self);
gboolean wait_lanes_drained (GstGpuFanOut * self);
gboolean drain_all_lanes (GstGpuFanOut * self, GstQuery * query);

/* Records the result of a push that began at @link_generation (lane.cpp). */
void lane_set_result (GstGpuFanOut * self, const LanePtr & lane,
    GstFlowReturn ret, guint link_generation);
/* Gives a buffer our GstGpuFanMeta, an event the item fields (lane.cpp). */
void tag_item (GstGpuFanOut * self, const LanePtr & lane, QueuedItem & item);
/* Tells the Session how the worker's last frame push ended (lane.cpp). */
void lane_report_push (GstGpuFanOut * self, const LanePtr & lane);
/* A branch element of lane @id posted an ERROR (gpufanbin saw it): with
 * on-lane-error drop-lane or replay the lane leaves as if its push had
 * failed. */
void fail_lane_on_error (GstGpuFanOut * self, guint id);

/* Replay (gstgpufanout-replay.cpp) */
/* on-lane-error=replay or on-stall=replay, outside chunk mode */
bool replay_on (GstGpuFanOut * self);
/* The chain function keeps a reference to scheduled item @seq (a buffer
 * or GAP, awaited) while replay is on, or says it did not; either way it
 * settles the item if its lane failed meanwhile (an orphan). */
void replay_keep (GstGpuFanOut * self, guint64 seq, GstMiniObject * obj,
    ItemKind kind, guint32 caps_epoch, gint64 pts);
void replay_not_kept (GstGpuFanOut * self, guint64 seq);
/* Frame dispatch's hooks: the Session dispatched @item (@d), about to be
 * queued, kept or not as above; whether the lane refused it because it
 * failed and replay handed the item over (it goes again without us). */
void replay_note_dispatched (GstGpuFanOut * self, const gpufan::Dispatch & d,
    const QueuedItem & item, gint64 pts);
bool replay_took_over (GstGpuFanOut * self, const gpufan::Dispatch & d);
/* Items up to @released_through left gpufanin: their references go (the
 * Session's release listener). */
void replay_release (GstGpuFanOut * self, guint64 released_through);
/* Forgets every kept item (a flush, a new start). */
void replay_forget (GstGpuFanOut * self);
/* Lane @id failed: its items go to the other lanes. Returns how many did
 * (@lost: how many could not). */
guint replay_lane (GstGpuFanOut * self, guint id, guint * lost);
/* Queues replayed item @seq on @lane as early as it may go: behind the
 * serialized events that came before it and the replayed items older than
 * it, ahead of the lane's own items (the window waits for the oldest) and
 * of the events that came after it (lane.cpp); FALSE: the lane passed one
 * of those, or does not run. */
gboolean lane_enqueue_replay (const LanePtr & lane, QueuedItem && item);
/* Its branch failed and it is out of service (lane.cpp). */
bool lane_failed (const LanePtr & lane);
/* Whether @lane may take replayed item @seq (lane.cpp). */
bool lane_takes_replay (const LanePtr & lane, guint64 seq);

/* Chunk mode (gstgpufanout-chunk.cpp) */
bool chunk_mode_on (GstGpuFanOut * self);
/* Where keyframes mode may cut (gstgpufanout-cut.cpp): H.264/H.265 in
 * access units at IDR pictures only (found by scanning the buffer), other
 * caps at buffers without DELTA_UNIT. */
CutRule cut_rule_from_caps (GstCaps * caps);
bool is_clean_cut (const CutRule & rule, GstBuffer * buffer);
/* Ends the open chunk (a caps or segment change, EOS): its lane drains. */
void chunk_close (GstGpuFanOut * self);
/* Forgets the open chunk (a flush dropped it). */
void chunk_forget (GstGpuFanOut * self);
/* The stall listener in chunk mode: marks the lane stalled, and its chunks
 * that have not begun go to other lanes whole. */
void chunk_move_off_stalled (GstGpuFanOut * self, const LanePtr & lane);
/* A lane that failed: its whole chunks that have not begun go to other
 * lanes (those that only a lane with the open chunk could take are lost). */
void chunk_move_off_failed (GstGpuFanOut * self, const LanePtr & lane);
/* The chain function: moves left to it (its open chunk was in the way);
 * its open chunk @seq, not begun on stalled lane @from, to another lane
 * (which it returns, null when none takes it); whether @lane has its open
 * chunk. */
void chunk_run_pending_moves (GstGpuFanOut * self);
LanePtr chunk_move_open (GstGpuFanOut * self, const LanePtr & from,
    guint64 seq);
void chunk_set_open (GstGpuFanOut * self, const LanePtr & lane, bool open);
/* Queues the open chunk's @end on @lane, or on the lane the chunk moved to
 * (then @lane becomes that one): the chunk is closed. */
void chunk_queue_end (GstGpuFanOut * self, LanePtr & lane, QueuedItem && end);
/* The worker is not to begin the chunk at its queue's front: it may move
 * (call with the lane lock held). */
bool chunk_begin_held_unlocked (GstGpuFanOut * self, const LanePtr & lane);
bool lane_takes_replay_unlocked (const LanePtr & lane, guint64 seq);
/* The Session stalled the lane (lane_note_stalled); with its lock held. */
void lane_mark_stalled_unlocked (GstGpuFanOut * self, const LanePtr & lane);
/* The worker's part: a kChunkBuffer or kChunkEnd item. */
void chunk_push_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item, GstFlowReturn result, guint link_generation);

/* The sink pad: buffers and events into the lanes (gstgpufanout-dispatch.cpp) */
/* Before a dispatch: the lanes' combined result (not OK: no lane can take
 * it), and the pairing probes due. */
GstFlowReturn prepare_dispatch (GstGpuFanOut * self);
/* The GPU whose memory @obj's frame is in (for adaptive's choice); -1 for
 * an event, a frame in host memory, or caps in system memory. */
gint origin_gpu_of (GstGpuFanOut * self, GstMiniObject * obj);
/* A buffer's PTS, a GAP event's timestamp (gpufan::kNoTime: none). */
gint64 item_pts (GstMiniObject * obj);
/* Sets the sink pad functions. */
void install_sink_pad_functions (GstPad * pad);
/* The sink pad's query function (sink_%u pads use it too). */
gboolean sink_query (GstPad * pad, GstObject * parent, GstQuery * query);

/* The src pad: one per lane (gstgpufanout-pad.cpp) */
/* Sets the src pad functions of a new lane pad. */
void install_src_pad_functions (GstPad * pad);

/* The pairing probe: which gpufanin claims a lane (gstgpufanout-pairing.cpp) */
void request_probe (GstGpuFanOut * self, const LanePtr & lane);
void reprobe_joining_lanes (GstGpuFanOut * self);
/* FALSE once a claimed lane's branch cannot run on its GPU (posted). */
gboolean probe_lanes (GstGpuFanOut * self);
gboolean forward_pair_query_downstream (GstGpuFanOut * self, GstQuery * query);

/* Device placement and staging (gstgpufanout-placement.cpp) */
gboolean place_lane (GstGpuFanOut * self, const LanePtr & lane,
    std::string * error);
void unplace_lane (GstGpuFanOut * self, guint id);
void forget_placements (GstGpuFanOut * self);
void unplace_all_lanes (GstGpuFanOut * self);
gboolean place_all_lanes (GstGpuFanOut * self);
/* Binds the elements of the lane's branch (up to gpufanin) to the lane's
 * GPU (gstgpufanbinding.h): warnings posted; FALSE, with an ERROR posted,
 * when one is fixed to another GPU. @peer: the pad the lane's pad is being
 * linked to (from its link function). */
gboolean bind_lane_branch (GstGpuFanOut * self, const LanePtr & lane,
    GstPad * peer = nullptr);
void stage_item (const LanePtr & lane, QueuedItem & item);
gboolean answer_cuda_context_query (GstGpuFanOut * self, GstPad * pad,
    GstQuery * query);
/* An upstream element (a decoder) asks for a CUDA context: it gets the
 * lanes' context of its GPU, so that its frames reach the lanes on that GPU
 * in one context. FALSE when there is nothing to give (no CUDA element
 * upstream, no GPU lane for one that takes any GPU, no gstreamer-cuda). */
gboolean answer_upstream_cuda_context_query (GstGpuFanOut * self, GstPad * sink,
    GstQuery * query);
void set_device_setting (GstGpuFanOut * self, guint prop_id,
    const GValue * value);
/* A new src pad (a lane) on the device of lane @like, which failed (a GPU
 * excluded since: an eligible one, as devices=auto would place it), even
 * where `devices` lists fewer lanes; nullptr if it cannot be made. For
 * gpufanbin's rebuilt lanes. */
GstPad * request_lane_like (GstGpuFanOut * self, guint like);

/* Allocation aggregation (gstgpufanout-allocation.cpp) */
gboolean caps_in_host_memory (GstCaps * caps);
gboolean aggregate_allocation (GstGpuFanOut * self, GstQuery * query);

/* Several input streams (gstgpufanout-streams.cpp) */
/* The Session's id of sink_%u pad @pad's stream (gstgpufanout-sinkpad.cpp) */
guint32 stream_of (GstGpuFanOutSinkPad * pad);
GstPad * stream_request_pad (GstGpuFanOut * self, GstPadTemplate * templ,
    const gchar * name);
void stream_release_pad (GstGpuFanOut * self, GstPad * pad);
/* An upstream event from lane pad @src's branch, once: to sink_k's
 * upstream when gpufanin's src_k sent it (@stream k + 1), else to the
 * single sink pad's. Takes @event. */
gboolean forward_upstream_event (GstGpuFanOut * self, GstPad * src,
    GstEvent * event, guint stream);
/* PAUSED->READY: every stream starts again. */
void streams_reset (GstGpuFanOut * self);
/* Data on the single sink pad: FALSE (an error posted) when sink_%u pads
 * carry streams (one relaxed load once allowed). */
gboolean main_input_allowed (GstGpuFanOut * self);
/* Serialized event @event into every lane, at its place among the items
 * (gstgpufanout-dispatch.cpp). Takes @event. */
void enqueue_event_on_all_lanes_positioned (GstGpuFanOut * self,
    GstEvent * event);

/* Properties (gstgpufanout-properties.cpp) */
void install_properties (GObjectClass * gobject_class);
/* READY->PAUSED: the streaming side's copy of the settings, and the sink
 * pad's dispatcher for the mode they set. */
void take_settings_snapshot (GstGpuFanOut * self);

/* Statistics (gstgpufanout-stats.cpp) */
void maybe_post_interval_stats (GstGpuFanOut * self);
void on_lane_eos (GstGpuFanOut * self);

} // namespace fanout

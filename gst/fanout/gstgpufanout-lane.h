/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A lane of gpufanout: its items, its one state machine, the interface of
 * its worker's item handlers, and the lane functions (gstgpufanout-lane*.cpp).
 * Its lock's place in the element's lock order: gstgpufanout-private.h. */
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "common/gstgpufangpumove.h"
#include "gpufan/device.h"
#include "gpufan/lane-time.h"
#include "gpufan/mutex.h"
#include "gpufan/fanout-port.h"
#include "gpufan/staging.h"
#include "gstgpufanout.h"

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

/* Where a lane is in its life: one value under Lane::lock. The transitions
 * and who causes them: transition_unlocked and docs/lane-states.md. */
enum class LaneState {
  kInactive, /* its pad is not active: not yet activated, deactivated, or
              * being released */
  kJoining,  /* its pad is active; its worker starts once the pad is added
              * (request_new_pad): it queues items already */
  kRunning,  /* takes items, and its worker pushes them */
  kStalled,  /* the Session gave up its items (stall-timeout): it still takes
              * items, its idle worker sends liveness markers, and a drain
              * does not wait for it */
  kFailed,   /* its branch failed and on-lane-error (or on-stall=replay) took
              * it out of service until the next start: no scheduled items,
              * no flush, its fatal result no longer stops the stream */
  kFlushing, /* between the stream's FLUSH_START and FLUSH_STOP */
};

/* What moves a lane (the rows of docs/lane-states.md). */
enum class LaneEvent {
  kActivate,         /* its pad was activated, the worker started */
  kActivateDeferred, /* its pad was activated, the worker waits for the pad */
  kTaskStarted,      /* the worker left to request_new_pad started */
  kDeactivate,       /* its pad was deactivated or released, or its task
                      * could not start */
  kFlushStart,
  kFlushStop,
  kStalled,  /* the Session's health listener: stalled */
  kCameBack, /* the Session no longer says it is stalled */
  kFailed,   /* its branch failed (a push, an ERROR, a stall with replay) */
  kNewStart, /* PAUSED->READY: a failed lane is in service again */
};
const gchar * lane_state_name (LaneState state);
const gchar * lane_event_name (LaneEvent event);

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
  /* a scheduled item's input stream (its sink_%u pad's, see
   * lanes_withdraw_stream) */
  guint32 stream = 0;
  /* kChunkBuffer, a chunk's first, with several input streams: its
   * stream's caps and segment, which the lane sends before the chunk where
   * its branch has others (owned; null with one input) */
  GstEvent * chunk_caps = nullptr;
  GstEvent * chunk_segment = nullptr;

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
        position (other.position), replayed (other.replayed),
        stream (other.stream), chunk_caps (other.chunk_caps),
        chunk_segment (other.chunk_segment)
  {
    other.obj = nullptr;
    other.chunk_caps = nullptr;
    other.chunk_segment = nullptr;
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
      stream = other.stream;
      gst_clear_event (&chunk_caps);
      gst_clear_event (&chunk_segment);
      chunk_caps = other.chunk_caps;
      chunk_segment = other.chunk_segment;
      other.chunk_caps = nullptr;
      other.chunk_segment = nullptr;
    }
    return *this;
  }
  QueuedItem (const QueuedItem &) = delete;
  QueuedItem & operator= (const QueuedItem &) = delete;
  ~QueuedItem ()
  {
    if (obj)
      gst_mini_object_unref (obj);
    gst_clear_event (&chunk_caps);
    gst_clear_event (&chunk_segment);
  }
  GstMiniObject * Steal ()
  {
    GstMiniObject * o = obj;
    obj = nullptr;
    return o;
  }
};

class Lane;
using LanePtr = std::shared_ptr<Lane>;

/* What a lane's worker does with the items of the element's mode (frames,
 * chunks), chosen once when the lane is activated: the core worker loop
 * knows no mode. One indirect call per item; no lock of its own. */
class LaneItemHandler {
public:
  virtual ~LaneItemHandler () = default;
  /* With the lane lock held: the worker stays idle with the queue's front
   * where it is (an EOS held back while frames may still be replayed). */
  virtual bool waits_before_front_unlocked (GstGpuFanOut * self,
      const LanePtr & lane) const = 0;
  /* With the lane lock held: the front may still move to another lane; the
   * worker waits for the lane to change. */
  virtual bool holds_front_unlocked (GstGpuFanOut * self,
      const LanePtr & lane) const = 0;
  /* The worker's part for @item, taken out of the queue; @result and
   * @link_generation: the lane's when it was taken. */
  virtual void handle (GstGpuFanOut * self, const LanePtr & lane,
      QueuedItem & item, GstFlowReturn result,
      guint link_generation) const = 0;
  /* The Session stalled the lane (called without the lane lock). */
  virtual void on_stalled (GstGpuFanOut * self, const LanePtr & lane) const = 0;
  /* The lane failed and its frames are not sent again (without the lane
   * lock, before the Session gives them up). */
  virtual void on_failed_without_replay (GstGpuFanOut * self,
      const LanePtr & lane) const = 0;
};

/* The handlers (gstgpufanout-lane-frames.cpp,
 * gstgpufanout-chunk-worker.cpp), and
 * the one choice between them, made when a lane is activated. */
const LaneItemHandler & frame_item_handler ();
const LaneItemHandler & chunk_item_handler ();
const LaneItemHandler & lane_item_handler_for (GstGpuFanOut * self);
/* The lane's handler (the frame handler before its first activation). */
const LaneItemHandler & lane_handler (const LanePtr & lane);
/* Pushes serialized event @item into the branch (either mode). */
void push_lane_event (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item);

class Lane {
public:
  Lane (GstGpuFanOut * e, GstPad * p, guint i)
      : element (e), pad (GST_PAD (gst_object_ref (p))), id (i)
  {
  }
  Lane (const Lane &) = delete;
  Lane & operator= (const Lane &) = delete;

  /* The lane's one state; read and changed with `lock` held. */
  LaneState state_unlocked () const { return state_; }
  /* Moves the lane as the transition table says (gstgpufanout-lane.cpp,
   * docs/lane-states.md), logging each move; TRUE when the state changed.
   * An event the table does not take in the current state leaves it. */
  bool transition_unlocked (LaneEvent event);
  /* Its pad is active and its worker takes what is queued (Joining,
   * Running, Stalled, Failed). */
  bool accepts_items_unlocked () const
  {
    return state_ != LaneState::kInactive && state_ != LaneState::kFlushing;
  }
  bool stalled_unlocked () const { return state_ == LaneState::kStalled; }
  bool failed_unlocked () const { return state_ == LaneState::kFailed; }

  GstGpuFanOut * const element; /* not reffed: the element owns the lane */
  GstPad * const pad;
  const guint id;

  /* The lane's state, one lock for all of it (as gstqueue.c's qlock): the
   * chain function, the worker, the pad functions, flushes and the Session's
   * health listener change it through the lane_* functions of
   * gstgpufanout-lane*.cpp, which notify `cond` and tell the Session whether
   * the lane takes items. */
  gpufan::Mutex lock;
  gpufan::CondVar cond;
  /* The branch's last push result, sticky until a link, a flush or a new
   * start resets it (queue's srcresult without the flushing part, which is
   * `state`). */
  GstFlowReturn result = GST_FLOW_OK;
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
  /* the open chunk's seq (with chunk_open) */
  guint64 open_chunk_seq = 0;
  /* Chunk mode, replay: whole chunks sent again to this lane while the
   * chain function's open chunk, begun here, leaves its queue without a
   * chunk boundary; they go in once that chunk's end is queued
   * (chunk_replay_place_held_unlocked). */
  std::deque<QueuedItem> replay_held;
  /* Chunk mode: lane_fail has dealt with the lane's chunks (sent again or
   * moved): the chain function waits for it before it follows its open
   * chunk to another lane. */
  bool fail_handled = false;
  /* Counts links: a NOT_LINKED from a push that began before the latest
   * link is stale. */
  guint link_generation = 0;
  /* The stream's FLUSH_START went into this lane (it had not failed): its
   * FLUSH_STOP goes there too, even if it failed meanwhile, or gpufanin's
   * pad would stay flushing. */
  bool flush_started = false;
  /* The latest place among the serialized events the worker took (their
   * position): an item sent again from a failed lane must precede what
   * came after it, so only a lane that has not passed it may take it
   * (metadata does not count: event_orders_replay). */
  guint64 events_taken_through = 0;
  /* The last item the worker pushed (an idle stalled lane's markers follow
   * it; the Session says when one is due: CheckLivenessMarker). */
  guint64 last_seq = 0;
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
  /* Its branch said (in the pairing probe) that a reset cannot overtake a
   * drain: chunk mode resets it without waiting for the fan-in. */
  std::atomic<bool> serial_reset{ false };

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
  /* What the worker does with the items of the element's mode, chosen when
   * the lane is activated (lane_item_handler_for); read without `lock`. */
  std::atomic<const LaneItemHandler *> handler{ nullptr };

  ~Lane ()
  {
    gst_object_unref (pad);
    if (allocator)
      gst_object_unref (allocator);
  }

private:
  LaneState state_ = LaneState::kInactive;
};

/* The lane: its queue, worker thread, flush, results and EOS (gstgpufanout-lane.cpp; its
 * worker gstgpufanout-lane-worker.cpp, its failures and results
 * gstgpufanout-lane-failure.cpp) */
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
/* The Session's health listener (called without its lock): it stalled
 * lane @id, or failed it (on-stall=replay). */
void lane_note_health (GstGpuFanOut * self, guint id);
/* Every frame has left the fan-in after the input ended (the Session's drain
 * listener): lanes holding their EOS back let it go. */
void lanes_note_drained (GstGpuFanOut * self);
/* A lane came or went: the results are combined again. */
void lanes_changed (GstGpuFanOut * self);
GstFlowReturn combine_lane_results (GstGpuFanOut * self);
bool any_lane_inactive (GstGpuFanOut * self);
gboolean wait_lanes_drained (GstGpuFanOut * self);
gboolean drain_all_lanes (GstGpuFanOut * self, GstQuery * query);

/* Records the result of a push that began at @link_generation
 * (lane-failure.cpp). */
void lane_set_result (GstGpuFanOut * self, const LanePtr & lane,
    GstFlowReturn ret, guint link_generation);
/* Gives a buffer our GstGpuFanMeta, an event the item fields
 * (lane-frames.cpp). */
void tag_item (GstGpuFanOut * self, const LanePtr & lane, QueuedItem & item);
/* Tells the Session how the worker's last frame push ended
 * (lane-worker.cpp). */
void lane_report_push (GstGpuFanOut * self, const LanePtr & lane);
/* A branch element of lane @id posted an ERROR (gpufanbin saw it): with
 * on-lane-error drop-lane or replay the lane leaves as if its push had
 * failed. */
void fail_lane_on_error (GstGpuFanOut * self, guint id);

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

/* The one place that says whether a lane takes items (Session eligible);
 * with its lock held. */
bool lane_takes_items_unlocked (const LanePtr & lane);
/* Every transition ends here, with the lane lock held: the Session learns
 * whether the lane takes items, the chain function combines the results
 * again, and whoever waits on the lane looks again. */
void lane_changed_unlocked (GstGpuFanOut * self, const LanePtr & lane);
/* With replay on, the lane's next item is EOS and items may still be sent
 * again to it: its worker waits (lane-frames.cpp); with its lock held. */
bool lane_eos_held_unlocked (GstGpuFanOut * self, const LanePtr & lane);
/* Whether a lane that passed serialized event @obj may no longer take an
 * item sent again from before it. Metadata (TAG, TOC: h264parse sends
 * bitrate tags all along) changes nothing a frame or chunk is made of, and
 * gpufanin places the event by its position whatever lane brings it, so a
 * lane past one still takes what came before it (lane.cpp). */
bool event_orders_replay (GstMiniObject * obj);
/* Whether @lane may take replayed item @seq, with its lock held. */
bool lane_takes_replay_unlocked (const LanePtr & lane, guint64 seq);
/* The Session stalled the lane (lane_note_health); with its lock held. */
void lane_mark_stalled_unlocked (const LanePtr & lane);
/* A push's return as the Session counts it (lane-worker.cpp). */
gpufan::PushOutcome outcome_of (GstFlowReturn ret);
/* The worker: the Session learns how the push of @seq ended with the next
 * item's start or in its next iteration (lane-worker.cpp). */
void note_push (const LanePtr & lane, guint64 seq,
    gpufan::PushOutcome outcome);
/* The worker takes @item out of its queue (Session::MarkStarted); FALSE:
 * it is no longer awaited (lane-worker.cpp). */
bool start_item (GstGpuFanOut * self, const LanePtr & lane,
    const QueuedItem & item);
/* Pushes a marker behind item @seq (lane-worker.cpp). */
void push_marker (GstGpuFanOut * self, const LanePtr & lane, guint64 seq);
/* Stores the sink pad's sticky events on @srcpad (lane.cpp). */
void copy_sticky_events (GstGpuFanOut * self, GstPad * srcpad,
    bool with_segment);
/* The lane's streaming thread (lane-worker.cpp). */
void lane_loop (gpointer user_data);

static inline bool
flow_is_fatal (GstFlowReturn ret)
{
  return ret < GST_FLOW_EOS;
}

} // namespace fanout

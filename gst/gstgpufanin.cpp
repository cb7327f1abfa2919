/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-gpufanin
 * @title: gpufanin
 * @see_also: gpufanout, funnel
 *
 * The other end of gpufanout: takes the branches' outputs on request pads
 * `sink_%u` and pushes them out of its single src pad in the order the
 * buffers entered the fan-out. It pairs with its fan-out through the
 * branches by itself (no name to set).
 *
 * A frame a branch drops does not stall the output: each lane is FIFO, so a
 * later buffer on the same lane, or the marker event gpufanout pushes behind
 * an item that had not come back when its push returned, proves the earlier
 * one gone, and EOS on a lane proves all its outstanding ones gone. A lane
 * that stops answering is waited for at most #GstGpuFanIn:stall-timeout,
 * then it is stalled: it gets no more items while another lane can take
 * them. Nothing is ever output out of order: what comes back too late is
 * dropped. Caps, segment and other events are sent downstream once. One EOS
 * goes out when every sink pad has EOS and everything before it has been
 * output, or at most #GstGpuFanIn:stall-timeout after gpufanout's input
 * ended and every item was accounted for, when a branch swallowed its EOS or
 * stalled (with a warning naming it); the `gpufan-stats` element message is
 * posted just before it. The latency it reports includes what reordering
 * adds (the time items spend in the lanes), and it posts a LATENCY message
 * when that grows.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=300 ! \
 *   gpufanout name=f policy=round-robin  gpufanin name=m ! fakesink \
 *   f.src_0 ! identity ! m.sink_0 \
 *   f.src_1 ! valve drop=true ! m.sink_1 \
 *   f.src_2 ! identity ! m.sink_2
 * ]| Lane 1 drops everything, EOS included: after one stall-timeout it is
 * stalled, the other lanes carry the rest, and the stream ends with every
 * frame of lanes 0 and 2, in order, and a warning naming sink_1.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m videotestsrc num-buffers=3000 ! \
 *   video/x-raw,width=320,height=240 ! \
 *   gpufanout name=f policy=adaptive  gpufanin name=m ! fakesink \
 *   f.src_0 ! identity sleep-time=2000 ! m.sink_0 \
 *   f.src_1 ! identity sleep-time=4000 ! m.sink_1 \
 *   f.src_2 ! identity sleep-time=8000 ! m.sink_2
 * ]| Three lanes of different speed; all 3000 frames reach fakesink in order.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gpufan/session.h"
#include "gstgpufanutils.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_in_debug);
#define GST_CAT_DEFAULT gst_gpufan_in_debug

/* Lock order: GstGpuFanInPrivate::output_lock, then GstGpuFanInPrivate::lock,
 * then the Session's lock (innermost). `lock` is never held across a push, a
 * peer query or a blocking Session call (WaitOutput); output_lock is held
 * across pushes downstream and nothing else. Output state (out_*) belongs to
 * whoever holds output_lock (the src pad's task, or a lane's streaming thread,
 * see output_from_lane), and to the flush handlers while no output runs. */

#define DEFAULT_STALL_TIMEOUT (2 * GST_SECOND)

static constexpr auto kIdleWaitSlice = std::chrono::milliseconds (100);
static constexpr gint64 kOutputWaitSliceNs = 100 * GST_MSECOND;

namespace {

/* A buffer or event on its way through the reorder window, with the sticky
 * events that were current on its sink pad when it arrived. */
struct FanInItem : public gpufan::Payload {
  GstMiniObject * obj = nullptr;
  GstEvent * stream_start = nullptr;
  GstEvent * caps = nullptr;
  GstEvent * segment = nullptr;
  guint lane = 0;
  guint32 caps_epoch = 0;
  bool has_caps_epoch = false;
  /* attachments (positioned events) only fill in missing sticky events */
  bool is_attachment = false;

  ~FanInItem () override
  {
    if (obj)
      gst_mini_object_unref (obj);
    gst_clear_event (&stream_start);
    gst_clear_event (&caps);
    gst_clear_event (&segment);
  }
};

struct PadState {
  guint index = 0; /* sink_<index> */
  std::shared_ptr<gpufan::Session> session;
  guint lane = 0;
  bool paired = false;
  bool eos = false;
  bool flushing = false;
  GstEvent * stream_start = nullptr;
  GstEvent * caps = nullptr;
  GstEvent * segment = nullptr;

  void ClearSticky ()
  {
    gst_clear_event (&stream_start);
    gst_clear_event (&caps);
    gst_clear_event (&segment);
  }
};

} // namespace

struct GstGpuFanInPrivate {
  std::mutex lock;
  std::condition_variable cond; /* wakes the task while it has no session */
  std::map<GstPad *, PadState> pads;
  std::shared_ptr<gpufan::Session> session;
  std::string fanout_name; /* of the session's gpufanout, for messages */
  bool flushing = true;    /* src inactive, or a flush in progress */
  bool eos_sent = false;
  GstGpuFanSeqnumMemory forwarded_seqnums; /* events sent once */
  std::atomic<guint64> stall_timeout{ DEFAULT_STALL_TIMEOUT };
  std::atomic<GstFlowReturn> src_ret{ GST_FLOW_OK };
  guint32 eos_seqnum = GST_SEQNUM_INVALID; /* of the last EOS that came in */
  /* downstream asked to renegotiate: lanes may change caps one by one */
  std::atomic<bool> reconfigure_requested{ false };

  /* Output state: what downstream has seen last. */
  GstEvent * out_stream_start = nullptr;
  GstCaps * out_caps = nullptr;
  guint32 out_caps_epoch = 0;
  bool out_has_caps_epoch = false;
  GstSegment out_segment;
  bool out_segment_valid = false;
  /* While downstream renegotiates, items of the epoch current then may come
   * with either caps: not an error. Ends with the first item of a newer
   * epoch. */
  bool renegotiating = false;
  guint32 renegotiating_epoch = 0;

  /* Output batches started / finished (under lock): items leave the window
   * when a batch starts and go downstream while it runs. */
  guint64 batches_started = 0;
  guint64 batches_done = 0;

  /* Output runs in one thread at a time, the holder of output_lock: the src
   * pad's task, or the streaming thread of a lane that just delivered an item
   * and finds the output free (as funnel pushes from its sink pads' threads).
   * That spares waking the task for every item. output_pending: an item came
   * while another thread held the output; the holder takes it too. */
  std::mutex output_lock;
  std::atomic<bool> output_pending{ false };
  /* A flow error stopped the output until the next flush or start. */
  std::atomic<bool> output_stopped{ false };
  /* What ordering adds to the latency grew: post a LATENCY message (after
   * letting go of output_lock). */
  std::atomic<bool> latency_post_pending{ false };
  /* The lanes said they are live (latency query). Then only the src task
   * pushes downstream: a sync=true sink holds the pushing thread until the
   * frame's time, and a lane thread held there would delay the lane's next
   * items by the latency, which would raise the measured latency, which
   * would hold it longer. */
  std::atomic<bool> live{ false };

  ~GstGpuFanInPrivate ()
  {
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

enum {
  PROP_0,
  PROP_STALL_TIMEOUT,
  PROP_STATS,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink_%u",
    GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

#define gst_gpufan_in_parent_class parent_class
G_DEFINE_TYPE (GstGpuFanIn, gst_gpufan_in, GST_TYPE_ELEMENT);

GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanin, "gpufanin", GST_RANK_NONE,
    GST_TYPE_GPUFAN_IN,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_in_debug, "gpufanin", 0,
        "gpufan fan-in"));

static void gst_gpufan_in_src_loop (gpointer user_data);

namespace {

/* An item (or a marker: see gst_gpufan_marker_new) that came out of a
 * lane, on its way into the window. */
struct PendingArrival {
  guint lane;
  std::optional<guint64> seq;
  gint64 pts;
  gpufan::PayloadPtr payload;
  bool marker = false; /* proves the lane's items up to seq */
};

} // namespace

static gpufan::Arrival output_from_lane (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session,
    PendingArrival && arrival);

/* ------------------------------------------------------------------------ */
/* Pairing */

static void
wake_output_unlocked (GstGpuFanIn * self)
{
  self->priv->cond.notify_all ();
  if (self->priv->session)
    self->priv->session->WakeOutput ();
}

/* Pairs @pad with lane @lane of @session, whose gpufanout is @fanout. FALSE
 * if this fan-in already belongs to another fan-out (@conflict then says
 * which two). */
static gboolean
pair_pad (GstGpuFanIn * self, GstPad * pad,
    const std::shared_ptr<gpufan::Session> & session, guint lane,
    const gchar * fanout, std::string * conflict = nullptr)
{
  GstGpuFanInPrivate * priv = self->priv;
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end ())
      return FALSE;
    if (priv->session && priv->session != session) {
      gchar * text = g_strdup_printf ("%s:%s is fed by gpufanout '%s', but "
                                      "the other sink pads by gpufanout '%s'",
          GST_OBJECT_NAME (self), GST_OBJECT_NAME (pad), fanout,
          priv->fanout_name.c_str ());
      GST_WARNING_OBJECT (pad, "%s", text);
      if (conflict)
        *conflict = text;
      g_free (text);
      return FALSE;
    }
    priv->session = session;
    priv->fanout_name = fanout;
    it->second.session = session;
    it->second.lane = lane;
    it->second.paired = true;
    session->SetStallTimeout ((gint64)priv->stall_timeout.load ());
    session->ClaimLane (lane);
    priv->cond.notify_all ();
  }
  GST_DEBUG_OBJECT (pad, "paired with lane %u of session %" G_GUINT64_FORMAT,
      lane, session->id ());
  return TRUE;
}

/* Asks upstream, through the branch, which fan-out lane feeds @pad. FALSE
 * if none does, or (@conflict set) if one that is not ours does. */
static gboolean
ensure_paired (GstGpuFanIn * self, GstPad * pad,
    std::string * conflict = nullptr)
{
  {
    std::lock_guard<std::mutex> lk (self->priv->lock);
    auto it = self->priv->pads.find (pad);
    if (it != self->priv->pads.end () && it->second.paired)
      return TRUE;
  }

  GstQuery * query = gst_gpufan_pair_query_new (nullptr, 0, nullptr);
  std::shared_ptr<gpufan::Session> session;
  guint lane = 0;
  gboolean ok = gst_pad_peer_query (pad, query)
      && gst_gpufan_pair_query_parse (query, &session, &lane);
  if (ok) {
    gchar * fanout = gst_gpufan_pair_query_get_fanout (query);
    ok = pair_pad (self, pad, session, lane, fanout, conflict);
    g_free (fanout);
  }
  gst_query_unref (query);
  return ok;
}

/* ------------------------------------------------------------------------ */
/* Sink pads */

static FanInItem *
new_item_unlocked (const PadState & state, GstMiniObject * obj)
{
  auto * item = new FanInItem ();
  item->obj = obj;
  item->lane = state.lane;
  if (state.stream_start)
    item->stream_start = gst_event_ref (state.stream_start);
  if (state.caps)
    item->caps = gst_event_ref (state.caps);
  if (state.segment)
    item->segment = gst_event_ref (state.segment);
  return item;
}

static GstFlowReturn
not_fed_by_fanout (GstGpuFanIn * self, GstPad * pad, GstMiniObject * obj,
    const std::string & conflict)
{
  gst_mini_object_unref (obj);
  if (!conflict.empty ())
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("%s", conflict.c_str ()),
        ("A gpufanin takes the lanes of one gpufanout: give each gpufanout "
         "its own gpufanin"));
  else
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("%s:%s is not fed by a gpufanout", GST_DEBUG_PAD_NAME (pad)),
        ("Every branch into gpufanin must start at a src pad of one and the "
         "same gpufanout"));
  return GST_FLOW_ERROR;
}

/* What identifies an item: the sequence number our fan-out gave it (from our
 * session's meta, or a GAP event's fields) and its caps epoch. */
struct ItemId {
  std::optional<guint64> seq;
  guint32 caps_epoch = 0;
  bool has_caps_epoch = false;
  gint64 pts = gpufan::kNoTime;
};

static ItemId
identify_item (GstMiniObject * obj, guint64 session_id)
{
  ItemId id;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (GST_BUFFER_PTS_IS_VALID (buffer))
      id.pts = (gint64)GST_BUFFER_PTS (buffer);
    if (GstGpuFanMeta * meta
        = gst_buffer_find_gpufan_meta (buffer, session_id)) {
      id.seq = meta->seq;
      id.caps_epoch = meta->caps_epoch;
      id.has_caps_epoch = true;
    }
    return id;
  }
  GstEvent * event = GST_EVENT_CAST (obj);
  GstClockTime ts;
  gst_event_parse_gap (event, &ts, nullptr);
  if (GST_CLOCK_TIME_IS_VALID (ts))
    id.pts = (gint64)ts;
  guint64 event_session = 0, seq = 0;
  if (gst_gpufan_event_get_item (event, &event_session, &seq)
      && event_session == session_id)
    id.seq = seq;
  return id;
}

/* A buffer or a GAP event came out of a lane: into the reorder window. */
static GstFlowReturn
handle_item (GstGpuFanIn * self, GstPad * pad, GstMiniObject * obj)
{
  GstGpuFanInPrivate * priv = self->priv;

  std::shared_ptr<gpufan::Session> session;
  guint lane = 0;
  FanInItem * item = nullptr;
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<std::mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end () || priv->flushing || it->second.flushing
          || (asked && !it->second.paired)) {
        gst_mini_object_unref (obj);
        return GST_FLOW_FLUSHING;
      }
      if (it->second.eos) {
        gst_mini_object_unref (obj);
        return GST_FLOW_EOS;
      }
      if (it->second.paired) {
        session = it->second.session;
        lane = it->second.lane;
        item = new_item_unlocked (it->second, obj);
        break;
      }
    }
    /* not paired yet: ask upstream, then look again (once) */
    std::string conflict;
    if (!ensure_paired (self, pad, &conflict))
      return not_fed_by_fanout (self, pad, obj, conflict);
  }
  ItemId id = identify_item (obj, session->id ());
  item->caps_epoch = id.caps_epoch;
  item->has_caps_epoch = id.has_caps_epoch;

  /* this thread pushes what it makes releasable: the task is not woken */
  gpufan::Arrival arrival = output_from_lane (self, session,
      PendingArrival{ lane, id.seq, id.pts, gpufan::PayloadPtr (item) });
  if (arrival.status == gpufan::ArrivalStatus::kLate)
    GST_DEBUG_OBJECT (pad,
        "item %" G_GUINT64_FORMAT " came after its slot was given up: "
        "dropped",
        arrival.seq);

  /* downstream's result goes upstream, as queue does */
  return priv->src_ret.load ();
}

/* A marker of our fan-out (gst_gpufan_marker_new) came out of a lane: the
 * lane's items up to it that did not come back never will. Consumed (TRUE);
 * FALSE for anything else, a marker of an outer pair included. */
static gboolean
handle_marker (GstGpuFanIn * self, GstPad * pad, GstEvent * event)
{
  GstGpuFanInPrivate * priv = self->priv;
  guint64 session_id = 0, seq = 0;
  guint marker_lane = 0;
  if (!gst_gpufan_marker_parse (event, &session_id, &marker_lane, &seq))
    return FALSE;

  std::shared_ptr<gpufan::Session> session;
  guint lane = 0;
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<std::mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end ())
        return FALSE;
      if (it->second.paired) {
        if (it->second.session->id () != session_id)
          return FALSE;
        if (priv->flushing || it->second.flushing || it->second.eos) {
          gst_event_unref (event);
          return TRUE;
        }
        session = it->second.session;
        lane = it->second.lane;
        break;
      }
    }
    if (asked || !ensure_paired (self, pad))
      return FALSE;
  }
  gst_event_unref (event);
  GST_LOG_OBJECT (pad,
      "marker: lane %u's items up to %" G_GUINT64_FORMAT
      " came back or never will",
      lane, seq);
  PendingArrival marker{ lane, seq, gpufan::kNoTime, nullptr };
  marker.marker = true;
  output_from_lane (self, session, std::move (marker));
  return TRUE;
}

static GstFlowReturn
gst_gpufan_in_chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  return handle_item (GST_GPUFAN_IN (parent), pad,
      GST_MINI_OBJECT_CAST (buffer));
}

static void
restart_output_unlocked (GstGpuFanIn * self)
{
  GstGpuFanInPrivate * priv = self->priv;
  priv->eos_sent = false;
  priv->out_segment_valid = false;
  priv->src_ret = GST_FLOW_OK;
  priv->output_stopped = false;
  priv->forwarded_seqnums.Clear ();
}

static gboolean
gst_gpufan_in_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  GstGpuFanInPrivate * priv = self->priv;

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START: {
      bool first;
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ())
          it->second.flushing = true;
        first = !priv->flushing;
        priv->flushing = true;
        wake_output_unlocked (self);
      }
      if (!first) {
        gst_event_unref (event);
        return TRUE;
      }
      /* one FLUSH_START downstream, at once; then the task stops */
      gboolean res = gst_pad_push_event (self->srcpad, event);
      gst_pad_pause_task (self->srcpad);
      return res;
    }
    case GST_EVENT_FLUSH_STOP: {
      bool last = false;
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.flushing = false;
          it->second.eos = false;
        }
        bool any_flushing = false;
        for (auto & kv : priv->pads)
          any_flushing |= kv.second.flushing;
        if (!any_flushing && priv->flushing
            && GST_PAD_IS_ACTIVE (self->srcpad)) {
          last = true;
          priv->flushing = false;
          restart_output_unlocked (self);
        }
      }
      if (!last) {
        gst_event_unref (event);
        return TRUE;
      }
      gboolean res = gst_pad_push_event (self->srcpad, event);
      gst_pad_start_task (self->srcpad, gst_gpufan_in_src_loop, self, nullptr);
      return res;
    }
    case GST_EVENT_EOS: {
      std::shared_ptr<gpufan::Session> session;
      guint lane = 0;
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.eos = true;
          priv->eos_seqnum = gst_event_get_seqnum (event);
          if (it->second.paired) {
            session = it->second.session;
            lane = it->second.lane;
          }
        }
      }
      /* the lane is FIFO: whatever of it has not come back never will */
      if (session)
        session->LaneEnded (lane);
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        wake_output_unlocked (self);
      }
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_STREAM_START:
    case GST_EVENT_CAPS:
    case GST_EVENT_SEGMENT: {
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          GstEvent ** slot = GST_EVENT_TYPE (event) == GST_EVENT_CAPS
              ? &it->second.caps
              : GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT
              ? &it->second.segment
              : &it->second.stream_start;
          gst_event_replace (slot, event);
        }
      }
      if (GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START)
        ensure_paired (self, pad);
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_GAP:
      /* a GAP stands for data: it takes its place in the order */
      return handle_item (self, pad, GST_MINI_OBJECT_CAST (event))
          == GST_FLOW_OK;
    case GST_EVENT_CUSTOM_DOWNSTREAM_STICKY:
      if (handle_marker (self, pad, event))
        return TRUE;
      break;
    default:
      break;
  }

  /* Any other event comes once per lane: forward it once. */
  std::shared_ptr<gpufan::Session> session;
  FanInItem * item = nullptr;
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    if (priv->forwarded_seqnums.Seen (gst_event_get_seqnum (event))) {
      gst_event_unref (event);
      return TRUE;
    }
    auto it = priv->pads.find (pad);
    session = priv->session;
    if (GST_EVENT_IS_SERIALIZED (event) && session && it != priv->pads.end ()) {
      item = new_item_unlocked (it->second, GST_MINI_OBJECT_CAST (event));
      item->is_attachment = true;
    }
  }
  if (!item)
    return gst_pad_push_event (self->srcpad, event);

  /* serialized: it leaves where the fan-out saw it in the buffer order (or
   * after everything in flight, for an event a branch made) */
  std::optional<guint64> position
      = session->EventPosition (gst_event_get_seqnum (event));
  session->AttachBefore (position.value_or (G_MAXUINT64),
      gpufan::PayloadPtr (item));
  return TRUE;
}

/* A serialized query (drain, allocation, ...) from a branch must not overtake
 * what that branch delivered before it: wait until all of it has left the
 * window, and then until the output batch that took it has been pushed.
 * Flush-aware; FALSE when flushing or when the output has stopped. */
static gboolean
wait_lane_released (GstGpuFanIn * self, GstPad * pad)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::unique_lock<std::mutex> lk (priv->lock);
  guint64 last_batch = 0;
  bool out_of_window = false;
  for (;;) {
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end () || priv->flushing || it->second.flushing
        || priv->src_ret.load () != GST_FLOW_OK)
      return FALSE;
    if (!it->second.paired)
      return TRUE;
    if (!out_of_window
        && !it->second.session->HoldsArrivedFrom (it->second.lane)) {
      out_of_window = true;
      last_batch = priv->batches_started;
    }
    if (out_of_window && priv->batches_done >= last_batch)
      return TRUE;
    priv->cond.wait_for (lk, kIdleWaitSlice);
  }
}

static gboolean
gst_gpufan_in_sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);

  if (gst_gpufan_is_pair_query (query)) {
    guint depth = gst_gpufan_pair_query_get_depth (query);
    if (depth > 0) {
      /* an outer fan-out's probe crossing our pair: on downstream */
      gst_gpufan_pair_query_set_depth (query, depth - 1);
      return gst_pad_peer_query (self->srcpad, query);
    }
    /* a gpufanout probes its lane's branch */
    std::shared_ptr<gpufan::Session> session;
    guint lane = 0;
    if (!gst_gpufan_pair_query_parse (query, &session, &lane))
      return FALSE;
    gchar * fanout = gst_gpufan_pair_query_get_fanout (query);
    gboolean paired = pair_pad (self, pad, session, lane, fanout);
    g_free (fanout);
    if (!paired)
      return FALSE;
    gst_gpufan_pair_query_set_claimed (query);
    return TRUE;
  }
  if (GST_QUERY_IS_SERIALIZED (query) && !wait_lane_released (self, pad))
    return FALSE;
  return gst_pad_query_default (pad, parent, query);
}

/* ------------------------------------------------------------------------ */
/* Output */

static bool
all_pads_eos_unlocked (GstGpuFanInPrivate * priv)
{
  if (priv->pads.empty ())
    return false;
  for (auto & kv : priv->pads)
    if (!kv.second.eos)
      return false;
  return true;
}

static bool
same_stream (GstEvent * a, GstEvent * b)
{
  const gchar *ida = nullptr, *idb = nullptr;
  gst_event_parse_stream_start (a, &ida);
  gst_event_parse_stream_start (b, &idb);
  return g_strcmp0 (ida, idb) == 0;
}

/* Sends the sticky events @item needs before it: the ones that differ from
 * what downstream has (items), or only the missing ones (attachments). */
static GstFlowReturn
push_sticky_for_item (GstGpuFanIn * self, FanInItem * item)
{
  GstGpuFanInPrivate * priv = self->priv;

  /* the same event as last time (the usual case) needs no comparing */
  if (item->stream_start
      && (!priv->out_stream_start
          || (!item->is_attachment
              && item->stream_start != priv->out_stream_start
              && !same_stream (item->stream_start, priv->out_stream_start)))) {
    gst_event_replace (&priv->out_stream_start, item->stream_start);
    gst_pad_push_event (self->srcpad, gst_event_ref (item->stream_start));
    priv->out_segment_valid = false;
  }

  if (item->caps && (!priv->out_caps || !item->is_attachment)) {
    GstCaps * caps;
    gst_event_parse_caps (item->caps, &caps);
    if (!priv->out_caps || !gst_caps_is_equal (caps, priv->out_caps)) {
      if (priv->reconfigure_requested.exchange (false)) {
        priv->renegotiating = true;
        priv->renegotiating_epoch = priv->out_caps_epoch;
      }
      bool same_input = item->has_caps_epoch && priv->out_has_caps_epoch
          && item->caps_epoch == priv->out_caps_epoch;
      bool grace = priv->renegotiating
          && item->caps_epoch <= priv->renegotiating_epoch;
      if (priv->out_caps && same_input && !grace) {
        GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
            ("The lanes produce different caps for the same input"),
            ("lane %u gives %" GST_PTR_FORMAT
             ", an earlier lane gave %" GST_PTR_FORMAT,
                item->lane, caps, priv->out_caps));
        return GST_FLOW_NOT_NEGOTIATED;
      }
      gst_caps_replace (&priv->out_caps, caps);
      if (!gst_pad_push_event (self->srcpad, gst_event_ref (item->caps)))
        GST_DEBUG_OBJECT (self, "downstream refused %" GST_PTR_FORMAT, caps);
    }
    if (!item->is_attachment) {
      priv->out_caps_epoch = item->caps_epoch;
      priv->out_has_caps_epoch = item->has_caps_epoch;
      if (priv->renegotiating && item->caps_epoch > priv->renegotiating_epoch)
        priv->renegotiating = false;
    }
  }

  if (item->segment && (!priv->out_segment_valid || !item->is_attachment)) {
    const GstSegment * segment;
    gst_event_parse_segment (item->segment, &segment);
    if (!priv->out_segment_valid
        || !gst_segment_is_equal (segment, &priv->out_segment)) {
      gst_segment_copy_into (segment, &priv->out_segment);
      priv->out_segment_valid = true;
      gst_pad_push_event (self->srcpad, gst_event_ref (item->segment));
    }
  }
  return GST_FLOW_OK;
}

static GstFlowReturn
push_item (GstGpuFanIn * self, FanInItem * item, guint64 session_id)
{
  GstFlowReturn ret = push_sticky_for_item (self, item);
  if (ret != GST_FLOW_OK)
    return ret;

  /* our identification stays inside the pair */
  GstMiniObject * obj = item->obj;
  item->obj = nullptr;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (gst_buffer_find_gpufan_meta (buffer, session_id)) {
      buffer = gst_buffer_make_writable (buffer);
      gst_buffer_remove_gpufan_meta (buffer, session_id);
    }
    return gst_pad_push (self->srcpad, buffer);
  }
  GstEvent * event = GST_EVENT_CAST (obj);
  if (GST_EVENT_TYPE (event) == GST_EVENT_GAP)
    event = gst_gpufan_event_clear_item (event);
  gst_pad_push_event (self->srcpad, event);
  return GST_FLOW_OK;
}

/* Every lane ended (or, @missing not empty, every item is accounted for
 * and those lanes' EOS did not come in time) and the window is drained:
 * statistics, then one EOS. */
static void
finish_stream (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session,
    const std::string & missing = std::string ())
{
  GstGpuFanInPrivate * priv = self->priv;

  if (!missing.empty ())
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Ending the stream without the EOS of %s", missing.c_str ()),
        ("gpufanout's input ended and every item is accounted for "
         "(delivered, proven dropped or given up); a branch that swallows "
         "EOS or stalled is not waited for longer than stall-timeout"));

  /* a stream that never carried data still gets its stream-start first */
  if (!priv->out_stream_start) {
    FanInItem sticky;
    {
      std::lock_guard<std::mutex> lk (priv->lock);
      for (auto & kv : priv->pads) {
        if (kv.second.stream_start) {
          sticky.stream_start = gst_event_ref (kv.second.stream_start);
          if (kv.second.caps)
            sticky.caps = gst_event_ref (kv.second.caps);
          if (kv.second.segment)
            sticky.segment = gst_event_ref (kv.second.segment);
          break;
        }
      }
    }
    sticky.is_attachment = true;
    push_sticky_for_item (self, &sticky);
  }

  if (session) {
    gst_element_post_message (GST_ELEMENT (self),
        gst_gpufan_stats_message_new (GST_OBJECT (self), *session));
  }
  GST_DEBUG_OBJECT (self, "all lanes ended, pushing EOS");
  GstEvent * eos = gst_event_new_eos ();
  {
    /* keep upstream's seqnum (it follows a seek's) */
    std::lock_guard<std::mutex> lk (priv->lock);
    if (priv->eos_seqnum != GST_SEQNUM_INVALID)
      gst_event_set_seqnum (eos, priv->eos_seqnum);
  }
  gst_pad_push_event (self->srcpad, eos);
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    priv->eos_sent = true;
  }
  gst_pad_pause_task (self->srcpad);
}

/* The output batch taken from the window has gone downstream (or been
 * dropped): wakes serialized queries waiting for it (wait_lane_released). */
static void
mark_batch_done (GstGpuFanInPrivate * priv)
{
  std::lock_guard<std::mutex> lk (priv->lock);
  priv->batches_done = priv->batches_started;
  priv->cond.notify_all ();
}

/* Puts @arrival into the window without taking anything out; @wake_output:
 * the src task takes what it made releasable. */
static gpufan::Arrival
hand_over (const std::shared_ptr<gpufan::Session> & session,
    PendingArrival * arrival, bool wake_output = false)
{
  if (arrival->marker) {
    session->ProveLane (arrival->lane, *arrival->seq);
    return gpufan::Arrival{};
  }
  return session->Arrive (arrival->lane, arrival->seq, arrival->pts,
      std::move (arrival->payload), wake_output);
}

/* The lanes' items changed what ordering adds to the latency: the pipeline
 * asks again (query_latency). Without output_lock held. */
static void
maybe_post_latency (GstGpuFanIn * self)
{
  if (self->priv->latency_post_pending.exchange (false)) {
    GST_DEBUG_OBJECT (self, "reordering adds more latency now");
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_latency (GST_OBJECT (self)));
  }
}

/* Takes one batch from the window (after putting @arrival's item into it,
 * under the same Session lock) and pushes it downstream. Called with
 * output_lock held. Returns FALSE when nothing left the window; *generation
 * is the TakeReady's (for WaitOutput). *pause is set when a flow error
 * stopped the output: the caller pauses the task once it released
 * output_lock. */
static bool
output_batch_locked (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session, PendingArrival * arrival,
    gpufan::Arrival * arrived, guint64 * generation, bool * pause)
{
  GstGpuFanInPrivate * priv = self->priv;

  bool stopped;
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    stopped = priv->flushing || priv->eos_sent || priv->output_stopped;
    if (!stopped)
      ++priv->batches_started;
  }
  if (stopped) {
    /* no output now; a flush resets the window */
    if (arrival)
      *arrived = hand_over (session, arrival);
    *generation = 0;
    return false;
  }
  gpufan::ReadyBatch batch;
  if (!arrival)
    batch = session->TakeReady ();
  else if (arrival->marker)
    batch = session->ProveLaneAndTakeReady (arrival->lane, *arrival->seq);
  else
    batch = session->ArriveAndTakeReady (arrival->lane, arrival->seq,
        arrival->pts, std::move (arrival->payload), arrived);
  if (batch.latency_grew)
    priv->latency_post_pending = true;

  for (gpufan::Released & released : batch.items) {
    if (!released.payload)
      continue; /* dropped or given up: counted by the session */
    auto * item = static_cast<FanInItem *> (released.payload.get ());
    GstFlowReturn ret = push_item (self, item, session->id ());
    if (ret == GST_FLOW_OK)
      continue;

    GST_DEBUG_OBJECT (self, "push returned %s", gst_flow_get_name (ret));
    priv->src_ret = ret;
    if (ret == GST_FLOW_NOT_LINKED || ret < GST_FLOW_EOS) {
      if (ret != GST_FLOW_NOT_NEGOTIATED || !item->caps)
        GST_ELEMENT_FLOW_ERROR (self, ret);
      gst_pad_push_event (self->srcpad, gst_event_new_eos ());
    }
    if (ret != GST_FLOW_EOS) {
      priv->output_stopped = true;
      *pause = true;
    }
    break; /* the rest of the batch is dropped */
  }
  mark_batch_done (priv);
  *generation = batch.generation;
  return !batch.items.empty ();
}

/* An item came out of a lane: into the window, and what it makes releasable
 * goes downstream from this thread, unless another thread holds the output
 * (that one takes it too: it looks at output_pending once it let go). */
static gpufan::Arrival
output_from_lane (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session, PendingArrival && arrival)
{
  GstGpuFanInPrivate * priv = self->priv;
  gpufan::Arrival arrived;
  PendingArrival * pending = &arrival;

  if (priv->live.load ())
    return hand_over (session, &arrival, true);

  std::unique_lock<std::mutex> out (priv->output_lock, std::try_to_lock);
  if (!out.owns_lock ()) {
    arrived = hand_over (session, &arrival);
    priv->output_pending = true;
    /* the holder may have let go before it could see output_pending */
    if (!out.try_lock ())
      return arrived;
    pending = nullptr;
  }
  for (;;) {
    priv->output_pending = false;
    bool pause = false;
    guint64 generation;
    output_batch_locked (self, session, pending, &arrived, &generation, &pause);
    pending = nullptr;
    out.unlock ();
    maybe_post_latency (self);
    if (pause) {
      /* the task stops as it would have after its own push */
      session->WakeOutput ();
      gst_pad_pause_task (self->srcpad);
      return arrived;
    }
    if (!priv->output_pending.load () || !out.try_lock ())
      return arrived;
  }
}

/* Whether the stream ends now (see docs/ordering.md, "When the stream
 * ends"): when every sink pad has EOS and the window is empty; or when the
 * fan-out's input ended and every item is accounted for, as soon as every
 * lane that is not stalled has returned EOS and at the latest stall-timeout
 * later (a branch may swallow EOS; a stalled lane was waited for already).
 * TRUE to end now, @missing naming the lanes whose EOS never came; else
 * *deadline_ns (or kNoTime) is when to look again unless woken first. */
static bool
stream_ends_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session, std::string * missing,
    gint64 * deadline_ns)
{
  GstGpuFanInPrivate * priv = self->priv;
  struct Waiting {
    std::string pad;
    bool paired;
    guint lane;
  };
  *deadline_ns = gpufan::kNoTime;
  bool all_eos;
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    if (priv->flushing || priv->eos_sent)
      return false;
    all_eos = all_pads_eos_unlocked (priv);
  }
  if (!session->WindowEmpty ())
    return false;
  if (all_eos)
    return true;
  const gint64 since = session->AccountedForSinceNs ();
  if (since == gpufan::kNoTime)
    return false;

  /* Only now, once the input ended: which lanes are still without EOS. */
  std::vector<Waiting> waiting;
  bool no_pads;
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    no_pads = priv->pads.empty ();
    for (auto & kv : priv->pads)
      if (!kv.second.eos)
        waiting.push_back (Waiting{ GST_OBJECT_NAME (kv.first),
            kv.second.paired, kv.second.lane });
  }
  if (waiting.empty ())
    return !no_pads; /* the last pad got EOS meanwhile */

  const gpufan::SessionStats stats = session->Stats ();
  auto lane_stats = [&stats] (guint id) -> const gpufan::LaneStats * {
    for (const auto & l : stats.lanes)
      if (l.lane == id)
        return &l;
    return nullptr;
  };
  bool wait_more = false;
  std::string names;
  for (const Waiting & w : waiting) {
    const gpufan::LaneStats * l = w.paired ? lane_stats (w.lane) : nullptr;
    const bool stalled = l && l->state == gpufan::LaneState::kStalled;
    wait_more |= !stalled;
    gchar * text;
    if (stalled) {
      gchar * why = gst_gpufan_stall_reason (*l);
      text = g_strdup_printf ("%s (lane %u, stalled: %s)", w.pad.c_str (),
          w.lane, why);
      g_free (why);
    } else if (w.paired) {
      text = g_strdup_printf ("%s (lane %u, no EOS within stall-timeout)",
          w.pad.c_str (), w.lane);
    } else {
      text = g_strdup_printf ("%s (never paired with a lane)", w.pad.c_str ());
    }
    names += (names.empty () ? "" : ", ") + std::string (text);
    g_free (text);
  }
  const gint64 deadline = since + session->stall_timeout_ns ();
  if (wait_more && session->clock ().NowNs () < deadline) {
    *deadline_ns = deadline;
    return false;
  }
  *missing = names;
  return true;
}

static void
gst_gpufan_in_src_loop (gpointer user_data)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (user_data);
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::Session> session;

  {
    std::unique_lock<std::mutex> lk (priv->lock);
    if (priv->flushing || priv->eos_sent || priv->output_stopped) {
      lk.unlock ();
      gst_pad_pause_task (self->srcpad);
      return;
    }
    session = priv->session;
    if (!session) {
      if (all_pads_eos_unlocked (priv)) {
        lk.unlock ();
        std::lock_guard<std::mutex> out (priv->output_lock);
        finish_stream (self, nullptr);
        return;
      }
      priv->cond.wait_for (lk, kIdleWaitSlice);
      return;
    }
  }

  bool pause = false;
  guint64 generation = 0;
  gint64 eos_deadline = gpufan::kNoTime;
  {
    std::unique_lock<std::mutex> out (priv->output_lock);
    priv->output_pending = false;
    bool more = output_batch_locked (self, session, nullptr, nullptr,
        &generation, &pause);
    std::string missing;
    if (!more && !pause
        && stream_ends_now (self, session, &missing, &eos_deadline)) {
      finish_stream (self, session, missing);
      return;
    }
    out.unlock ();
    maybe_post_latency (self);
    if (more)
      return; /* more may be ready: the next iteration looks */
  }
  if (pause) {
    gst_pad_pause_task (self->srcpad);
    return;
  }
  if (priv->output_pending.load ())
    return; /* came while we held the output: go again */
  if (session->flushing ()) {
    /* the fan-out is stopped or flushing: WaitOutput would not wait */
    std::unique_lock<std::mutex> lk (priv->lock);
    priv->cond.wait_for (lk, kIdleWaitSlice,
        [priv] { return priv->flushing || priv->eos_sent; });
    return;
  }
  gint64 wait_ns = kOutputWaitSliceNs;
  if (eos_deadline != gpufan::kNoTime)
    wait_ns = MIN (wait_ns, MAX (eos_deadline - session->clock ().NowNs (), 0));
  session->WaitOutput (generation, wait_ns);
}

static gboolean
gst_gpufan_in_src_activate_mode (GstPad * pad, GstObject * parent,
    GstPadMode mode, gboolean active)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  GstGpuFanInPrivate * priv = self->priv;

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;

  if (active) {
    {
      std::lock_guard<std::mutex> lk (priv->lock);
      priv->flushing = false;
      restart_output_unlocked (self);
    }
    return gst_pad_start_task (pad, gst_gpufan_in_src_loop, self, nullptr);
  }

  {
    std::lock_guard<std::mutex> lk (priv->lock);
    priv->flushing = true;
    wake_output_unlocked (self);
  }
  return gst_pad_stop_task (pad);
}

/* min = the largest lane minimum (an item leaves once every earlier one has,
 * and each of those took at most that long), max = the smallest lane maximum,
 * live if any lane is. */
static gboolean
query_latency (GstGpuFanIn * self, GstQuery * query)
{
  gboolean live = FALSE, any = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;

  GstIterator * it = gst_element_iterate_sink_pads (GST_ELEMENT (self));
  GValue item = G_VALUE_INIT;
  gboolean done = FALSE;
  while (!done) {
    switch (gst_iterator_next (it, &item)) {
      case GST_ITERATOR_OK: {
        GstPad * pad = GST_PAD (g_value_get_object (&item));
        GstQuery * q = gst_query_new_latency ();
        if (gst_pad_peer_query (pad, q)) {
          gboolean l;
          GstClockTime mn, mx;
          gst_query_parse_latency (q, &l, &mn, &mx);
          any = TRUE;
          live |= l;
          min = MAX (min, mn);
          if (GST_CLOCK_TIME_IS_VALID (mx))
            max = GST_CLOCK_TIME_IS_VALID (max) ? MIN (max, mx) : mx;
        }
        gst_query_unref (q);
        g_value_reset (&item);
        break;
      }
      case GST_ITERATOR_RESYNC:
        live = FALSE;
        any = FALSE;
        min = 0;
        max = GST_CLOCK_TIME_NONE;
        gst_iterator_resync (it);
        break;
      default:
        done = TRUE;
        break;
    }
  }
  g_value_unset (&item);
  gst_iterator_free (it);

  if (!any)
    return FALSE;
  self->priv->live = live;
  /* Ordering holds an item until every earlier one arrived: it adds the
   * longest time items recently spent in the lanes (Session::AddedLatencyNs,
   * at most stall-timeout). */
  std::shared_ptr<gpufan::Session> session;
  {
    std::lock_guard<std::mutex> lk (self->priv->lock);
    session = self->priv->session;
  }
  if (session) {
    const GstClockTime added = (GstClockTime)session->AddedLatencyNs ();
    session->MarkLatencyReported ((gint64)added);
    min += added;
    if (GST_CLOCK_TIME_IS_VALID (max))
      max += added;
  }
  GST_DEBUG_OBJECT (self,
      "latency: live %d min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT, live,
      GST_TIME_ARGS (min), GST_TIME_ARGS (max));
  gst_query_set_latency (query, live, min, max);
  return TRUE;
}

static gboolean
gst_gpufan_in_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  if (GST_EVENT_TYPE (event) == GST_EVENT_RECONFIGURE)
    GST_GPUFAN_IN (parent)->priv->reconfigure_requested = true;
  /* upstream events go up every branch; the fan-out forwards each once */
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
gst_gpufan_in_src_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);

  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY)
    return query_latency (self, query);
  if (gst_gpufan_is_pair_query (query)) {
    /* an outer fan-in asks upstream: cross our pair through one branch */
    gst_gpufan_pair_query_set_depth (query,
        gst_gpufan_pair_query_get_depth (query) + 1);
    GstPad * sinkpad = nullptr;
    {
      std::lock_guard<std::mutex> lk (self->priv->lock);
      if (!self->priv->pads.empty ())
        sinkpad = GST_PAD (gst_object_ref (self->priv->pads.begin ()->first));
    }
    if (!sinkpad)
      return FALSE;
    gboolean res = gst_pad_peer_query (sinkpad, query);
    gst_object_unref (sinkpad);
    return res;
  }
  return gst_pad_query_default (pad, parent, query);
}

/* ------------------------------------------------------------------------ */
/* Request pads */

/* The latency is the lanes' (see query_latency): a live pipeline must
 * query it again when they change. */
static void
lanes_changed (GstGpuFanIn * self)
{
  if (GST_STATE (self) == GST_STATE_PLAYING)
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_latency (GST_OBJECT (self)));
}

static GstPad *
gst_gpufan_in_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps *)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;
  GstPad * pad;

  {
    std::lock_guard<std::mutex> lk (priv->lock);
    guint index = 0;
    auto taken = [priv] (guint i) {
      for (auto & kv : priv->pads)
        if (kv.second.index == i)
          return true;
      return false;
    };
    if (!gst_gpufan_request_pad_index (element, "sink_", name, taken, &index))
      return nullptr;

    gchar * pad_name = g_strdup_printf ("sink_%u", index);
    pad = gst_pad_new_from_template (templ, pad_name);
    g_free (pad_name);
    PadState state;
    state.index = index;
    priv->pads.emplace (pad, std::move (state));
  }

  gst_pad_set_chain_function (pad, GST_DEBUG_FUNCPTR (gst_gpufan_in_chain));
  gst_pad_set_event_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_event));
  gst_pad_set_query_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_query));
  GST_PAD_SET_PROXY_CAPS (pad);

  if (GST_PAD_IS_ACTIVE (self->srcpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (element, pad);
  lanes_changed (self);
  return pad;
}

static void
gst_gpufan_in_release_pad (GstElement * element, GstPad * pad)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::Session> session;
  guint lane = 0;

  gst_pad_set_active (pad, FALSE);
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it != priv->pads.end ()) {
      if (it->second.paired) {
        session = it->second.session;
        lane = it->second.lane;
      }
      it->second.ClearSticky ();
      priv->pads.erase (it);
    }
  }
  /* nothing more of that lane can reach us */
  if (session)
    session->UnclaimLane (lane);
  {
    std::lock_guard<std::mutex> lk (priv->lock);
    wake_output_unlocked (self);
  }
  gst_element_remove_pad (element, pad);
  lanes_changed (self);
}

/* ------------------------------------------------------------------------ */
/* Element */

static GstStateChangeReturn
gst_gpufan_in_change_state (GstElement * element, GstStateChange transition)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;

  GstStateChangeReturn ret
      = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE)
    return ret;

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    std::lock_guard<std::mutex> lk (priv->lock);
    for (auto & kv : priv->pads) {
      kv.second.eos = false;
      kv.second.flushing = false;
      kv.second.ClearSticky ();
      /* paired again at the next start: the fan-out may have changed */
      kv.second.paired = false;
      kv.second.session.reset ();
    }
    priv->session.reset ();
    priv->batches_done = priv->batches_started;
    priv->eos_seqnum = GST_SEQNUM_INVALID;
    priv->renegotiating = false;
    gst_clear_event (&priv->out_stream_start);
    gst_clear_caps (&priv->out_caps);
    priv->out_has_caps_epoch = false;
    restart_output_unlocked (self);
  }
  return ret;
}

static void
gst_gpufan_in_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  GstGpuFanInPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_STALL_TIMEOUT: {
      std::lock_guard<std::mutex> lk (priv->lock);
      priv->stall_timeout = g_value_get_uint64 (value);
      if (priv->session)
        priv->session->SetStallTimeout ((gint64)priv->stall_timeout.load ());
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_in_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  GstGpuFanInPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_STALL_TIMEOUT:
      g_value_set_uint64 (value, priv->stall_timeout.load ());
      break;
    case PROP_STATS: {
      std::shared_ptr<gpufan::Session> session;
      {
        std::lock_guard<std::mutex> lk (priv->lock);
        session = priv->session;
      }
      g_value_take_boxed (value,
          session ? gst_gpufan_stats_to_structure (*session)
                  : gst_structure_new_empty (GST_GPUFAN_STATS_NAME));
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_in_finalize (GObject * object)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  delete self->priv;
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_gpufan_in_class_init (GstGpuFanInClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_in_set_property;
  gobject_class->get_property = gst_gpufan_in_get_property;
  gobject_class->finalize = gst_gpufan_in_finalize;

  /**
   * GstGpuFanIn:stall-timeout:
   *
   * How long (ns) the output waits for the next buffer in order when its lane
   * does not deliver it. Then the output goes on without it (the buffer is
   * counted as timed-out, and dropped if it comes later) and the lane is
   * stalled: no more items while another lane can take them, until anything
   * comes back from it. Also the longest wait for the lanes' EOS once
   * gpufanout's input ended and every item is accounted for.
   */
  g_object_class_install_property (gobject_class, PROP_STALL_TIMEOUT,
      g_param_spec_uint64 ("stall-timeout", "Stall timeout",
          "Longest wait (ns) for the next buffer in order before the output "
          "goes on without it and stops feeding its lane; also the longest "
          "wait for a lane's EOS after every item is accounted for",
          GST_MSECOND, 3600 * GST_SECOND, DEFAULT_STALL_TIMEOUT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanIn:stats:
   *
   * The paired gpufanout's `gpufan-stats` structure (an empty one before the
   * fan-in is paired).
   */
  g_object_class_install_property (gobject_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "Per-lane statistics of the paired gpufanout (gpufan-stats)",
          GST_TYPE_STRUCTURE,
          (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  element_class->request_new_pad
      = GST_DEBUG_FUNCPTR (gst_gpufan_in_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_gpufan_in_release_pad);
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_gpufan_in_change_state);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);

  gst_element_class_set_static_metadata (element_class, "GPU fan-in", "Generic",
      "Merges the lanes of a gpufanout back into one stream, in input order",
      "gst-gpufan developers");
}

static void
gst_gpufan_in_init (GstGpuFanIn * self)
{
  self->priv = new GstGpuFanInPrivate ();
  gst_segment_init (&self->priv->out_segment, GST_FORMAT_UNDEFINED);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_activatemode_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_activate_mode));
  gst_pad_set_event_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_event));
  gst_pad_set_query_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_query));
  GST_PAD_SET_PROXY_CAPS (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}

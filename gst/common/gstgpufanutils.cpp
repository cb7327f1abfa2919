/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanutils.h"

#include "gstgpufandevices.h"

#include <cstring>

GST_DEBUG_CATEGORY (gst_gpufan_debug);

/* --- meta --- */

static gboolean
gst_gpufan_meta_init (GstMeta * meta, gpointer, GstBuffer *)
{
  auto * m = reinterpret_cast<GstGpuFanMeta *> (meta);
  m->session_id = 0;
  m->seq = 0;
  m->lane = 0;
  m->caps_epoch = 0;
  return TRUE;
}

/* Every transform keeps the identification: the output of a branch element
 * is still "the item with this sequence number". */
static gboolean
gst_gpufan_meta_transform (GstBuffer * dest, GstMeta * meta, GstBuffer *,
    GQuark, gpointer)
{
  auto * m = reinterpret_cast<GstGpuFanMeta *> (meta);
  return gst_buffer_add_gpufan_meta (dest, m->session_id, m->seq, m->lane,
             m->caps_epoch)
      != nullptr;
}

GType
gst_gpufan_meta_api_get_type (void)
{
  static GType type = 0;
  static const gchar * tags[] = { nullptr };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("GstGpuFanMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

const GstMetaInfo *
gst_gpufan_meta_get_info (void)
{
  static const GstMetaInfo * info = nullptr;

  if (g_once_init_enter (&info)) {
    const GstMetaInfo * i = gst_meta_register (GST_GPUFAN_META_API_TYPE,
        "GstGpuFanMeta", sizeof (GstGpuFanMeta), gst_gpufan_meta_init, nullptr,
        gst_gpufan_meta_transform);
    g_once_init_leave (&info, i);
  }
  return info;
}

GstGpuFanMeta *
gst_buffer_add_gpufan_meta (GstBuffer * buffer, guint64 session_id, guint64 seq,
    guint32 lane, guint32 caps_epoch)
{
  auto * m = reinterpret_cast<GstGpuFanMeta *> (
      gst_buffer_add_meta (buffer, gst_gpufan_meta_get_info (), nullptr));
  if (!m)
    return nullptr;
  m->session_id = session_id;
  m->seq = seq;
  m->lane = lane;
  m->caps_epoch = caps_epoch;
  return m;
}

GstGpuFanMeta *
gst_buffer_find_gpufan_meta (GstBuffer * buffer, guint64 session_id)
{
  gpointer state = nullptr;
  GstMeta * meta;
  while ((meta = gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_GPUFAN_META_API_TYPE))) {
    auto * m = reinterpret_cast<GstGpuFanMeta *> (meta);
    if (m->session_id == session_id)
      return m;
  }
  return nullptr;
}

void
gst_buffer_remove_gpufan_meta (GstBuffer * buffer, guint64 session_id)
{
  if (GstGpuFanMeta * m = gst_buffer_find_gpufan_meta (buffer, session_id))
    gst_buffer_remove_meta (buffer, &m->meta);
}

/* --- GAP event identification --- */

#define ITEM_SESSION_FIELD "gpufan-session"
#define ITEM_SEQ_FIELD "gpufan-seq"

void
gst_gpufan_event_set_item (GstEvent * event, guint64 session_id, guint64 seq)
{
  GstStructure * s = gst_event_writable_structure (event);
  gst_structure_set (s, ITEM_SESSION_FIELD, G_TYPE_UINT64, session_id,
      ITEM_SEQ_FIELD, G_TYPE_UINT64, seq, nullptr);
}

gboolean
gst_gpufan_event_get_item (GstEvent * event, guint64 * session_id,
    guint64 * seq)
{
  const GstStructure * s = gst_event_get_structure (event);
  return s && gst_structure_get_uint64 (s, ITEM_SESSION_FIELD, session_id)
      && gst_structure_get_uint64 (s, ITEM_SEQ_FIELD, seq);
}

GstEvent *
gst_gpufan_event_clear_item (GstEvent * event)
{
  const GstStructure * s = gst_event_get_structure (event);
  if (!s || !gst_structure_has_field (s, ITEM_SEQ_FIELD))
    return event;
  event = gst_event_make_writable (event);
  gst_structure_remove_fields (gst_event_writable_structure (event),
      ITEM_SESSION_FIELD, ITEM_SEQ_FIELD, nullptr);
  return event;
}

/* --- markers --- */

#define MARKER_NAME "GstGpuFanMarker"
#define CHUNK_START_NAME "GstGpuFanChunk"

/* A custom event naming an item of a lane: markers and chunk starts. */
static GstEvent *
lane_item_event_new (GstEventType type, const gchar * name, guint64 session_id,
    guint lane, guint64 seq)
{
  return gst_event_new_custom (type,
      gst_structure_new (name, "session", G_TYPE_UINT64, session_id, "lane",
          G_TYPE_UINT, lane, "seq", G_TYPE_UINT64, seq, nullptr));
}

static gboolean
lane_item_event_parse (GstEvent * event, GstEventType type, const gchar * name,
    guint64 * session_id, guint * lane, guint64 * seq)
{
  if (GST_EVENT_TYPE (event) != type)
    return FALSE;
  const GstStructure * s = gst_event_get_structure (event);
  return s && gst_structure_has_name (s, name)
      && gst_structure_get_uint64 (s, "session", session_id)
      && gst_structure_get_uint (s, "lane", lane)
      && gst_structure_get_uint64 (s, "seq", seq);
}

GstEvent *
gst_gpufan_marker_new (guint64 session_id, guint lane, guint64 seq)
{
  return lane_item_event_new (GST_EVENT_CUSTOM_DOWNSTREAM_STICKY, MARKER_NAME,
      session_id, lane, seq);
}

gboolean
gst_gpufan_marker_parse (GstEvent * event, guint64 * session_id, guint * lane,
    guint64 * seq)
{
  return lane_item_event_parse (event, GST_EVENT_CUSTOM_DOWNSTREAM_STICKY,
      MARKER_NAME, session_id, lane, seq);
}

GstEvent *
gst_gpufan_chunk_start_new (guint64 session_id, guint lane, guint64 seq,
    guint32 caps_epoch, guint32 segment_epoch)
{
  GstEvent * event = lane_item_event_new (GST_EVENT_CUSTOM_DOWNSTREAM,
      CHUNK_START_NAME, session_id, lane, seq);
  gst_structure_set (gst_event_writable_structure (event), "caps-epoch",
      G_TYPE_UINT, caps_epoch, "segment-epoch", G_TYPE_UINT, segment_epoch,
      nullptr);
  return event;
}

gboolean
gst_gpufan_chunk_start_parse (GstEvent * event, guint64 * session_id,
    guint * lane, guint64 * seq, guint32 * caps_epoch, guint32 * segment_epoch)
{
  if (!lane_item_event_parse (event, GST_EVENT_CUSTOM_DOWNSTREAM,
          CHUNK_START_NAME, session_id, lane, seq))
    return FALSE;
  const GstStructure * s = gst_event_get_structure (event);
  return gst_structure_get_uint (s, "caps-epoch", caps_epoch)
      && gst_structure_get_uint (s, "segment-epoch", segment_epoch);
}

/* --- pairing query --- */

#define PAIR_QUERY_NAME "GstGpuFanPair"

/* A boxed copy of a shared_ptr<Session>, so that the query owns a reference
 * for as long as it lives, whichever thread answers it. */
using SessionRef = std::shared_ptr<gpufan::Session>;

static gpointer
session_ref_copy (gpointer ref)
{
  return new SessionRef (*static_cast<SessionRef *> (ref));
}

static void
session_ref_free (gpointer ref)
{
  delete static_cast<SessionRef *> (ref);
}

G_DEFINE_BOXED_TYPE (GstGpuFanSessionRef, gst_gpufan_session_ref,
    session_ref_copy, session_ref_free);

GstQuery *
gst_gpufan_pair_query_new (const SessionRef * session, guint lane,
    GstElement * fanout)
{
  GstStructure * s = gst_structure_new (PAIR_QUERY_NAME, "lane", G_TYPE_UINT,
      lane, "claimed", G_TYPE_BOOLEAN, FALSE, nullptr);
  if (session && *session) {
    gst_structure_set (s, "session", gst_gpufan_session_ref_get_type (),
        session, nullptr);
  }
  GstQuery * query = gst_query_new_custom (GST_QUERY_CUSTOM, s);
  if (fanout)
    gst_gpufan_pair_query_set_fanout (query, fanout);
  return query;
}

void
gst_gpufan_pair_query_set_fanout (GstQuery * query, GstElement * fanout)
{
  gchar * name = gst_object_get_name (GST_OBJECT (fanout));
  gst_structure_set (gst_query_writable_structure (query), "fanout",
      G_TYPE_STRING, name, nullptr);
  g_free (name);
}

gchar *
gst_gpufan_pair_query_get_fanout (GstQuery * query)
{
  const GstStructure * s = gst_query_get_structure (query);
  const gchar * name = s ? gst_structure_get_string (s, "fanout") : nullptr;
  return g_strdup (name ? name : "?");
}

gboolean
gst_gpufan_is_pair_query (GstQuery * query)
{
  if (GST_QUERY_TYPE (query) != GST_QUERY_CUSTOM)
    return FALSE;
  const GstStructure * s = gst_query_get_structure (query);
  return s && gst_structure_has_name (s, PAIR_QUERY_NAME);
}

gboolean
gst_gpufan_pair_query_parse (GstQuery * query, SessionRef * session,
    guint * lane)
{
  const GstStructure * s = gst_query_get_structure (query);
  SessionRef * ref = nullptr;

  if (!s
      || !gst_structure_get (s, "session", gst_gpufan_session_ref_get_type (),
          &ref, nullptr)
      || !ref)
    return FALSE;
  *session = *ref;
  session_ref_free (ref);
  if (lane)
    gst_structure_get_uint (s, "lane", lane);
  return *session != nullptr;
}

void
gst_gpufan_pair_query_set_session (GstQuery * query, const SessionRef & session,
    guint lane)
{
  GstStructure * s = gst_query_writable_structure (query);
  gst_structure_set (s, "session", gst_gpufan_session_ref_get_type (), &session,
      "lane", G_TYPE_UINT, lane, nullptr);
}

void
gst_gpufan_pair_query_set_claimed (GstQuery * query)
{
  GstStructure * s = gst_query_writable_structure (query);
  gst_structure_set (s, "claimed", G_TYPE_BOOLEAN, TRUE, nullptr);
}

guint
gst_gpufan_pair_query_get_depth (GstQuery * query)
{
  guint depth = 0;
  const GstStructure * s = gst_query_get_structure (query);
  if (s)
    gst_structure_get_uint (s, "depth", &depth);
  return depth;
}

void
gst_gpufan_pair_query_set_depth (GstQuery * query, guint depth)
{
  gst_structure_set (gst_query_writable_structure (query), "depth", G_TYPE_UINT,
      depth, nullptr);
}

gboolean
gst_gpufan_pair_query_claimed (GstQuery * query)
{
  gboolean claimed = FALSE;
  const GstStructure * s = gst_query_get_structure (query);
  return s && gst_structure_get_boolean (s, "claimed", &claimed) && claimed;
}

/* --- event de-duplication --- */

bool
GstGpuFanSeqnumMemory::Seen (guint32 seqnum)
{
  for (guint32 s : seqnums_)
    if (s == seqnum)
      return true;
  seqnums_.push_back (seqnum);
  if (seqnums_.size () > kRemembered)
    seqnums_.pop_front ();
  return false;
}

/* --- request pads --- */

gboolean
gst_gpufan_request_pad_index (GstElement * element, const gchar * prefix,
    const gchar * name, const std::function<bool (guint)> & taken,
    guint * index)
{
  if (!name) {
    guint i = 0;
    while (taken (i))
      i++;
    *index = i;
    return TRUE;
  }

  size_t len = strlen (prefix);
  gchar * end = nullptr;
  guint64 v = G_MAXUINT64;
  if (g_str_has_prefix (name, prefix) && name[len] != '\0')
    v = g_ascii_strtoull (name + len, &end, 10);
  if (!end || *end != '\0' || v > G_MAXUINT32) {
    GST_WARNING_OBJECT (element, "cannot make a pad named '%s': expected %s%%u",
        name, prefix);
    return FALSE;
  }
  if (taken ((guint)v)) {
    GST_WARNING_OBJECT (element, "pad '%s' already exists", name);
    return FALSE;
  }
  *index = (guint)v;
  return TRUE;
}

/* --- statistics --- */

/* @counts as fields named @prefix + "in-place", "copies-peer", ... */
static void
gpu_counts_to_structure (const gpufan::GpuFrameCounts & counts,
    const char * prefix, GstStructure * s)
{
  const std::string p = prefix;
  gst_structure_set (s, (p + "in-place").c_str (), G_TYPE_UINT64,
      counts.in_place, (p + "copies-peer").c_str (), G_TYPE_UINT64, counts.peer,
      (p + "copies-via-host").c_str (), G_TYPE_UINT64, counts.via_host,
      (p + "copies-skipped").c_str (), G_TYPE_UINT64, counts.skipped,
      (p + "copy-bytes").c_str (), G_TYPE_UINT64, counts.bytes,
      (p + "copy-time").c_str (), G_TYPE_UINT64, (guint64)MAX (counts.ns, 0),
      nullptr);
}

static GstStructure *
lane_stats_to_structure (const gpufan::LaneStats & l)
{
  GstStructure * s = gst_structure_new ("lane", "lane", G_TYPE_UINT, l.lane,
      "weight", G_TYPE_DOUBLE, l.weight, "claimed", G_TYPE_BOOLEAN, l.claimed,
      "dispatched", G_TYPE_UINT64, l.dispatched, "completed", G_TYPE_UINT64,
      l.completed, "dropped", G_TYPE_UINT64, l.dropped, "failed", G_TYPE_UINT64,
      l.failed, "timed-out", G_TYPE_UINT64, l.timed_out, "late", G_TYPE_UINT64,
      l.late, "reorder-waits", G_TYPE_UINT64, l.reorder_waits, "replayed",
      G_TYPE_UINT64, l.replayed, "handed-over", G_TYPE_UINT64, l.handed_over,
      "queued", G_TYPE_UINT, l.queued, "queue-limit", G_TYPE_UINT,
      l.queue_limit, "in-flight", G_TYPE_UINT, l.in_flight, "service-time",
      G_TYPE_UINT64, (guint64)MAX (l.service_ns, 0), "wake-time", G_TYPE_UINT64,
      (guint64)MAX (l.wake_ns, 0), "fps", G_TYPE_DOUBLE, l.fps, "state",
      G_TYPE_STRING, gpufan::LaneHealthName (l.state), "stalls", G_TYPE_UINT64,
      l.stalls, "markers", G_TYPE_UINT64, l.markers, nullptr);
  if (l.state == gpufan::LaneHealth::kStalled) {
    gchar * why = gst_gpufan_stall_reason (l);
    gst_structure_set (s, "stall", G_TYPE_STRING,
        gpufan::StallKindName (l.stall_kind), "stall-reason", G_TYPE_STRING,
        why, nullptr);
    g_free (why);
  }
  /* where the lane's threads' time went (ns): push-time, idle-time,
   * settle-time, query-time, output-time */
  for (int i = 0; i < gpufan::kLaneTimeCount; i++) {
    const std::string field = std::string (gpufan::LaneTimeName (
            static_cast<gpufan::LaneTime> (i))) + "-time";
    gst_structure_set (s, field.c_str (), G_TYPE_UINT64,
        (guint64)MAX (l.time_ns[i], 0), nullptr);
  }
  gst_gpufan_device_to_structure (l.device, s);
  /* what the fan-out told the Session (LaneInfo, staging counts) */
  if (l.described)
    gst_structure_set (s, "worker-thread", G_TYPE_STRING,
        l.worker_thread.c_str (), "copies", G_TYPE_UINT64, l.copies,
        "copies-skipped", G_TYPE_UINT64, l.copies_skipped, nullptr);
  /* frames in GPU memory: how they reached the lane's GPU */
  gpu_counts_to_structure (l.gpu, "gpu-", s);
  if (l.has_host_pool) {
    const gpufan::HostPoolStats & p = l.host_pool;
    gst_structure_set (s, "pool-node", G_TYPE_INT, l.host_pool_node,
        "pool-pinned", G_TYPE_BOOLEAN, (gboolean)l.host_pool_pins,
        "pool-blocks-allocated", G_TYPE_UINT64, p.blocks_allocated,
        "pool-blocks-reused", G_TYPE_UINT64, p.blocks_reused,
        "pool-blocks-in-use", G_TYPE_UINT64, p.blocks_in_use,
        "pool-bytes-reserved", G_TYPE_UINT64, p.bytes_reserved,
        "pool-bytes-pinned", G_TYPE_UINT64, p.bytes_pinned,
        "pool-bytes-node-bound", G_TYPE_UINT64, p.bytes_node_bound,
        "pool-evictions", G_TYPE_UINT64, p.evictions, "pool-fallbacks",
        G_TYPE_UINT64, p.fallbacks, nullptr);
  }
  return s;
}

gchar *
gst_gpufan_stall_reason (const gpufan::LaneStats & l)
{
  const gdouble ago = (gdouble)l.stalled_ns / GST_SECOND;
  if (l.stall_kind == gpufan::StallKind::kBlocked)
    return g_strdup_printf ("its branch has not returned from the push of "
                            "item %" G_GUINT64_FORMAT " (stalled %.1f s ago)",
        l.stalled_seq, ago);
  return g_strdup_printf ("its branch took item %" G_GUINT64_FORMAT
                          " and returned nothing since, no buffer, marker or "
                          "EOS (stalled %.1f s "
                          "ago)",
      l.stalled_seq, ago);
}

/* One input stream of a fan-out with several (its sink_%u pad). */
static GstStructure *
stream_stats_to_structure (const gpufan::StreamStats & st)
{
  return gst_structure_new ("stream", "stream", G_TYPE_UINT, st.stream - 1,
      "pad", G_TYPE_STRING, gst_gpufan_stream_pad_name (st.stream).c_str (),
      "weight", G_TYPE_DOUBLE, st.weight, "max-in-flight", G_TYPE_UINT,
      st.max_in_flight, "dispatched", G_TYPE_UINT64, st.dispatched, "delivered",
      G_TYPE_UINT64, st.delivered, "lost", G_TYPE_UINT64, st.lost, "flushed",
      G_TYPE_UINT64, st.flushed, "leaky-dropped", G_TYPE_UINT64,
      st.leaky_dropped, "in-flight", G_TYPE_UINT, st.in_flight, "wait-time",
      G_TYPE_UINT64, (guint64)MAX (st.wait_ns, 0), "max-wait-time",
      G_TYPE_UINT64, (guint64)MAX (st.max_wait_ns, 0), "fps", G_TYPE_DOUBLE,
      st.fps, nullptr);
}

std::string
gst_gpufan_stream_pad_name (guint32 stream)
{
  return "sink_" + std::to_string (stream - 1);
}

GstStructure *
gst_gpufan_stats_to_structure (const gpufan::Session & session)
{
  const gpufan::SessionStats stats = session.Stats ();

  GValue lanes = G_VALUE_INIT;
  gst_value_array_init (&lanes, stats.lanes.size ());
  for (const auto & l : stats.lanes) {
    GValue v = G_VALUE_INIT;
    g_value_init (&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed (&v, lane_stats_to_structure (l));
    gst_value_array_append_and_take_value (&lanes, &v);
  }

  GstStructure * s = gst_structure_new (GST_GPUFAN_STATS_NAME, "policy",
      G_TYPE_STRING, gpufan::PolicyName (stats.policy), "dispatched",
      G_TYPE_UINT64, stats.dispatched, "released", G_TYPE_UINT64,
      stats.released, "unmatched", G_TYPE_UINT64, stats.unmatched, "in-flight",
      G_TYPE_UINT, stats.in_flight, "max-in-flight", G_TYPE_UINT,
      stats.max_in_flight, "window-peak", G_TYPE_UINT, stats.window_peak,
      "elapsed", G_TYPE_UINT64, (guint64)MAX (stats.elapsed_ns, 0),
      "input-ended", G_TYPE_BOOLEAN, stats.input_ended, "added-latency",
      G_TYPE_UINT64, (guint64)MAX (stats.added_latency_ns, 0), nullptr);
  gpu_counts_to_structure (stats.output_gpu, "output-gpu-", s);
  gst_structure_take_value (s, "lanes", &lanes);
  if (!stats.streams.empty ()) {
    GValue streams = G_VALUE_INIT;
    gst_value_array_init (&streams, stats.streams.size ());
    for (const auto & st : stats.streams) {
      GValue v = G_VALUE_INIT;
      g_value_init (&v, GST_TYPE_STRUCTURE);
      g_value_take_boxed (&v, stream_stats_to_structure (st));
      gst_value_array_append_and_take_value (&streams, &v);
    }
    gst_structure_take_value (s, "streams", &streams);
  }
  return s;
}

GstMessage *
gst_gpufan_stats_message_new (GstObject * src, const gpufan::Session & session)
{
  return gst_message_new_element (src, gst_gpufan_stats_to_structure (session));
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanprotocol.h"

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

/* --- item fields on events --- */

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

/* A boxed copy of the fan-in's port of a Session (the pairing hands it
 * over, see gpufan/fanout-port.h), so that the query owns a reference for
 * as long as it lives, whichever thread answers it. */
using SessionRef = std::shared_ptr<gpufan::FanInPort>;

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
      G_TYPE_STRING, name, "fanout-element", GST_TYPE_ELEMENT, fanout, nullptr);
  g_free (name);
}

GstElement *
gst_gpufan_pair_query_get_fanout_element (GstQuery * query)
{
  const GstStructure * s = gst_query_get_structure (query);
  GstElement * fanout = nullptr;
  if (s)
    gst_structure_get (s, "fanout-element", GST_TYPE_ELEMENT, &fanout, nullptr);
  return fanout;
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

/* --- several input streams --- */

std::string
gst_gpufan_stream_pad_name (guint32 stream)
{
  return "sink_" + std::to_string (stream - 1);
}

gboolean
gst_gpufan_query_set_stream (GstQuery * query, guint32 stream)
{
  if (!gst_query_is_writable (query))
    return FALSE;
  gst_structure_set (gst_query_writable_structure (query),
      GST_GPUFAN_QUERY_STREAM_FIELD, G_TYPE_UINT, stream, nullptr);
  return TRUE;
}

guint32
gst_gpufan_query_take_stream (GstQuery * query)
{
  const GstStructure * s = gst_query_get_structure (query);
  guint stream = 0;
  if (!s || !gst_structure_get_uint (s, GST_GPUFAN_QUERY_STREAM_FIELD, &stream))
    return 0;
  if (gst_query_is_writable (query))
    gst_structure_remove_field (gst_query_writable_structure (query),
        GST_GPUFAN_QUERY_STREAM_FIELD);
  return stream;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The protocol between gpufanout and gpufanin: everything one element puts
 * on a buffer, event or query for the other to read. Nothing else passes
 * between them except the shared Session that the pairing hands over: the
 * fan-out holds its gpufan::FanOutPort and hands its gpufan::FanInPort to
 * each gpufanin in the pair query. A branch between them only has to forward what GStreamer elements
 * forward anyway (metas, serialized events in order with buffers,
 * non-serialized queries).
 *
 * Per lane, in the order the fan-out's lane worker sends them:
 *
 *  1. Pair query (downstream, non-serialized), before the lane's first item
 *     and after a relink or a new stream-start: "is a gpufanin at the end?".
 *     The fan-in's sink pad keeps the Session and claims the lane. A fan-in
 *     that gets data on an unpaired pad asks upstream instead, and the
 *     fan-out's src pad fills in the Session and lane.
 *  2. Items: a buffer carries a #GstGpuFanMeta, a GAP event the item fields
 *     (gst_gpufan_event_set_item). The fan-in puts both in the reorder
 *     window by seq; it strips the meta and fields before its output.
 *  3. Marker (custom downstream sticky), behind an item that had not come
 *     back when its push returned: when it reaches the fan-in, every earlier
 *     item of the lane that did not come back is proven dropped. Consumed by
 *     the fan-in.
 *  4. Chunk mode (chunk=frames|keyframes), around each chunk:
 *     - chunk start (custom downstream, serialized), then a force-key-unit
 *       event carrying the item fields, before the chunk's first buffer;
 *     - the drain: an EOS carrying the item fields, after its last buffer;
 *       what came out of the lane since the chunk start is the chunk's
 *       output;
 *     - a FLUSH_START/FLUSH_STOP pair carrying the item fields, which resets
 *       the branch once the Session has the chunk.
 *     The fan-in consumes all of them: none leaves it.
 *
 * Upstream: an upstream event from gpufanin's src_k goes up every lane with
 * GST_GPUFAN_EVENT_STREAM_FIELD set; gpufanout sends it upstream once, to
 * sink_k's peer alone. An upstream query from src_k (duration, position,
 * seeking...) goes up one lane at a time, as from the single src pad, with
 * GST_GPUFAN_QUERY_STREAM_FIELD set; gpufanout answers it from sink_k's
 * peer alone (the field taken off while it asks there), and FALSE when
 * sink_k is gone. gpufanin takes the field off the answered query.
 *
 * Several input streams: gpufanout's sink_k feeds stream k + 1 in the
 * Session and leaves on gpufanin's src_k. A stream's own serialized events
 * bypass the lanes: gpufanout attaches them to the Session's window as a
 * #GstGpuFanStreamEvent, and gpufanin pushes them on src_k in order with
 * the stream's frames.
 */
#pragma once

#include <gst/gst.h>

#include <memory>
#include <string>

#include "gpufan/payload.h"

namespace gpufan {
class FanInPort;
}

G_BEGIN_DECLS

/**
 * GstGpuFanMeta:
 * @session_id: the id of the #gpufan::Session that numbered the buffer
 * @seq: the item's sequence number (input order)
 * @lane: the lane it was dispatched to
 * @caps_epoch: how many CAPS events the fan-out had seen when it dispatched it
 *
 * Attached by gpufanout to every buffer it dispatches. Branch elements that
 * copy metas keep it; where a branch drops it, gpufanin falls back to the
 * lane's FIFO order and the PTS.
 */
typedef struct {
  GstMeta meta;
  guint64 session_id;
  guint64 seq;
  guint32 lane;
  guint32 caps_epoch;
} GstGpuFanMeta;

GType gst_gpufan_meta_api_get_type (void);
#define GST_GPUFAN_META_API_TYPE (gst_gpufan_meta_api_get_type ())
const GstMetaInfo * gst_gpufan_meta_get_info (void);

/* Buffers crossing nested fan-outs carry one meta per session: look up and
 * remove by session id. */
GstGpuFanMeta * gst_buffer_find_gpufan_meta (GstBuffer * buffer,
    guint64 session_id);
void gst_buffer_remove_gpufan_meta (GstBuffer * buffer, guint64 session_id);

GstGpuFanMeta * gst_buffer_add_gpufan_meta (GstBuffer * buffer,
    guint64 session_id, guint64 seq, guint32 lane, guint32 caps_epoch);

G_END_DECLS

/* Item fields: the same identification for events, which carry no meta
 * (GAP items, and a chunk's force-key-unit, drain and reset flush). */
void gst_gpufan_event_set_item (GstEvent * event, guint64 session_id,
    guint64 seq);
gboolean gst_gpufan_event_get_item (GstEvent * event, guint64 * session_id,
    guint64 * seq);
/* Returns @event without those fields (made writable if needed). */
GstEvent * gst_gpufan_event_clear_item (GstEvent * event);

/* Marker: see 3. above. Sticky, so that elements that drop buffers but
 * forward sticky events (valve drop-mode=forward-sticky-events) forward it
 * (the branch keeps serialized events in order with buffers). */
GstEvent * gst_gpufan_marker_new (guint64 session_id, guint lane, guint64 seq);
gboolean gst_gpufan_marker_parse (GstEvent * event, guint64 * session_id,
    guint * lane, guint64 * seq);

/* Chunk start of chunk @seq: see 4. above. @caps_epoch and @segment_epoch
 * say which caps and segment the chunk's output belongs to. */
GstEvent * gst_gpufan_chunk_start_new (guint64 session_id, guint lane,
    guint64 seq, guint32 caps_epoch, guint32 segment_epoch);
gboolean gst_gpufan_chunk_start_parse (GstEvent * event, guint64 * session_id,
    guint * lane, guint64 * seq, guint32 * caps_epoch, guint32 * segment_epoch);

/* Pair query (custom, non-serialized, both directions): see 1. above. It
 * owns a reference to the Session (the fan-in's port of it) for as long as
 * it lives. */
GstQuery *
gst_gpufan_pair_query_new (const std::shared_ptr<gpufan::FanInPort> * session,
    guint lane, GstElement * fanout);
/* The gpufanout that asked or answered: its name ("?" if none said), and
 * the element itself (a new reference, or NULL), in whose name gpufanin
 * posts the final statistics. */
void gst_gpufan_pair_query_set_fanout (GstQuery * query, GstElement * fanout);
gchar * gst_gpufan_pair_query_get_fanout (GstQuery * query);
GstElement * gst_gpufan_pair_query_get_fanout_element (GstQuery * query);
gboolean gst_gpufan_is_pair_query (GstQuery * query);
/* Reads the session and lane; FALSE if the query carries no session. */
gboolean gst_gpufan_pair_query_parse (GstQuery * query,
    std::shared_ptr<gpufan::FanInPort> * session, guint * lane);
void gst_gpufan_pair_query_set_session (GstQuery * query,
    const std::shared_ptr<gpufan::FanInPort> & session, guint lane);
void gst_gpufan_pair_query_set_claimed (GstQuery * query);
gboolean gst_gpufan_pair_query_claimed (GstQuery * query);
/* How many fan-out/fan-in pairs the query is inside of on its way: a pair
 * inside a branch forwards the query across itself (depth + 1 on entering,
 * - 1 on leaving) so that it reaches the outer pair's other end. */
guint gst_gpufan_pair_query_get_depth (GstQuery * query);
void gst_gpufan_pair_query_set_depth (GstQuery * query, guint depth);

/* Several input streams (gpufanout's sink_%u pads): stream ids in the
 * Session are the pad index + 1 (0 is the single `sink` pad's). */
inline guint32
gst_gpufan_stream_of_index (guint index)
{
  return index + 1;
}
/* "sink_<index>" for stream id @stream. */
std::string gst_gpufan_stream_pad_name (guint32 stream);
/* An upstream event from gpufanin's src_k goes up every lane; this field
 * (the stream id) tells gpufanout to send it to sink_k's upstream alone. */
#define GST_GPUFAN_EVENT_STREAM_FIELD "gpufan-stream"
/* The same for an upstream query from gpufanin's src_k, in the query's
 * structure: gpufanout answers it from sink_k's peer alone. */
#define GST_GPUFAN_QUERY_STREAM_FIELD "gpufan-stream"
/* Marks @query as stream @stream's; FALSE (unmarked) when the query is not
 * writable (it then goes up as from the single src pad). */
gboolean gst_gpufan_query_set_stream (GstQuery * query, guint32 stream);
/* The stream @query is marked with (0: none), the mark taken off. */
guint32 gst_gpufan_query_take_stream (GstQuery * query);

/* An event of one input stream, on its way from gpufanout's sink_%u pad
 * through the Session's window to gpufanin's src_%u pad
 * (Session::AttachStreamEvent). Owns a reference. */
struct GstGpuFanStreamEvent : public gpufan::Payload {
  GstEvent * event;
  explicit GstGpuFanStreamEvent (GstEvent * e) : event (e) {}
  GstGpuFanStreamEvent (const GstGpuFanStreamEvent &) = delete;
  GstGpuFanStreamEvent & operator= (const GstGpuFanStreamEvent &) = delete;
  ~GstGpuFanStreamEvent () override
  {
    if (event)
      gst_event_unref (event);
  }
};

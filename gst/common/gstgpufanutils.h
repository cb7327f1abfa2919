/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pieces shared by gpufanout and gpufanin: the buffer meta that carries an
 * item's sequence number through a branch, the query that pairs a fan-in pad
 * with its fan-out lane, and the statistics structure.
 */
#pragma once

#include <gst/gst.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "gpufan/fanin-port.h"

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_debug);

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

/* The same identification for GAP events, which carry no meta: fields in the
 * event's structure. */
void gst_gpufan_event_set_item (GstEvent * event, guint64 session_id,
    guint64 seq);
gboolean gst_gpufan_event_get_item (GstEvent * event, guint64 * session_id,
    guint64 * seq);
/* Returns @event without those fields (made writable if needed). */
GstEvent * gst_gpufan_event_clear_item (GstEvent * event);

/* Marker (custom downstream sticky event): pushed by a lane worker behind an
 * item that had not come back when its push returned. When it reaches the
 * fan-in, every earlier item of that lane that has not come back is proven
 * dropped (the branch keeps serialized events in order with buffers). Sticky,
 * so that elements that drop buffers but forward sticky events (valve
 * drop-mode=forward-sticky-events) forward it; the fan-in consumes it. */
GstEvent * gst_gpufan_marker_new (guint64 session_id, guint lane, guint64 seq);
gboolean gst_gpufan_marker_parse (GstEvent * event, guint64 * session_id,
    guint * lane, guint64 * seq);

/* Chunk start (custom downstream event, serialized): pushed by a lane worker
 * in chunk mode before the first buffer of chunk @seq. What the lane returns
 * after it, up to the chunk's drain (an EOS carrying the item fields of
 * gst_gpufan_event_set_item), is the chunk's output; the fan-in consumes it.
 * The FLUSH_START/FLUSH_STOP pair that resets the branch after the drain
 * carries those fields too, and so does the force-key-unit event before the
 * chunk's first buffer: the fan-in hides all three. */
GstEvent * gst_gpufan_chunk_start_new (guint64 session_id, guint lane,
    guint64 seq, guint32 caps_epoch, guint32 segment_epoch);
gboolean gst_gpufan_chunk_start_parse (GstEvent * event, guint64 * session_id,
    guint * lane, guint64 * seq, guint32 * caps_epoch, guint32 * segment_epoch);

/* Pairing query (custom, non-serialized, both directions):
 *  - downstream: gpufanout asks through lane @lane's branch "is a gpufanin at
 *    the end?"; the fan-in copies the session (its fan-in port, which the
 *    fan-out hands over here) and answers claimed=TRUE.
 *  - upstream: gpufanin asks "which fan-out lane feeds me?"; the fan-out's src
 *    pad fills in the session and the lane. */
GstQuery *
gst_gpufan_pair_query_new (const std::shared_ptr<gpufan::FanInPort> * session,
    guint lane, GstElement * fanout);
/* The name of the gpufanout that asked or answered ("?" if none said). */
void gst_gpufan_pair_query_set_fanout (GstQuery * query, GstElement * fanout);
gchar * gst_gpufan_pair_query_get_fanout (GstQuery * query);
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

/* The index for a new request pad `<prefix><index>`: the one in @name when it
 * is given (FALSE, with a warning on @element, when @name is not of that form
 * or its index is @taken), else the lowest free one. */
gboolean gst_gpufan_request_pad_index (GstElement * element,
    const gchar * prefix, const gchar * name,
    const std::function<bool (guint)> & taken, guint * index);

/* Remembers the last event seqnums seen (bounded): an event that comes once
 * per lane is forwarded once. Not thread-safe: the owner locks. */
class GstGpuFanSeqnumMemory {
public:
  /* TRUE if @seqnum was seen before; remembers it otherwise. */
  bool Seen (guint32 seqnum);
  void Clear () { seqnums_.clear (); }

private:
  static constexpr size_t kRemembered = 64;
  std::deque<guint32> seqnums_;
};

/* The `gpufan-stats` structure (see docs/elements.md). */
#define GST_GPUFAN_STATS_NAME "gpufan-stats"
/* @session's statistics, with the fan-out's per-lane fields (worker
 * thread, copies, host pool) that it set on the Session: the same from
 * either element. */
GstStructure * gst_gpufan_stats_to_structure (const gpufan::StatsView & session);
/* Why a stalled lane is stalled, for the stats and warnings (g_free). */
gchar * gst_gpufan_stall_reason (const gpufan::LaneStats & lane);
GstMessage * gst_gpufan_stats_message_new (GstObject * src,
    const gpufan::StatsView & session);

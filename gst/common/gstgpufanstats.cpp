/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanstats.h"

#include "gstgpufandevices.h"
#include "gstgpufanprotocol.h"

#include <string>
#include <vector>

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
      G_TYPE_UINT64, (guint64)MAX (st.max_wait_ns, 0), "latency",
      G_TYPE_UINT64, (guint64)MAX (st.latency_ns, 0), "max-latency",
      G_TYPE_UINT64, (guint64)MAX (st.max_latency_ns, 0), "fps", G_TYPE_DOUBLE,
      st.fps, nullptr);
}

/* Field @field of @s: an array of one structure per element of @items. */
template <typename Items, typename ToStructure>
static void
take_structure_array (GstStructure * s, const gchar * field,
    const Items & items, ToStructure to_structure)
{
  GValue array = G_VALUE_INIT;
  gst_value_array_init (&array, items.size ());
  for (const auto & item : items) {
    GValue v = G_VALUE_INIT;
    g_value_init (&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed (&v, to_structure (item));
    gst_value_array_append_and_take_value (&array, &v);
  }
  gst_structure_take_value (s, field, &array);
}

/* A few of each lane's figures again as flat fields (lane0-completed,
 * ...): `gst-launch-1.0 -m` prints the nested `lanes` array as one escaped
 * string, these as plain `name=(type)value` (see docs/elements.md). */
static void
lanes_to_flat_fields (const std::vector<gpufan::LaneStats> & lanes,
    GstStructure * s)
{
  for (const auto & l : lanes) {
    const std::string p = "lane" + std::to_string (l.lane) + "-";
    /* kind:index: no spaces, so -m prints it unescaped */
    const std::string device
        = std::string (gpufan::DeviceKindName (l.device.kind)) + ":"
        + std::to_string (l.device.index);
    gst_structure_set (s, (p + "device").c_str (), G_TYPE_STRING,
        device.c_str (), (p + "state").c_str (), G_TYPE_STRING,
        gpufan::LaneHealthName (l.state), (p + "dispatched").c_str (),
        G_TYPE_UINT64, l.dispatched, (p + "completed").c_str (), G_TYPE_UINT64,
        l.completed, (p + "dropped").c_str (), G_TYPE_UINT64, l.dropped,
        (p + "failed").c_str (), G_TYPE_UINT64, l.failed, (p + "fps").c_str (),
        G_TYPE_DOUBLE, l.fps, nullptr);
  }
}

/* With @is_final (a message's), the `final` field first. */
static GstStructure *
stats_to_structure (const gpufan::StatsView & session,
    const gboolean * is_final)
{
  const gpufan::SessionStats stats = session.Stats ();

  GstStructure * s = gst_structure_new_empty (GST_GPUFAN_STATS_NAME);
  if (is_final)
    gst_structure_set (s, "final", G_TYPE_BOOLEAN, *is_final, nullptr);
  gst_structure_set (s, "policy", G_TYPE_STRING,
      gpufan::PolicyName (stats.policy), "dispatched", G_TYPE_UINT64,
      stats.dispatched, "released", G_TYPE_UINT64, stats.released, "unmatched",
      G_TYPE_UINT64, stats.unmatched, "in-flight", G_TYPE_UINT, stats.in_flight,
      "max-in-flight", G_TYPE_UINT, stats.max_in_flight, "window-peak",
      G_TYPE_UINT, stats.window_peak, "elapsed", G_TYPE_UINT64,
      (guint64)MAX (stats.elapsed_ns, 0), "input-ended", G_TYPE_BOOLEAN,
      stats.input_ended, "added-latency", G_TYPE_UINT64,
      (guint64)MAX (stats.added_latency_ns, 0), nullptr);
  gpu_counts_to_structure (stats.output_gpu, "output-gpu-", s);
  /* before the array, so that -m shows the readable part first */
  lanes_to_flat_fields (stats.lanes, s);
  take_structure_array (s, "lanes", stats.lanes, lane_stats_to_structure);
  if (!stats.streams.empty ())
    take_structure_array (s, "streams", stats.streams,
        stream_stats_to_structure);
  return s;
}

GstStructure *
gst_gpufan_stats_to_structure (const gpufan::StatsView & session)
{
  return stats_to_structure (session, nullptr);
}

GstMessage *
gst_gpufan_stats_message_new (GstObject * src,
    const gpufan::StatsView & session, gboolean is_final)
{
  return gst_message_new_element (src, stats_to_structure (session, &is_final));
}

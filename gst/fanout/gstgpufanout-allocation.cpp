/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ALLOCATION answer: tee's aggregation over the lanes, plus the
 * NUMA-local host pool that spares the lanes their staging copies. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <map>
#include <optional>
#include <vector>

#include <gst/video/video.h>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* TRUE when @caps describe frames in system memory. */
gboolean
fanout::caps_in_host_memory (GstCaps * caps)
{
  if (!caps || gst_caps_is_any (caps) || gst_caps_is_empty (caps))
    return TRUE;
  for (guint i = 0; i < gst_caps_get_size (caps); i++) {
    GstCapsFeatures * f = gst_caps_get_features (caps, i);
    if (f && !gst_caps_features_is_any (f)
        && !gst_caps_features_is_equal (f,
            GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY))
      return FALSE;
  }
  return TRUE;
}

/* The host allocator of the node gpufan::ElectProposedPool elects among
 * the lanes' staging plans, or nullptr when no lane stages into a pool. */
static GstAllocator *
proposed_allocator (GstGpuFanOut * self)
{
  std::vector<gpufan::StagingPlan> plans;
  std::map<gint, GstAllocator *> by_node;
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  for (auto & kv : self->priv->lanes) {
    const LanePtr & lane = kv.second;
    std::lock_guard<gpufan::Mutex> lane_lk (lane->staging_lock);
    if (!lane->allocator)
      continue;
    plans.push_back (lane->staging);
    by_node.emplace (lane->staging.node, lane->allocator);
  }
  const std::optional<gint> node = gpufan::ElectProposedPool (plans);
  if (!node)
    return nullptr;
  return GST_ALLOCATOR (gst_object_ref (by_node.at (*node)));
}

/* Allocation: tee's aggregation over the lanes (largest size, largest
 * min-buffers, common metas), plus the buffers that can be in flight. */
gboolean
fanout::aggregate_allocation (GstGpuFanOut * self, GstQuery * query)
{
  GstCaps * caps;
  gboolean need_pool;
  gst_query_parse_allocation (query, &caps, &need_pool);

  GstAllocationParams params;
  gst_allocation_params_init (&params);
  guint size = 0, min_buffers = 0, answered = 0;

  for (const LanePtr & lane : snapshot_lanes (self)) {
    /* a failed lane's branch may be stuck: it takes no frames anyway */
    if (lane_failed (lane))
      continue;
    GstQuery * q = gst_query_new_allocation (caps, need_pool);
    if (!gst_pad_peer_query (lane->pad, q)) {
      GST_DEBUG_OBJECT (lane->pad, "no allocation answer from this lane");
      gst_query_unref (q);
      continue;
    }

    for (guint i = 0; i < gst_query_get_n_allocation_params (q); i++) {
      GstAllocationParams p;
      gst_query_parse_nth_allocation_param (q, i, nullptr, &p);
      params.align = MAX (params.align, p.align);
      params.prefix = MAX (params.prefix, p.prefix);
      params.padding = MAX (params.padding, p.padding);
    }
    if (gst_query_get_n_allocation_pools (q) > 0) {
      guint s, m;
      gst_query_parse_nth_allocation_pool (q, 0, nullptr, &s, &m, nullptr);
      size = MAX (size, s);
      min_buffers = MAX (min_buffers, m);
    }

    /* keep only the metas every lane supports */
    if (answered == 0) {
      for (guint i = 0; i < gst_query_get_n_allocation_metas (q); i++) {
        const GstStructure * mp;
        GType api = gst_query_parse_nth_allocation_meta (q, i, &mp);
        gst_query_add_allocation_meta (query, api, mp);
      }
    } else {
      for (guint i = 0; i < gst_query_get_n_allocation_metas (query);) {
        GType api = gst_query_parse_nth_allocation_meta (query, i, nullptr);
        if (!gst_query_find_allocation_meta (q, api, nullptr))
          gst_query_remove_nth_allocation_meta (query, i);
        else
          i++;
      }
    }
    answered++;
    gst_query_unref (q);
  }

  GstAllocator * allocator
      = caps_in_host_memory (caps) ? proposed_allocator (self) : nullptr;
  if (answered == 0 && !allocator)
    return TRUE; /* upstream uses its defaults */

  if (params.align || params.prefix || params.padding || allocator)
    gst_query_add_allocation_param (query, allocator, &params);

  GstVideoInfo info;
  if (caps && gst_video_info_from_caps (&info, caps))
    size = MAX (size, (guint)GST_VIDEO_INFO_SIZE (&info));
  if (size) {
    /* every buffer in flight is held by a lane queue or a branch (the bound
     * as it is now, before any lane was measured: lanes of microseconds may
     * later hold more, up to 4 x their queues; a pool of exactly this size
     * then only holds them back) */
    min_buffers += self->priv->session->EffectiveMaxInFlight ();
    /* upstream writes straight into the lanes' NUMA-local (pinned) memory,
     * so that no lane has to stage a copy */
    GstBufferPool * pool = (allocator && need_pool)
        ? gst_gpufan_host_buffer_pool_new (allocator, caps, size, min_buffers)
        : nullptr;
    gst_query_add_allocation_pool (query, pool, size, min_buffers, 0);
    if (pool)
      gst_object_unref (pool);
  }
  if (allocator)
    gst_object_unref (allocator);
  return TRUE;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy and staging enums of gpufanout's properties. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <vector>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* Built from the library's one table of policies (nicks, descriptions);
 * the values are gpufan::Policy's. */
GType
gst_gpufan_policy_get_type (void)
{
  static GType type = 0;

  if (g_once_init_enter (&type)) {
    const std::vector<gpufan::PolicyInfo> & policies = gpufan::Policies ();
    /* GLib keeps the table for the life of the process */
    GEnumValue * values = g_new0 (GEnumValue, policies.size () + 1);
    for (size_t i = 0; i < policies.size (); i++) {
      values[i].value = (gint)policies[i].policy;
      values[i].value_name = policies[i].description;
      values[i].value_nick = policies[i].nick;
    }
    GType t = g_enum_register_static ("GstGpuFanPolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

gpufan::Policy
fanout::policy_from_enum (gint value)
{
  for (const gpufan::PolicyInfo & p : gpufan::Policies ())
    if ((gint)p.policy == value)
      return p.policy;
  return gpufan::Policy::kAdaptive;
}

gint
fanout::policy_to_enum (gpufan::Policy policy)
{
  return (gint)policy;
}

GType
gst_gpufan_staging_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_STAGING_AUTO,
        "GPU lanes copy frames that are not in pinned memory of their NUMA "
        "node",
        "auto" },
    { GST_GPUFAN_STAGING_ALWAYS,
        "Every lane copies frames that are not in its NUMA node's pool",
        "always" },
    { GST_GPUFAN_STAGING_NEVER, "No lane copies frames", "never" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanStaging", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_gpufan_chunk_mode_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_CHUNK_FRAME,
        "Each buffer on its own, to any lane (stateless branches)", "frame" },
    { GST_GPUFAN_CHUNK_FRAMES,
        "Runs of chunk-frames buffers, each drained whole in one lane "
        "(encoders on raw video)",
        "frames" },
    { GST_GPUFAN_CHUNK_KEYFRAMES,
        "Runs cut at keyframes, of at least chunk-frames buffers, each "
        "drained whole in one lane (decoders, transcoders)",
        "keyframes" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanChunkMode", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_gpufan_lane_error_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_LANE_ERROR_FAIL,
        "A branch's error stops the stream (an ERROR, as any element's)",
        "fail" },
    { GST_GPUFAN_LANE_ERROR_DROP_LANE,
        "The lane leaves the stream until the next start; the frames it "
        "held are lost, the others go on in order",
        "drop-lane" },
    { GST_GPUFAN_LANE_ERROR_REPLAY,
        "The lane leaves the stream until the next start; the frames it "
        "held are sent again to the other lanes, none is lost",
        "replay" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanLaneError", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

GType
gst_gpufan_stall_action_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_STALL_SKIP,
        "The fan-in stops waiting for the stalled frame and goes on without "
        "it; the lane gets frames again once it answers",
        "skip" },
    { GST_GPUFAN_STALL_REPLAY,
        "The lane fails: the frames it held are sent again to the other "
        "lanes (it is out until the next start)",
        "replay" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanStallAction", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy and staging enums of gpufanout's properties. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

GType
gst_gpufan_policy_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_POLICY_ROUND_ROBIN,
        "Strict turn over the lanes (waits for the lane in turn)",
        "round-robin" },
    { GST_GPUFAN_POLICY_LEAST_LOADED, "Lane with the fewest buffers in flight",
        "least-loaded" },
    { GST_GPUFAN_POLICY_WEIGHTED,
        "Smooth weighted round-robin over the src pads' weight property",
        "weighted" },
    { GST_GPUFAN_POLICY_ADAPTIVE,
        "Earliest expected completion, learning each lane's speed",
        "adaptive" },
    { 0, nullptr, nullptr },
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanPolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

gpufan::Policy
fanout::policy_from_enum (gint value)
{
  switch (value) {
    case GST_GPUFAN_POLICY_ROUND_ROBIN:
      return gpufan::Policy::kRoundRobin;
    case GST_GPUFAN_POLICY_LEAST_LOADED:
      return gpufan::Policy::kLeastLoaded;
    case GST_GPUFAN_POLICY_WEIGHTED:
      return gpufan::Policy::kWeighted;
    default:
      return gpufan::Policy::kAdaptive;
  }
}

gint
fanout::policy_to_enum (gpufan::Policy policy)
{
  switch (policy) {
    case gpufan::Policy::kRoundRobin:
      return GST_GPUFAN_POLICY_ROUND_ROBIN;
    case gpufan::Policy::kLeastLoaded:
      return GST_GPUFAN_POLICY_LEAST_LOADED;
    case gpufan::Policy::kWeighted:
      return GST_GPUFAN_POLICY_WEIGHTED;
    case gpufan::Policy::kAdaptive:
      break;
  }
  return GST_GPUFAN_POLICY_ADAPTIVE;
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

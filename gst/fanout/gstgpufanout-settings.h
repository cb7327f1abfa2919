/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's settings: its property ids, defaults and enums, and the
 * values the properties hold (gstgpufanout-properties.cpp writes them). */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>

#include "gpufan/placement.h"
#include "gpufan/fanout-port.h"
#include "gpufan/staging.h"
#include "common/gstgpufandevices.h"
#include "common/gstgpufanhostmemory.h"

#define DEFAULT_POLICY ((gint)gpufan::Policy::kAdaptive)
#define DEFAULT_QUEUE_SIZE 4
#define DEFAULT_MAX_IN_FLIGHT 0
#define DEFAULT_STATS_INTERVAL 0
#define DEFAULT_METRICS_PORT 0
#define DEFAULT_WEIGHT 1.0
#define DEFAULT_DEVICES "auto"
#define DEFAULT_MIN_FREE_MEMORY 0
#define DEFAULT_MIN_COMPUTE_CAPABILITY ""
#define DEFAULT_REQUIRE_CODECS 0
#define DEFAULT_PAD_DEVICE -1
#define DEFAULT_HOST_POOL_SIZE GST_GPUFAN_DEFAULT_HOST_POOL_MIB
#define DEFAULT_STAGING GST_GPUFAN_STAGING_AUTO
#define DEFAULT_CHUNK GST_GPUFAN_CHUNK_FRAME
#define DEFAULT_CHUNK_FRAMES 30
#define DEFAULT_ON_LANE_ERROR GST_GPUFAN_LANE_ERROR_FAIL
#define DEFAULT_ON_STALL GST_GPUFAN_STALL_SKIP
/* A lane's worker-thread field until it is placed on a device whose CPUs
 * are known (then its task pool's binding) */
#define DEFAULT_WORKER_THREAD "default task pool (device CPUs unknown)"

/* GstGpuFanPolicy's values are gpufan::Policy's (gpufan::Policies()). */

/* GstGpuFanStaging's values are gpufan::StagingMode's. */
typedef enum {
  GST_GPUFAN_STAGING_AUTO = (gint)gpufan::StagingMode::kAuto,
  GST_GPUFAN_STAGING_ALWAYS = (gint)gpufan::StagingMode::kAlways,
  GST_GPUFAN_STAGING_NEVER = (gint)gpufan::StagingMode::kNever,
} GstGpuFanStaging;

#define GST_TYPE_GPUFAN_STAGING (gst_gpufan_staging_get_type ())
GType gst_gpufan_staging_get_type (void);

/* What goes to one lane at a time (the chunk property). */
typedef enum {
  GST_GPUFAN_CHUNK_FRAME,     /* each buffer on its own (stateless branches) */
  GST_GPUFAN_CHUNK_FRAMES,    /* runs of chunk-frames buffers */
  GST_GPUFAN_CHUNK_KEYFRAMES, /* runs cut at keyframes, >= chunk-frames */
} GstGpuFanChunkMode;

#define GST_TYPE_GPUFAN_CHUNK_MODE (gst_gpufan_chunk_mode_get_type ())
GType gst_gpufan_chunk_mode_get_type (void);

/* What a branch's error does (the on-lane-error property). */
typedef enum {
  GST_GPUFAN_LANE_ERROR_FAIL,      /* the stream fails, as a branch's error */
  GST_GPUFAN_LANE_ERROR_DROP_LANE, /* the lane leaves; its frames are lost */
  GST_GPUFAN_LANE_ERROR_REPLAY, /* the lane leaves; its frames go to others */
} GstGpuFanLaneError;

#define GST_TYPE_GPUFAN_LANE_ERROR (gst_gpufan_lane_error_get_type ())
GType gst_gpufan_lane_error_get_type (void);

/* What a stall does (the on-stall property). */
typedef enum {
  GST_GPUFAN_STALL_SKIP,   /* the stalled frame is given up */
  GST_GPUFAN_STALL_REPLAY, /* the lane fails; its frames go to others */
} GstGpuFanStallAction;

#define GST_TYPE_GPUFAN_STALL_ACTION (gst_gpufan_stall_action_get_type ())
GType gst_gpufan_stall_action_get_type (void);

namespace fanout {
gpufan::Policy policy_from_enum (gint value);
gint policy_to_enum (gpufan::Policy policy);
} // namespace fanout

namespace fanout {

/* What the streaming side works from: a copy of the properties that may
 * only change in NULL or READY (GST_PARAM_MUTABLE_READY), taken at
 * READY->PAUSED (take_settings_snapshot), so that the chain function, the
 * lanes' workers and the stall listener read them without a lock, and all
 * see the same mode for the whole run. */
struct StreamingSettings {
  gint chunk_mode = DEFAULT_CHUNK; /* GstGpuFanChunkMode */
  guint chunk_frames = DEFAULT_CHUNK_FRAMES;
};

/* The property values, under GstGpuFanOutPrivate::settings_lock. The
 * device settings are read when the lanes are placed; the streaming ones
 * are copied at READY->PAUSED. Properties that may change while PLAYING
 * are not here: the Session holds policy, queue-size and max-in-flight;
 * stats-interval, on-lane-error and on-stall stay atomics in the private
 * struct, read where they act. */
struct Settings {
  StreamingSettings streaming;
  std::string devices_text = DEFAULT_DEVICES;
  /* property values that did not parse, by property: reported at
   * NULL->READY */
  std::map<guint, std::string> settings_errors;
  gpufan::DeviceSpec device_spec;
  gpufan::PlacementHints hints;
  std::string min_compute_capability = DEFAULT_MIN_COMPUTE_CAPABILITY;
  guint require_codecs = DEFAULT_REQUIRE_CODECS;
  guint host_pool_mib = DEFAULT_HOST_POOL_SIZE;
  GstGpuFanStaging staging = DEFAULT_STAGING;
  /* the trace-file property ("": none; GPUFAN_TRACE then) */
  std::string trace_file;
  /* the metrics-port property (0: no metrics server) */
  guint metrics_port = DEFAULT_METRICS_PORT;
};

} // namespace fanout

enum {
  PROP_0,
  PROP_POLICY,
  PROP_QUEUE_SIZE,
  PROP_MAX_IN_FLIGHT,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_DEVICES,
  PROP_MIN_FREE_MEMORY,
  PROP_MIN_COMPUTE_CAPABILITY,
  PROP_REQUIRE_CODECS,
  PROP_HOST_POOL_SIZE,
  PROP_STAGING,
  PROP_CHUNK,
  PROP_CHUNK_FRAMES,
  PROP_ON_LANE_ERROR,
  PROP_ON_STALL,
  PROP_TRACE_FILE,
  PROP_METRICS_PORT,
};


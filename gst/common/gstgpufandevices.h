/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plugin's view of the machine's devices: discovered once per process,
 * with NUMA locality, and the glue between the fan-out's device settings
 * and libgpufan's placement. */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

#include "gpufan/device-registry.h"
#include "gpufan/device.h"
#include "gpufan/placement.h"

/* The devices of this machine (GPUs first, then CPU devices), discovered on
 * first use and kept for the life of the process: discovery initialises the
 * CUDA driver, which is slow. Thread-safe. */
const gpufan::DeviceRegistry & gst_gpufan_device_registry (void);

/* Why the registry has no GPU ("" when it has one): for the one warning a
 * fan-out with devices=auto posts when it runs CPU lanes. */
const std::string & gst_gpufan_no_gpu_reason (void);

/* Reads a GPU's free memory now (placement hint); throws on CUDA errors. */
guint64 gst_gpufan_device_free_memory (const gpufan::Device & device);

/* Binds the calling thread to @cpus through hwloc (GstGpuFanBindFunc). */
gboolean gst_gpufan_bind_thread (const std::vector<int> & cpus,
    std::string * why_not);

/* Parses "8.6" / "8" into a compute capability; FALSE on anything else
 * (gpufan::ParseComputeCapability). */
gboolean gst_gpufan_parse_compute_capability (const gchar * text, gint * major,
    gint * minor);

/* Codecs a placement hint can require (a GFlags type for gst-launch). */
typedef enum {
  GST_GPUFAN_CODEC_NVENC = (1 << 0),
  GST_GPUFAN_CODEC_NVDEC = (1 << 1),
} GstGpuFanCodecs;

#define GST_TYPE_GPUFAN_CODECS (gst_gpufan_codecs_get_type ())
GType gst_gpufan_codecs_get_type (void);

/* Adds the device's fields to a lane's statistics structure. */
void gst_gpufan_device_to_structure (const gpufan::Device & device,
    GstStructure * s);

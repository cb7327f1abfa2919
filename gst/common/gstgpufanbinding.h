/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Binding a lane's branch to the lane's GPU: which GPU an element runs on is
 * said three ways, and each is handled its own way.
 *   - fixed at registration (nvcodec's nvh264dec, nvh264enc and kin: a
 *     read-only `cuda-device-id`; nvh264device1dec is GPU 1's): an element
 *     fixed to another GPU is an error naming the factory to use instead;
 *   - a writable `gpu-id` (DeepStream's elements), left at its default: set
 *     to the lane's GPU; set by the user to another GPU: a warning;
 *   - a writable `cuda-device-id` (cudaupload, cudaconvertscale, ...) left
 *     at -1: the element asks for a `gst.cuda.context`, which gpufanout
 *     answers with the lane's, so it is left alone; set by the user to
 *     another GPU: a warning.
 * Used by gpufanout on the elements between each lane's src pad and
 * gpufanin, and by gpufanbin on each lane's branch before it starts. */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

/* The GPU @factory's elements are fixed to, or -1. */
gint gst_gpufan_fixed_cuda_device (GstElementFactory * factory);

/* The factory of @name's family (nvcodec's naming: "nvh264device1dec" is
 * the GPU 1 kin of "nvh264dec") registered for @gpu, or "". */
std::string gst_gpufan_factory_for_gpu (const std::string & name, gint gpu);

/* What binding @element to GPU @gpu found. */
struct GstGpuFanBinding {
  std::string error;   /* fixed to another GPU: the element cannot run here */
  std::string warning; /* the user chose another GPU: it runs there */
  std::string done;    /* what was set, for the debug log */
};

/* Binds @element to GPU @gpu (nothing for a CPU lane, @gpu < 0). An element
 * is bound once per GPU: a second call for the same GPU says nothing (an
 * error is told again). */
GstGpuFanBinding gst_gpufan_bind_element (GstElement * element, gint gpu);

/* The elements data from @src reaches, through bins and their ghost pads,
 * up to (not including) a gpufanin or gpufanout, in the order met; each
 * with a reference. At most a few hundred. @peer: the pad @src is being
 * linked to (in a link function, the pads are not peers yet). */
std::vector<GstElement *> gst_gpufan_elements_downstream (GstPad * src,
    GstPad * peer = nullptr);

/* Where the branch from @src ends, through bins: the gpufanin sink pads it
 * reaches (as "m:sink_0") in @fanin_pads, the sink elements it reaches (by
 * name) in @sinks. It goes no further than a gpufanin or a gpufanout. */
void gst_gpufan_branch_ends (GstPad * src,
    std::vector<std::string> * fanin_pads, std::vector<std::string> * sinks);

/* The CUDA device of the nearest elements upstream of @sink (through bins)
 * that have a `cuda-device-id`, the nearest on each path, named in @who:
 * their GPU when those bound to one agree, -1 when they all take any (a
 * writable one left at -1), -2 when there is none, -3 when they are bound
 * to several GPUs. */
gint gst_gpufan_upstream_cuda_device (GstPad * sink, std::string * who);

/* Every element inside @bin, recursively, each with a reference. */
std::vector<GstElement *> gst_gpufan_elements_in_bin (GstBin * bin);

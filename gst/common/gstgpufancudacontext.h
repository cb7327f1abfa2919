/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

#include <string>

/* Answers a `gst.cuda.context` context query with the context of CUDA device
 * @ordinal, so that stock nvcodec elements (cudaupload, cudascale, nvh264enc,
 * ...) bind to that device without `cuda-device-id` being set.
 *
 * The GstCudaContext wraps the device's primary context, retained through
 * libgpufan once per process and kept for the life of the process: branch
 * elements may hold the GstCudaContext beyond the fan-out's life. The
 * gstreamer-cuda-1.0 library is loaded at run time (its headers need the
 * CUDA toolkit's cuda.h, which a plain Debian machine lacks).
 *
 * Returns FALSE, with @why_not set, when the query is not for a CUDA context,
 * or when no context can be given (no driver, no such device, no
 * gstreamer-cuda-1.0). Thread-safe. */
gboolean gst_gpufan_answer_cuda_context_query (GstQuery * query, int ordinal,
    std::string * why_not);

/* TRUE when @query asks for a `gst.cuda.context`. */
gboolean gst_gpufan_is_cuda_context_query (GstQuery * query);

/* For a frame reaching a lane on GPU @ordinal: FALSE when @buffer is not in
 * CUDA memory (or gstreamer-cuda is not there). Else TRUE, with @why_not
 * empty when the frame is in the context the lanes of that GPU use (so it
 * is used in place), or saying why it is not (another GPU's memory, a
 * context upstream made for itself). */
gboolean gst_gpufan_cuda_frame_context (GstBuffer * buffer, int ordinal,
    std::string * why_not);

/* Frames in CUDA memory moved between GPUs (gpufanout's lanes):
 *
 * The GPU of @buffer's frame in CUDA memory, -1 when it is not in CUDA
 * memory (or gstreamer-cuda is not there). */
int gst_gpufan_cuda_frame_device (GstBuffer * buffer);

/* An active pool of at most @max_buffers frames of @caps in the lanes'
 * context of GPU @ordinal (GStreamer's GstCudaBufferPool); nullptr with
 * @why_not set. */
GstBufferPool * gst_gpufan_cuda_pool_new (int ordinal, GstCaps * caps,
    guint max_buffers, std::string * why_not);

/* Copies @src's frame (CUDA memory of GPU @from) into @dst (from a pool of
 * gst_gpufan_cuda_pool_new for GPU @to), with @src's metadata: device to
 * device when @host is nullptr (peer access on), else through the pinned
 * host memory @host, down on @from_stream (of GPU @from) and up on @stream
 * (of GPU @to); waited for. The bytes moved, or 0 with @error set. */
size_t gst_gpufan_cuda_copy_frame (GstBuffer * src, int from,
    void * from_stream, GstBuffer * dst, int to, void * stream,
    GstMemory * host, std::string * error);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstgpufancudacontext.h"

#include <gmodule.h>
#include <gst/video/video.h>

#include <map>
#include <memory>
#include <mutex>

#include "gpufan/cuda.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_cuda_context_debug);
#define GST_CAT_DEFAULT gst_gpufan_cuda_context_debug

#define CUDA_CONTEXT_TYPE "gst.cuda.context"

namespace {

/* From gst/cuda/gstcudacontext.h and gstcudautils.h (GStreamer 1.22):
 * CUcontext is a pointer and CUdevice an int. */
typedef GstObject * (*NewWrappedFunc) (gpointer cu_context, int cu_device);
typedef GstContext * (*NewGstContextFunc) (GstObject * cuda_context);
typedef gboolean (*IsCudaMemoryFunc) (GstMemory * mem);
typedef GstBufferPool * (*CudaBufferPoolNewFunc) (GstObject * cuda_context);
typedef void (*CudaMemorySyncFunc) (GstMemory * mem);

/* The start of GstCudaMemory (gst/cuda/gstcudamemory.h, GStreamer 1.22):
 * the memory's context, then the layout of the frame in it (pitched). */
struct CudaMemoryHead {
  GstMemory mem;
  GstObject * context; /* GstCudaContext */
  GstVideoInfo info;
};

/* gst/cuda/gstcudamemory.h: GST_MAP_CUDA, a map that gives the device
 * pointer. */
constexpr GstMapFlags kMapCuda = (GstMapFlags)(GST_MAP_FLAG_LAST << 1);

struct GstCudaLibrary {
  NewWrappedFunc new_wrapped = nullptr;
  NewGstContextFunc new_gst_context = nullptr;
  IsCudaMemoryFunc is_cuda_memory = nullptr;       /* optional */
  CudaBufferPoolNewFunc buffer_pool_new = nullptr; /* optional */
  /* GStreamer >= 1.24: waits for work pending on a memory's own stream */
  CudaMemorySyncFunc memory_sync = nullptr;
  std::string error;
};

const GstCudaLibrary &
gst_cuda_library ()
{
  static GstCudaLibrary lib;
  static std::once_flag once;
  std::call_once (once, [] {
    GModule * module
        = g_module_open ("libgstcuda-1.0.so.0", G_MODULE_BIND_LAZY);
    if (!module) {
      lib.error = std::string ("libgstcuda-1.0.so.0 not found (package "
                               "libgstreamer-plugins-bad1.0-0): ")
          + g_module_error ();
      return;
    }
    if (!g_module_symbol (module, "gst_cuda_context_new_wrapped",
            (gpointer *)&lib.new_wrapped)
        || !g_module_symbol (module, "gst_context_new_cuda_context",
            (gpointer *)&lib.new_gst_context)) {
      lib.new_wrapped = nullptr;
      lib.error = "libgstcuda-1.0.so.0 lacks gst_cuda_context_new_wrapped "
                  "(GStreamer < 1.22?)";
      g_module_close (module);
      return;
    }
    if (!g_module_symbol (module, "gst_is_cuda_memory",
            (gpointer *)&lib.is_cuda_memory)
        || !g_module_symbol (module, "gst_cuda_buffer_pool_new",
            (gpointer *)&lib.buffer_pool_new)) {
      lib.is_cuda_memory = nullptr;
      lib.buffer_pool_new = nullptr;
    }
    if (!g_module_symbol (module, "gst_cuda_memory_sync",
            (gpointer *)&lib.memory_sync))
      lib.memory_sync = nullptr;
    /* kept open: its GstCudaContext type lives as long as the process */
    g_module_make_resident (module);
  });
  return lib;
}

/* One GstCudaContext per device, for the life of the process. */
struct DeviceContext {
  std::shared_ptr<gpufan::cuda::PrimaryContext> primary;
  GstObject * gst_context = nullptr; /* GstCudaContext, owned */
};

std::mutex contexts_lock;
std::map<int, DeviceContext> contexts; /* under contexts_lock */

GstObject *
device_gst_cuda_context (int ordinal, std::string * why_not)
{
  const GstCudaLibrary & lib = gst_cuda_library ();
  if (!lib.new_wrapped) {
    *why_not = lib.error;
    return nullptr;
  }

  std::lock_guard<std::mutex> lk (contexts_lock);
  DeviceContext & entry = contexts[ordinal];
  if (entry.gst_context)
    return entry.gst_context;

  try {
    entry.primary = gpufan::cuda::PrimaryContext::Retain (ordinal);
  } catch (const std::exception & e) {
    contexts.erase (ordinal);
    *why_not = e.what ();
    return nullptr;
  }
  GstObject * ctx
      = lib.new_wrapped (entry.primary->handle (), entry.primary->device ());
  if (!ctx) {
    contexts.erase (ordinal);
    *why_not = "gst_cuda_context_new_wrapped failed for CUDA device "
        + std::to_string (ordinal);
    return nullptr;
  }
  gst_object_ref_sink (ctx);
  /* kept for the life of the process, by design: not a leak */
  GST_OBJECT_FLAG_SET (ctx, GST_OBJECT_FLAG_MAY_BE_LEAKED);
  entry.gst_context = ctx;
  GST_INFO ("GstCudaContext %" GST_PTR_FORMAT " for CUDA device %d", ctx,
      ordinal);
  return ctx;
}

} // namespace

gboolean
gst_gpufan_is_cuda_context_query (GstQuery * query)
{
  const gchar * type = nullptr;
  return GST_QUERY_TYPE (query) == GST_QUERY_CONTEXT
      && gst_query_parse_context_type (query, &type)
      && g_strcmp0 (type, CUDA_CONTEXT_TYPE) == 0;
}

gboolean
gst_gpufan_answer_cuda_context_query (GstQuery * query, int ordinal,
    std::string * why_not)
{
  static std::once_flag debug_once;
  std::call_once (debug_once, [] {
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_cuda_context_debug, "gpufancuda", 0,
        "gpufan CUDA contexts for the lanes");
  });

  if (!gst_gpufan_is_cuda_context_query (query)) {
    *why_not = "not a " CUDA_CONTEXT_TYPE " query";
    return FALSE;
  }
  GstObject * cuda_ctx = device_gst_cuda_context (ordinal, why_not);
  if (!cuda_ctx)
    return FALSE;

  GstContext * context = gst_cuda_library ().new_gst_context (cuda_ctx);
  gst_query_set_context (query, context);
  gst_context_unref (context);
  return TRUE;
}

/* The CUDA memory of a one-memory buffer, or nullptr. */
static CudaMemoryHead *
cuda_memory_of (GstBuffer * buffer)
{
  const GstCudaLibrary & lib = gst_cuda_library ();
  if (!lib.is_cuda_memory || gst_buffer_n_memory (buffer) != 1)
    return nullptr;
  GstMemory * mem = gst_buffer_peek_memory (buffer, 0);
  return lib.is_cuda_memory (mem) ? reinterpret_cast<CudaMemoryHead *> (mem)
                                  : nullptr;
}

int
gst_gpufan_cuda_frame_device (GstBuffer * buffer)
{
  CudaMemoryHead * mem = cuda_memory_of (buffer);
  if (!mem || !mem->context)
    return -1;
  guint device = 0;
  g_object_get (mem->context, "cuda-device-id", &device, nullptr);
  return (int)device;
}

gboolean
gst_gpufan_cuda_frame_context (GstBuffer * buffer, int ordinal,
    std::string * why_not)
{
  CudaMemoryHead * mem = cuda_memory_of (buffer);
  if (!mem)
    return FALSE;
  const int device = gst_gpufan_cuda_frame_device (buffer);
  GstObject * lanes = nullptr;
  {
    std::lock_guard<std::mutex> lk (contexts_lock);
    auto it = contexts.find (ordinal);
    if (it != contexts.end ())
      lanes = it->second.gst_context;
  }
  why_not->clear ();
  if (mem->context && mem->context == lanes)
    return TRUE;
  if (device != ordinal)
    *why_not = "they are in GPU " + std::to_string (device)
        + "'s memory and the lane is on GPU " + std::to_string (ordinal)
        + ": each is copied to the lane's GPU (gpu-copies-* in the "
          "statistics)";
  else
    *why_not = "they are in a CUDA context of GPU " + std::to_string (device)
        + " that upstream made for itself (it did not ask the fan-out for "
          "one, or was given one by the application), not in the lanes' "
          "context of that GPU: they cross between the contexts";
  return TRUE;
}

GstBufferPool *
gst_gpufan_cuda_pool_new (int ordinal, GstCaps * caps, guint max_buffers,
    std::string * why_not)
{
  const GstCudaLibrary & lib = gst_cuda_library ();
  if (!lib.buffer_pool_new) {
    *why_not
        = lib.error.empty () ? "libgstcuda-1.0 has no buffer pool" : lib.error;
    return nullptr;
  }
  GstVideoInfo info;
  if (!gst_video_info_from_caps (&info, caps)) {
    *why_not = "caps without a video format";
    return nullptr;
  }
  GstObject * context = device_gst_cuda_context (ordinal, why_not);
  if (!context)
    return nullptr;
  GstBufferPool * pool = lib.buffer_pool_new (context);
  GstStructure * config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, caps, (guint)info.size, 0,
      max_buffers);
  gst_buffer_pool_config_add_option (config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config (pool, config)
      || !gst_buffer_pool_set_active (pool, TRUE)) {
    *why_not = "the CUDA buffer pool of GPU " + std::to_string (ordinal)
        + " does not start";
    gst_object_unref (pool);
    return nullptr;
  }
  return pool;
}

/* @src's metadata on @dst, but for the video meta: @dst's pool gave it one
 * that describes its own (pitched) layout. */
static void
copy_metadata (GstBuffer * dst, GstBuffer * src)
{
  gst_buffer_copy_into (dst, src,
      (GstBufferCopyFlags)(GST_BUFFER_COPY_FLAGS | GST_BUFFER_COPY_TIMESTAMPS),
      0, -1);
  gst_buffer_foreach_meta (
      src,
      [] (GstBuffer * from, GstMeta ** meta, gpointer data) -> gboolean {
        const GstMetaInfo * info = (*meta)->info;
        /* as gst_buffer_copy_into: a meta about the memory stays with it */
        static const GQuark memory_tag
            = g_quark_from_static_string (GST_META_TAG_MEMORY_STR);
        if (info->api == GST_VIDEO_META_API_TYPE || !info->transform_func
            || gst_meta_api_type_has_tag (info->api, memory_tag))
          return TRUE;
        GstMetaTransformCopy copy = { FALSE, 0, (gsize)-1 };
        info->transform_func (GST_BUFFER_CAST (data), *meta, from,
            _gst_meta_transform_copy, &copy);
        return TRUE;
      },
      dst);
}

/* The planes of a copy from @from to @to, both frames of one format. */
static std::vector<gpufan::cuda::Plane2D>
planes_of (const CudaMemoryHead * from, guintptr from_ptr,
    const CudaMemoryHead * to, guintptr to_ptr)
{
  std::vector<gpufan::cuda::Plane2D> planes;
  const GstVideoInfo * info = &from->info;
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES (info); p++) {
    gint comps[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component (info->finfo, p, comps);
    gpufan::cuda::Plane2D plane;
    plane.src = from_ptr + GST_VIDEO_INFO_PLANE_OFFSET (info, p);
    plane.src_pitch = (size_t)GST_VIDEO_INFO_PLANE_STRIDE (info, p);
    plane.dst = to_ptr + GST_VIDEO_INFO_PLANE_OFFSET (&to->info, p);
    plane.dst_pitch = (size_t)GST_VIDEO_INFO_PLANE_STRIDE (&to->info, p);
    plane.width_bytes = (size_t)GST_VIDEO_INFO_COMP_WIDTH (info, comps[0])
        * (size_t)GST_VIDEO_INFO_COMP_PSTRIDE (info, comps[0]);
    plane.height = (size_t)GST_VIDEO_INFO_COMP_HEIGHT (info, comps[0]);
    planes.push_back (plane);
  }
  return planes;
}

size_t
gst_gpufan_cuda_copy_frame (GstBuffer * src, int from, void * from_stream,
    GstBuffer * dst, int to, void * stream, GstMemory * host,
    std::string * error)
{
  CudaMemoryHead * in = cuda_memory_of (src);
  CudaMemoryHead * out = cuda_memory_of (dst);
  if (!in || !out
      || GST_VIDEO_INFO_FORMAT (&in->info) != GST_VIDEO_INFO_FORMAT (&out->info)
      || GST_VIDEO_INFO_N_PLANES (&in->info)
          != GST_VIDEO_INFO_N_PLANES (&out->info)
      || GST_VIDEO_INFO_WIDTH (&in->info) != GST_VIDEO_INFO_WIDTH (&out->info)
      || GST_VIDEO_INFO_HEIGHT (&in->info)
          != GST_VIDEO_INFO_HEIGHT (&out->info)) {
    *error = "the frame and the pool's are not alike (format or size)";
    return 0;
  }
  for (guint c = 0; c < GST_VIDEO_INFO_N_COMPONENTS (&in->info); c++)
    if (GST_VIDEO_INFO_COMP_PSTRIDE (&in->info, c) <= 0) {
      *error = std::string ("no plane geometry for ")
          + GST_VIDEO_INFO_NAME (&in->info) + " (packed groups of pixels)";
      return 0;
    }
  /* its producer's work on it is done before another stream reads it */
  const GstCudaLibrary & lib = gst_cuda_library ();
  if (lib.memory_sync)
    lib.memory_sync (&in->mem);
  GstMapInfo src_map, dst_map, host_map;
  if (!gst_memory_map (&in->mem, &src_map,
          (GstMapFlags)(GST_MAP_READ | kMapCuda))) {
    *error = "cannot map the frame on its GPU";
    return 0;
  }
  if (!gst_memory_map (&out->mem, &dst_map,
          (GstMapFlags)(GST_MAP_WRITE | kMapCuda))) {
    gst_memory_unmap (&in->mem, &src_map);
    *error = "cannot map the lane's frame on its GPU";
    return 0;
  }
  const std::vector<gpufan::cuda::Plane2D> planes
      = planes_of (in, (guintptr)src_map.data, out, (guintptr)dst_map.data);
  const size_t bytes = gpufan::cuda::PlaneBytes (planes);
  try {
    if (!host) {
      gpufan::cuda::CopyPlanesOnDevice (to, stream, planes);
    } else if (gst_memory_map (host, &host_map, GST_MAP_WRITE)) {
      const bool fits = host_map.size >= bytes;
      if (fits)
        gpufan::cuda::CopyPlanesViaHost (from, from_stream, to, stream,
            host_map.data, planes);
      gst_memory_unmap (host, &host_map);
      if (!fits)
        *error = "the host buffer is too small";
    } else {
      *error = "cannot map the host buffer";
    }
  } catch (const std::exception & e) {
    *error = e.what ();
  }
  gst_memory_unmap (&out->mem, &dst_map);
  gst_memory_unmap (&in->mem, &src_map);
  if (!error->empty ())
    return 0;
  copy_metadata (dst, src);
  return bytes;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstgpufancudacontext.h"

#include <gmodule.h>

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

/* The start of GstCudaMemory (gst/cuda/gstcudamemory.h, GStreamer 1.22):
 * the memory's context follows the GstMemory. */
struct CudaMemoryHead {
  GstMemory mem;
  GstObject * context; /* GstCudaContext */
};

struct GstCudaLibrary {
  NewWrappedFunc new_wrapped = nullptr;
  NewGstContextFunc new_gst_context = nullptr;
  IsCudaMemoryFunc is_cuda_memory = nullptr; /* optional */
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
            (gpointer *)&lib.is_cuda_memory))
      lib.is_cuda_memory = nullptr;
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

gboolean
gst_gpufan_cuda_frame_context (GstBuffer * buffer, int ordinal,
    std::string * why_not)
{
  const GstCudaLibrary & lib = gst_cuda_library ();
  if (!lib.is_cuda_memory || gst_buffer_n_memory (buffer) == 0)
    return FALSE;
  GstMemory * mem = gst_buffer_peek_memory (buffer, 0);
  if (!lib.is_cuda_memory (mem))
    return FALSE;
  GstObject * context = reinterpret_cast<CudaMemoryHead *> (mem)->context;
  guint device = 0;
  if (context)
    g_object_get (context, "cuda-device-id", &device, nullptr);
  GstObject * lanes = nullptr;
  {
    std::lock_guard<std::mutex> lk (contexts_lock);
    auto it = contexts.find (ordinal);
    if (it != contexts.end ())
      lanes = it->second.gst_context;
  }
  why_not->clear ();
  if (context && context == lanes)
    return TRUE;
  if ((int)device != ordinal)
    *why_not = "they are in GPU " + std::to_string (device)
        + "'s memory and the lane is on GPU " + std::to_string (ordinal)
        + ": its elements read them across the GPUs or through the host";
  else
    *why_not = "they are in a CUDA context of GPU " + std::to_string (device)
        + " that upstream made for itself (it did not ask the fan-out for "
          "one, or was given one by the application), not in the lanes' "
          "context of that GPU: they cross between the contexts";
  return TRUE;
}

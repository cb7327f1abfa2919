/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin, chunk mode: what it holds of a chunk that is not the head.
 *
 * A lane whose chunk is not the head of the window returns its outputs
 * long before they may leave: they wait until every earlier chunk is out.
 * A branch whose outputs come from a bounded pool of its own (a decoder's
 * output surfaces, a converter's pool) stops once we hold the whole pool:
 * the lane would then wait for the head lane, and chunk-parallel work would
 * run one lane at a time. So such an output is replaced by a copy of our
 * own, and the branch's buffer goes back to its pool at once
 * (copy-held=auto). Outputs of the head chunk leave as they come and are
 * never copied, and neither are buffers of unbounded pools (GStreamer 1.22's
 * decoders make those when downstream proposes none).
 *
 * Tested by test-chunk-lanes with a decoder-like element whose pool is
 * bounded. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

GType
gst_gpufan_held_copy_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_HELD_COPY_AUTO,
        "Copy held outputs of bounded buffer pools (a decoder's surfaces)",
        "auto" },
    { GST_GPUFAN_HELD_COPY_ALWAYS, "Copy every held output", "always" },
    { GST_GPUFAN_HELD_COPY_NEVER,
        "Never copy: a branch with a bounded pool waits for the head",
        "never" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanHeldCopy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

/* Whether @buffer belongs to a pool that holds a bounded number of
 * buffers: holding many of them stops their maker. */
static bool
from_bounded_pool (GstBuffer * buffer)
{
  GstBufferPool * pool = buffer->pool;
  if (!pool)
    return false;
  GstStructure * config = gst_buffer_pool_get_config (pool);
  guint max_buffers = 0;
  const bool parsed = gst_buffer_pool_config_get_params (config, nullptr,
      nullptr, nullptr, &max_buffers);
  gst_structure_free (config);
  return parsed && max_buffers > 0;
}

GstMiniObject *
gst_gpufan_in_hold_chunk_output (GstGpuFanIn * self, GstPad * pad,
    GstMiniObject * obj)
{
  GstGpuFanInPrivate * priv = self->priv;
  if (!GST_IS_BUFFER (obj))
    return obj;
  const auto mode = (GstGpuFanHeldCopy) priv->copy_held.load ();
  if (mode == GST_GPUFAN_HELD_COPY_NEVER)
    return obj;
  GstBuffer * buffer = GST_BUFFER_CAST (obj);
  if (mode == GST_GPUFAN_HELD_COPY_AUTO && !from_bounded_pool (buffer))
    return obj;

  std::shared_ptr<gpufan::FanInPort> session;
  guint64 chunk_seq = 0;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end () || !it->second.paired || !it->second.chunk)
      return obj;
    session = it->second.session;
    chunk_seq = it->second.chunk_seq;
  }
  /* the head's outputs leave as they come (if it becomes the head right
   * after this, the copy was only not needed) */
  if (session->PendingHeadSeq () == chunk_seq)
    return obj;
  GstBuffer * copy = gst_buffer_copy_deep (buffer);
  if (!copy)
    return obj; /* held as it is: the lane may wait, nothing is lost */
  GST_LOG_OBJECT (pad, "chunk %" G_GUINT64_FORMAT " is not the head: holding "
      "a copy of %" GST_PTR_FORMAT, chunk_seq, buffer);
  gst_buffer_unref (buffer);
  return GST_MINI_OBJECT_CAST (copy);
}

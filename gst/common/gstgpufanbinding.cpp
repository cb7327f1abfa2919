/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Binding a lane's branch to the lane's GPU (see gstgpufanbinding.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbinding.h"

#include <deque>
#include <regex>
#include <set>

#include "fanin/gstgpufanin.h"
#include "fanout/gstgpufanout.h"

/* Elements a walk visits at most: a branch is a handful; this only ends a
 * walk through a pathological graph. */
static constexpr size_t kMaxBranchElements = 512;

gint
gst_gpufan_fixed_cuda_device (GstElementFactory * factory)
{
  GstPluginFeature * loaded
      = gst_plugin_feature_load (GST_PLUGIN_FEATURE (factory));
  if (!loaded)
    return -1;
  const GType type
      = gst_element_factory_get_element_type (GST_ELEMENT_FACTORY (loaded));
  gst_object_unref (loaded);
  if (type == G_TYPE_INVALID)
    return -1;
  GObjectClass * klass = G_OBJECT_CLASS (g_type_class_ref (type));
  GParamSpec * p = g_object_class_find_property (klass, "cuda-device-id");
  gint device = -1;
  if (p && !(p->flags & G_PARAM_WRITABLE)) {
    if (G_IS_PARAM_SPEC_UINT (p))
      device = (gint)G_PARAM_SPEC_UINT (p)->default_value;
    else if (G_IS_PARAM_SPEC_INT (p))
      device = G_PARAM_SPEC_INT (p)->default_value;
  }
  g_type_class_unref (klass);
  return device;
}

/* nvcodec's family name of a per-GPU factory: "nvh264device1dec" and
 * "nvh264dec" are both "nvh264dec". */
static std::string
factory_family (const std::string & name)
{
  static const std::regex device_part ("device[0-9]+");
  return std::regex_replace (name, device_part, "");
}

std::string
gst_gpufan_factory_for_gpu (const std::string & name, gint gpu)
{
  const std::string family = factory_family (name);
  GList * factories
      = gst_element_factory_list_get_elements (GST_ELEMENT_FACTORY_TYPE_ANY,
          GST_RANK_NONE);
  std::string found;
  for (GList * l = factories; l && found.empty (); l = l->next) {
    GstElementFactory * f = GST_ELEMENT_FACTORY (l->data);
    const std::string candidate = GST_OBJECT_NAME (f);
    if (factory_family (candidate) == family
        && gst_gpufan_fixed_cuda_device (f) == gpu)
      found = candidate;
  }
  gst_plugin_feature_list_free (factories);
  return found;
}

/* An integer property's value and default as gint64; false when @element has
 * no such writable integer property. */
static bool
writable_integer (GstElement * element, const char * name, gint64 * value,
    gint64 * default_value)
{
  GParamSpec * p
      = g_object_class_find_property (G_OBJECT_GET_CLASS (element), name);
  if (!p || !(p->flags & G_PARAM_WRITABLE) || !(p->flags & G_PARAM_READABLE))
    return false;
  GValue v = G_VALUE_INIT;
  g_value_init (&v, p->value_type);
  g_object_get_property (G_OBJECT (element), name, &v);
  bool ok = true;
  if (G_IS_PARAM_SPEC_INT (p)) {
    *value = g_value_get_int (&v);
    *default_value = G_PARAM_SPEC_INT (p)->default_value;
  } else if (G_IS_PARAM_SPEC_UINT (p)) {
    *value = g_value_get_uint (&v);
    *default_value = G_PARAM_SPEC_UINT (p)->default_value;
  } else {
    ok = false;
  }
  g_value_unset (&v);
  return ok;
}

/* Which GPU an element was bound to by us, + 1 (0: none yet). */
static GQuark
bound_quark (void)
{
  static GQuark quark = g_quark_from_static_string ("gpufan-bound-gpu");
  return quark;
}

static std::string
describe (GstElement * element)
{
  GstElementFactory * factory = gst_element_get_factory (element);
  const std::string name = GST_OBJECT_NAME (element);
  return factory ? name + " (" + GST_OBJECT_NAME (factory) + ")" : name;
}

GstGpuFanBinding
gst_gpufan_bind_element (GstElement * element, gint gpu)
{
  GstGpuFanBinding result;
  if (gpu < 0)
    return result; /* a CPU lane: any GPU is as far as any other */
  gpointer mark = GINT_TO_POINTER (gpu + 1);
  if (g_object_get_qdata (G_OBJECT (element), bound_quark ()) == mark)
    return result;

  const std::string who = describe (element);
  const std::string lane_gpu = "GPU " + std::to_string (gpu);
  GstElementFactory * factory = gst_element_get_factory (element);
  const gint fixed = factory ? gst_gpufan_fixed_cuda_device (factory) : -1;
  if (fixed >= 0) {
    if (fixed != gpu) {
      const std::string instead
          = gst_gpufan_factory_for_gpu (GST_OBJECT_NAME (factory), gpu);
      result.error = who + " runs on GPU " + std::to_string (fixed)
          + " only, and its lane is on " + lane_gpu
          + (instead.empty ()
                  ? ": no element of its family is registered for " + lane_gpu
                  : ": use " + instead + " in that lane");
    }
    /* not marked: it is an error again at the next try */
    return result;
  }
  g_object_set_qdata (G_OBJECT (element), bound_quark (), mark);

  gint64 value, default_value;
  if (writable_integer (element, "gpu-id", &value, &default_value)) {
    GST_OBJECT_LOCK (element);
    const bool started = GST_STATE (element) >= GST_STATE_PAUSED
        || GST_STATE_PENDING (element) >= GST_STATE_PAUSED;
    GST_OBJECT_UNLOCK (element);
    if (value == default_value && value != gpu && started) {
      /* DeepStream's elements read it when they start: too late */
      result.warning = who + " started on GPU " + std::to_string (value)
          + " before its lane (on " + lane_gpu
          + ") could set its gpu-id: link it before it starts, or set "
            "gpu-id="
          + std::to_string (gpu);
    } else if (value == default_value && value != gpu) {
      g_object_set (element, "gpu-id", gpu, nullptr);
      result.done = "set " + who + "'s gpu-id to " + std::to_string (gpu);
    } else if (value != gpu) {
      result.warning = who + " has gpu-id=" + std::to_string (value)
          + " but its lane is on " + lane_gpu + ": it runs on GPU "
          + std::to_string (value) + ", and its frames cross between the GPUs";
    }
  }
  if (writable_integer (element, "cuda-device-id", &value, &default_value)) {
    if (value == default_value)
      result.done += std::string (result.done.empty () ? "" : "; ") + who
          + " asks for a CUDA context and gets its lane's";
    else if (value != gpu)
      result.warning = who + " has cuda-device-id=" + std::to_string (value)
          + " but its lane is on " + lane_gpu + ": it runs on GPU "
          + std::to_string (value) + ", and its frames cross between the GPUs";
  }
  return result;
}

/* The pad of an element that @at (transfer full) leads to, through bins:
 * into a bin through its ghost pad's target, out of one through the ghost
 * pad whose internal pad is met, and on to that one's peer. Works both ways.
 * A reference, or nullptr at an unlinked end. */
static GstPad *
element_pad (GstPad * at)
{
  for (guint hops = 0; at && hops < kMaxBranchElements; hops++) {
    GstPad * next;
    if (GST_IS_GHOST_PAD (at)) { /* a bin's pad: go inside */
      next = gst_ghost_pad_get_target (GST_GHOST_PAD (at));
    } else if (GST_IS_PROXY_PAD (at)) { /* inside a bin's pad: go out */
      GstProxyPad * ghost = gst_proxy_pad_get_internal (GST_PROXY_PAD (at));
      next = ghost ? gst_pad_get_peer (GST_PAD (ghost)) : nullptr;
      if (ghost)
        gst_object_unref (ghost);
    } else {
      return at;
    }
    gst_object_unref (at);
    at = next;
  }
  if (at)
    gst_object_unref (at);
  return nullptr;
}

/* The elements met from @from on, away from its element, nearest first;
 * the first through @peer when given (inside a link function, before the
 * pads are peers), else through @from's peer. Past an element for which
 * @stop_at is true the walk goes no further on that path. The pads of a
 * gpufanin met (as "m:sink_0") go into @fanin_pads when given. */
static std::vector<GstElement *>
elements_along (GstPad * from, GstPad * peer = nullptr,
    bool (*stop_at) (GstElement *) = nullptr,
    std::vector<std::string> * fanin_pads = nullptr)
{
  const bool downstream = GST_PAD_IS_SRC (from);
  std::vector<GstElement *> found;
  std::set<GstElement *> seen;
  std::deque<GstPad *> to_follow{ GST_PAD (gst_object_ref (from)) };
  while (!to_follow.empty () && found.size () < kMaxBranchElements) {
    GstPad * pad = to_follow.front ();
    to_follow.pop_front ();
    GstPad * into
        = element_pad (pad == from && peer ? GST_PAD (gst_object_ref (peer))
                                           : gst_pad_get_peer (pad));
    gst_object_unref (pad);
    GstElement * element = into ? gst_pad_get_parent_element (into) : nullptr;
    if (element && fanin_pads && GST_IS_GPUFAN_IN (element))
      fanin_pads->push_back (std::string (GST_OBJECT_NAME (element)) + ":"
          + GST_OBJECT_NAME (into));
    g_clear_object (&into);
    if (!element)
      continue;
    if (GST_IS_GPUFAN_IN (element) || GST_IS_GPUFAN_OUT (element)
        || !seen.insert (element).second) {
      gst_object_unref (element);
      continue;
    }
    found.push_back (element);
    if (stop_at && stop_at (element))
      continue;
    GstIterator * it = downstream ? gst_element_iterate_src_pads (element)
                                  : gst_element_iterate_sink_pads (element);
    GValue item = G_VALUE_INIT;
    while (gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
      to_follow.push_back (GST_PAD (g_value_dup_object (&item)));
      g_value_reset (&item);
    }
    g_value_unset (&item);
    gst_iterator_free (it);
  }
  for (GstPad * pad : to_follow)
    gst_object_unref (pad);
  return found;
}

std::vector<GstElement *>
gst_gpufan_elements_downstream (GstPad * src, GstPad * peer)
{
  return elements_along (src, peer);
}

void
gst_gpufan_branch_ends (GstPad * src, std::vector<std::string> * fanin_pads,
    std::vector<std::string> * sinks)
{
  for (GstElement * element : elements_along (src, nullptr, nullptr,
          fanin_pads)) {
    if (GST_OBJECT_FLAG_IS_SET (element, GST_ELEMENT_FLAG_SINK))
      sinks->push_back (GST_OBJECT_NAME (element));
    gst_object_unref (element);
  }
}

static bool
has_cuda_device_id (GstElement * element)
{
  return g_object_class_find_property (G_OBJECT_GET_CLASS (element),
             "cuda-device-id")
      != nullptr;
}

gint
gst_gpufan_upstream_cuda_device (GstPad * sink, std::string * who)
{
  std::set<gint> devices; /* the GPUs upstream elements are bound to */
  bool any = false;       /* one takes any GPU (a writable -1) */
  /* the nearest CUDA element on each path: the ones that may ask us */
  for (GstElement * element :
      elements_along (sink, nullptr, has_cuda_device_id)) {
    if (has_cuda_device_id (element)) {
      gint64 value, default_value;
      gint device = -1;
      if (writable_integer (element, "cuda-device-id", &value, &default_value))
        device = (gint)value;
      else if (GstElementFactory * f = gst_element_get_factory (element))
        device = gst_gpufan_fixed_cuda_device (f);
      if (device >= 0 && devices.insert (device).second)
        *who += (who->empty () ? "" : ", ") + describe (element);
      any |= device < 0;
    }
    gst_object_unref (element);
  }
  if (devices.size () > 1)
    return -3; /* the asker cannot be told: no answer is safe */
  if (devices.size () == 1)
    return *devices.begin ();
  return any ? -1 : -2;
}

std::vector<GstElement *>
gst_gpufan_elements_in_bin (GstBin * bin)
{
  std::vector<GstElement *> found;
  GstIterator * it = gst_bin_iterate_recurse (bin);
  GValue item = G_VALUE_INIT;
  GstIteratorResult r;
  while ((r = gst_iterator_next (it, &item)) != GST_ITERATOR_DONE
      && r != GST_ITERATOR_ERROR) {
    if (r == GST_ITERATOR_RESYNC) {
      for (GstElement * e : found)
        gst_object_unref (e);
      found.clear ();
      gst_iterator_resync (it);
      continue;
    }
    found.push_back (GST_ELEMENT (g_value_dup_object (&item)));
    g_value_reset (&item);
  }
  g_value_unset (&item);
  gst_iterator_free (it);
  return found;
}

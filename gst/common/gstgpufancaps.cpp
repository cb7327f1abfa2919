/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufancaps.h"

/* A branch longer than this is not followed further. */
static const guint kMaxSteps = 256;

std::string
gst_gpufan_caps_text (const GstCaps * caps)
{
  if (!caps)
    return "no caps";
  gchar * text = gst_caps_to_string (caps);
  std::string out = text;
  g_free (text);
  const size_t max = 300;
  if (out.size () > max)
    out.replace (max, std::string::npos, "...");
  return out;
}

std::string
gst_gpufan_element_text (GstElement * element)
{
  GstElementFactory * factory = gst_element_get_factory (element);
  std::string out = GST_OBJECT_NAME (element);
  if (factory)
    out += std::string (" (") + GST_OBJECT_NAME (factory) + ")";
  return out;
}

/* The element sink pad data from @src reaches (a ref), through ghost pads
 * into and out of bins; nullptr at an unlinked end. */
static GstPad *
next_sink (GstPad * src)
{
  GstPad * pad = gst_pad_get_peer (src);
  for (guint i = 0; pad && i < kMaxSteps; i++) {
    GstPad * next = nullptr;
    if (GST_IS_GHOST_PAD (pad)) {
      /* into a bin */
      next = gst_ghost_pad_get_target (GST_GHOST_PAD (pad));
    } else if (GST_IS_PROXY_PAD (pad)) {
      /* out of a bin: the internal pad of its src ghost pad */
      GstProxyPad * ghost = gst_proxy_pad_get_internal (GST_PROXY_PAD (pad));
      if (ghost) {
        next = gst_pad_get_peer (GST_PAD (ghost));
        gst_object_unref (ghost);
      }
    } else {
      return pad;
    }
    gst_object_unref (pad);
    pad = next;
  }
  g_clear_object (&pad);
  return nullptr;
}

/* The real pad behind @pad (a ref): a ghost pad's target. */
static GstPad *
real_pad (GstPad * pad)
{
  GstPad * real = GST_PAD (gst_object_ref (pad));
  while (real && GST_IS_GHOST_PAD (real)) {
    GstPad * target = gst_ghost_pad_get_target (GST_GHOST_PAD (real));
    gst_object_unref (real);
    real = target;
  }
  return real;
}

/* @element's one src pad (a ref); nullptr when it has none or several. */
static GstPad *
only_src_pad (GstElement * element)
{
  GstPad * only = nullptr;
  guint count = 0;
  GST_OBJECT_LOCK (element);
  for (GList * l = element->srcpads; l; l = l->next, count++)
    only = GST_PAD (l->data);
  if (count == 1)
    gst_object_ref (only);
  GST_OBJECT_UNLOCK (element);
  return count == 1 ? only : nullptr;
}

/* What @element itself takes on @pad: its template caps, narrowed by a
 * `caps` property (capsfilter, and elements like it). */
static GstCaps *
own_caps (GstElement * element, GstPad * pad)
{
  GstCaps * caps = gst_pad_get_pad_template_caps (pad);
  GParamSpec * spec
      = g_object_class_find_property (G_OBJECT_GET_CLASS (element), "caps");
  if (spec && spec->value_type == GST_TYPE_CAPS
      && (spec->flags & G_PARAM_READABLE)) {
    GstCaps * property = nullptr;
    g_object_get (element, "caps", &property, nullptr);
    if (property) {
      GstCaps * both = gst_caps_intersect (caps, property);
      gst_caps_unref (caps);
      gst_caps_unref (property);
      caps = both;
    }
  }
  return caps;
}

GstElement *
gst_gpufan_link_refuser (GstPad * sink, GstCaps * offered, GstElement * stop,
    GstCaps ** takes)
{
  /* The elements that do not take @offered, up to the first that does (the
   * caps change there) or the end. The first of them that refuses the caps
   * itself is the one; if none does, the last one before an unlinked end,
   * or nothing (downstream of @stop). */
  GstElement * refuser = nullptr;
  GstElement * last = nullptr;
  bool itself = false;
  bool reached_stop = false;
  GstPad * pad = real_pad (sink);
  for (guint i = 0; pad && i < kMaxSteps; i++) {
    GstElement * element = gst_pad_get_parent_element (pad);
    if (!element || element == stop) {
      reached_stop = element != nullptr;
      g_clear_object (&element);
      break;
    }
    GstCaps * caps = gst_pad_query_caps (pad, nullptr);
    const bool fits = gst_caps_can_intersect (caps, offered);
    if (!fits) {
      gst_object_replace ((GstObject **)&last, GST_OBJECT (element));
      GstCaps * own = own_caps (element, pad);
      if (!itself && !gst_caps_can_intersect (own, offered)) {
        itself = true;
        refuser = GST_ELEMENT (gst_object_ref (element));
        if (takes)
          gst_caps_replace (takes, own);
      }
      gst_caps_unref (own);
    }
    gst_caps_unref (caps);
    GstPad * src = fits ? nullptr : only_src_pad (element);
    gst_object_unref (element);
    g_clear_object (&pad);
    if (fits)
      break;
    pad = src ? next_sink (src) : nullptr;
    g_clear_object (&src);
  }
  g_clear_object (&pad);
  if (!refuser && last && !reached_stop) {
    refuser = GST_ELEMENT (gst_object_ref (last));
    if (takes) {
      GstPad * in = gst_element_get_static_pad (last, "sink");
      if (in) {
        gst_caps_take (takes, gst_pad_query_caps (in, nullptr));
        gst_object_unref (in);
      }
    }
  }
  g_clear_object (&last);
  return refuser;
}

GstElement *
gst_gpufan_caps_refuser (GstPad * src, GstCaps ** offered)
{
  GstCaps * caps = gst_pad_get_current_caps (src);
  GstPad * out = GST_PAD (gst_object_ref (src));
  GstElement * refuser = nullptr;
  for (guint i = 0; caps && out && !refuser && i < kMaxSteps; i++) {
    GstPad * sink = next_sink (out);
    g_clear_object (&out);
    GstElement * element = sink ? gst_pad_get_parent_element (sink) : nullptr;
    if (!element) {
      g_clear_object (&sink);
      break;
    }
    GstCaps * held = gst_pad_get_current_caps (sink);
    gst_object_unref (sink);
    if (!held || !gst_caps_is_equal (held, caps)) {
      refuser = element;
    } else {
      out = only_src_pad (element);
      GstCaps * next = out ? gst_pad_get_current_caps (out) : nullptr;
      if (out && !next)
        refuser = GST_ELEMENT (gst_object_ref (element));
      else
        gst_caps_replace (&caps, next);
      g_clear_pointer (&next, gst_caps_unref);
      gst_object_unref (element);
    }
    g_clear_pointer (&held, gst_caps_unref);
  }
  g_clear_object (&out);
  if (refuser && offered)
    *offered = caps;
  else
    g_clear_pointer (&caps, gst_caps_unref);
  return refuser;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout as a GstChildProxy of its pads, as aggregators (compositor) do:
 * the pad properties (a lane's `weight` and `device` on src_%u, a stream's
 * `weight`, `max-in-flight` and `leaky` on sink_%u) can be set by name,
 * `f::src_0::weight` from code and `src_0::weight=3` in a gst-launch line,
 * where the parser sets them once the link requested the pad (the
 * child-added signal, emitted for every pad added). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-control.h"

static GObject *
child_by_name (GstChildProxy * proxy, const gchar * name)
{
  /* a reference, as the interface returns */
  return G_OBJECT (gst_element_get_static_pad (GST_ELEMENT (proxy), name));
}

static GObject *
child_by_index (GstChildProxy * proxy, guint index)
{
  GstElement * element = GST_ELEMENT (proxy);
  GObject * child = nullptr;
  GST_OBJECT_LOCK (element);
  GList * l = g_list_nth (element->pads, index);
  if (l)
    child = G_OBJECT (gst_object_ref (l->data));
  GST_OBJECT_UNLOCK (element);
  return child;
}

static guint
children_count (GstChildProxy * proxy)
{
  GstElement * element = GST_ELEMENT (proxy);
  GST_OBJECT_LOCK (element);
  const guint count = element->numpads;
  GST_OBJECT_UNLOCK (element);
  return count;
}

void
gst_gpufan_out_child_proxy_init (gpointer g_iface, gpointer)
{
  auto * iface = static_cast<GstChildProxyInterface *> (g_iface);
  iface->get_child_by_name = child_by_name;
  iface->get_child_by_index = child_by_index;
  iface->get_children_count = children_count;
}

static void
pad_added (GstElement * element, GstPad * pad)
{
  gst_child_proxy_child_added (GST_CHILD_PROXY (element), G_OBJECT (pad),
      GST_OBJECT_NAME (pad));
}

static void
pad_removed (GstElement * element, GstPad * pad)
{
  gst_child_proxy_child_removed (GST_CHILD_PROXY (element), G_OBJECT (pad),
      GST_OBJECT_NAME (pad));
}

void
gst_gpufan_out_install_child_proxy (GstGpuFanOutClass * klass)
{
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);
  element_class->pad_added = GST_DEBUG_FUNCPTR (pad_added);
  element_class->pad_removed = GST_DEBUG_FUNCPTR (pad_removed);
}

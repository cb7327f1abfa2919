/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lane-properties: one setting for the same property of every lane's branch
 * ("g::sigma=3.5, enc::bitrate=4000"), applied to each lane as it is built
 * (at READY, and when recovery builds one again) and to the running lanes
 * when the property changes. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include <string>
#include <utility>
#include <vector>

#include "common/gstgpufanbinding.h"

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

namespace {

/* The value of one setting as text, in the words the user wrote it with
 * where the parser kept them (a string), else as GStreamer writes it. */
std::string
value_text (const GValue * value)
{
  if (G_VALUE_HOLDS_STRING (value))
    return g_value_get_string (value) ? g_value_get_string (value) : "";
  gchar * text = gst_value_serialize (value);
  std::string out = text ? text : "";
  g_free (text);
  return out;
}

/* The objects a setting's path names in @lane: a child path as
 * gst_child_proxy_lookup takes it ("g::sigma"), or, when the first part
 * names no element of the lane, every element the lane made from the
 * factory of that name ("gaussianblur::sigma"). Refs, with the property's
 * spec each (the class's: not a ref). */
std::vector<std::pair<GObject *, GParamSpec *>>
targets_in_lane (GstElement * lane, const std::string & path)
{
  std::vector<std::pair<GObject *, GParamSpec *>> found;
  GObject * target = nullptr;
  GParamSpec * pspec = nullptr;
  if (gst_child_proxy_lookup (GST_CHILD_PROXY (lane), path.c_str (), &target,
          &pspec)) {
    found.emplace_back (target, pspec);
    return found;
  }
  const size_t sep = path.find ("::");
  if (sep == std::string::npos)
    return found;
  const std::string factory = path.substr (0, sep);
  const std::string rest = path.substr (sep + 2);
  for (GstElement * element : gst_gpufan_elements_in_bin (GST_BIN (lane))) {
    GstElementFactory * f = gst_element_get_factory (element);
    if (f && factory == GST_OBJECT_NAME (f)
        && gst_child_proxy_lookup (GST_CHILD_PROXY (lane),
            (std::string (GST_OBJECT_NAME (element)) + "::" + rest).c_str (),
            &target, &pspec))
      found.emplace_back (target, pspec);
    gst_object_unref (element);
  }
  return found;
}

/* Sets @text as the value of @pspec on @target; false with *error set when
 * the text is not a value of the property's type or range. */
bool
set_from_text (GObject * target, GParamSpec * pspec, const std::string & text,
    std::string * error)
{
  if (!(pspec->flags & G_PARAM_WRITABLE)
      || (pspec->flags & G_PARAM_CONSTRUCT_ONLY)) {
    *error = "the property is not writable";
    return false;
  }
  const GType type = G_TYPE_FUNDAMENTAL (pspec->value_type);
  const bool is_unsigned = type == G_TYPE_UINT || type == G_TYPE_UINT64
      || type == G_TYPE_ULONG || type == G_TYPE_UCHAR;
  /* GStreamer's parser reads "-5" as a huge unsigned number */
  if (is_unsigned && text.find_first_not_of (" \t") != std::string::npos
      && text[text.find_first_not_of (" \t")] == '-') {
    *error = "\"" + text + "\" is negative and the property is a "
        + g_type_name (pspec->value_type);
    return false;
  }
  GValue value = G_VALUE_INIT;
  g_value_init (&value, pspec->value_type);
  bool ok = gst_value_deserialize_with_pspec (&value, text.c_str (), pspec);
  if (!ok)
    *error = "\"" + text + "\" is not a " + g_type_name (pspec->value_type);
  else if (g_param_value_validate (pspec, &value)) {
    ok = false;
    *error = "\"" + text + "\" is out of the property's range";
  }
  if (ok)
    g_object_set_property (target, pspec->name, &value);
  g_value_unset (&value);
  return ok;
}

} // namespace

bool
fanbin::parse_lane_properties (const std::string & text,
    GstStructure ** settings, std::string * error)
{
  *settings = nullptr;
  if (text.find_first_not_of (" \t\r\n") == std::string::npos)
    return true;
  *settings = gst_structure_from_string (("lane-properties, " + text).c_str (),
      nullptr);
  if (!*settings)
    *error = "Bad lane-properties \"" + text + "\": write "
             "ELEMENT::PROPERTY=VALUE, separated by commas, e.g. "
             "lane-properties=\"g::sigma=3.5, enc::bitrate=4000\"";
  return *settings != nullptr;
}

bool
fanbin::apply_lane_properties (GstElement * lane,
    const GstStructure * settings, std::string * error)
{
  if (!settings)
    return true;
  const guint n = gst_structure_n_fields (settings);
  for (guint i = 0; i < n; i++) {
    const std::string path = gst_structure_nth_field_name (settings, i);
    const std::string text
        = value_text (gst_structure_get_value (settings, path.c_str ()));
    auto targets = targets_in_lane (lane, path);
    if (targets.empty ()) {
      *error = "lane-properties: " + path + " names nothing in "
          + GST_OBJECT_NAME (lane) + "'s branch: give the element a name in "
            "branch (\"gaussianblur name=g\", then g::sigma) or use its "
            "factory name (gaussianblur::sigma)";
      return false;
    }
    bool ok = true;
    for (auto & t : targets) {
      std::string why;
      if (ok && !set_from_text (t.first, t.second, text, &why)) {
        *error = "lane-properties: cannot set " + path + " in "
            + GST_OBJECT_NAME (lane) + ": " + why;
        ok = false;
      }
      g_object_unref (t.first);
    }
    if (!ok)
      return false;
    GST_DEBUG_OBJECT (lane, "%s = %s", path.c_str (), text.c_str ());
  }
  return true;
}

void
fanbin::apply_lane_properties_to_running (GstGpuFanBin * self)
{
  GST_OBJECT_LOCK (self);
  const std::string text = self->lane_properties ? self->lane_properties : "";
  GST_OBJECT_UNLOCK (self);

  std::vector<GstElement *> lanes;
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    if (self->branches)
      for (GstElement * lane : *self->branches)
        lanes.push_back (GST_ELEMENT (gst_object_ref (lane)));
  }
  GstStructure * settings = nullptr;
  std::string error;
  bool ok = parse_lane_properties (text, &settings, &error);
  for (GstElement * lane : lanes) {
    if (ok)
      ok = apply_lane_properties (lane, settings, &error);
    gst_object_unref (lane);
  }
  if (settings)
    gst_structure_free (settings);
  /* the running lanes keep what they had up to the bad setting */
  if (!ok)
    GST_ELEMENT_WARNING (self, CORE, NEGOTIATION, ("%s", error.c_str ()),
        (NULL));
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanbin: one lane's branch, made from the `branch` description for the
 * lane's device. Caps at its ends become capsfilters, an element fixed to
 * another GPU is swapped for its family's factory of the lane's GPU, the
 * elements are bound to that GPU, and the branch must have one unlinked
 * input and one unlinked output. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include <regex>
#include <string>
#include <vector>

#include "common/gstgpufanbinding.h"
#include "common/gstgpufancaps.h"

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

/* The branch description for a lane on GPU `gpu` (-1: a CPU lane): every
 * element fixed to another GPU is replaced by its family's factory for
 * `gpu`. false with *error when one has no such factory. */
static bool
bind_branch_to_device (const std::string & branch, gint gpu,
    std::string * bound, std::string * error)
{
  *bound = branch;
  /* Element names stand between the start, '!' and white space. */
  static const std::regex word ("[A-Za-z0-9_-]+");
  std::vector<std::string> names;
  for (std::sregex_iterator it (branch.begin (), branch.end (), word), end;
       it != end; ++it) {
    const size_t at = it->position ();
    const size_t stop = at + it->length ();
    const bool starts
        = at == 0 || branch[at - 1] == '!' || g_ascii_isspace (branch[at - 1]);
    const bool ends = stop == branch.size () || branch[stop] == '!'
        || g_ascii_isspace (branch[stop]);
    if (starts && ends)
      names.push_back (it->str ());
  }
  for (const std::string & name : names) {
    GstElementFactory * factory = gst_element_factory_find (name.c_str ());
    if (!factory)
      continue;
    const gint fixed = gst_gpufan_fixed_cuda_device (factory);
    gst_object_unref (factory);
    if (fixed < 0 || fixed == gpu)
      continue;
    if (gpu < 0) {
      *error = name + " runs on GPU " + std::to_string (fixed)
          + " only, and this lane is a CPU lane";
      return false;
    }
    const std::string replacement = gst_gpufan_factory_for_gpu (name, gpu);
    if (replacement.empty ()) {
      *error = name + " runs on GPU " + std::to_string (fixed)
          + " only, and no element of its family is registered for GPU "
          + std::to_string (gpu);
      return false;
    }
    const std::regex whole ("(^|[!\\s])" + name + "(?=$|[!\\s])");
    *bound = std::regex_replace (*bound, whole, "$1" + replacement);
  }
  return true;
}

/* In gst-launch syntax caps belong to a link between two elements: a branch
 * that starts or ends with caps ("videoscale ! video/x-raw,width=640")
 * would be read as an element named "video". Such an end becomes a
 * capsfilter. */
static std::string
caps_ends_as_capsfilters (const std::string & branch)
{
  std::vector<std::string> links (1);
  bool quoted = false;
  for (const char c : branch) {
    if (c == '"')
      quoted = !quoted;
    if (c == '!' && !quoted)
      links.emplace_back ();
    else
      links.back () += c;
  }
  static const std::regex caps ("^\\s*([A-Za-z]+/[^\\s!]+)\\s*$");
  std::smatch m;
  for (std::string * end : { &links.front (), &links.back () })
    if (std::regex_match (*end, m, caps)) {
      std::string text = m[1].str ();
      if (text.find ('"') == std::string::npos)
        *end = " capsfilter caps=\"" + text + "\" ";
    }
  std::string out;
  for (size_t i = 0; i < links.size (); i++)
    out += (i ? "!" : "") + links[i];
  return out;
}

bool
fanbin::branch_for_gpu (const std::string & branch, gint gpu,
    std::string * bound, std::string * error)
{
  return bind_branch_to_device (caps_ends_as_capsfilters (branch), gpu, bound,
      error);
}

/* Binds every element of a lane's branch to @gpu (what the description's
 * factories leave: `gpu-id`, elements inside bins); warnings are posted,
 * an element fixed to another GPU is an error. */
static bool
bind_lane_elements (GstGpuFanBin * self, GstElement * lane, gint gpu,
    std::string * error)
{
  bool ok = true;
  for (GstElement * element : gst_gpufan_elements_in_bin (GST_BIN (lane))) {
    const GstGpuFanBinding bound = gst_gpufan_bind_element (element, gpu);
    gst_object_unref (element);
    if (!bound.done.empty ())
      GST_INFO_OBJECT (self, "%s: %s", GST_OBJECT_NAME (lane),
          bound.done.c_str ());
    if (!bound.warning.empty ())
      GST_ELEMENT_WARNING (self, CORE, NEGOTIATION,
          ("%s", bound.warning.c_str ()), ("in %s", GST_OBJECT_NAME (lane)));
    if (!bound.error.empty () && ok) {
      *error = bound.error;
      ok = false;
    }
  }
  return ok;
}

/* Adds the pads of @bin's elements that are not linked, by direction. */
static void
count_unlinked_pads (GstBin * bin, guint * inputs, guint * outputs)
{
  for (GstElement * element : gst_gpufan_elements_in_bin (bin)) {
    GstIterator * it = gst_element_iterate_pads (element);
    GValue item = G_VALUE_INIT;
    while (gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
      GstPad * pad = GST_PAD (g_value_get_object (&item));
      if (!gst_pad_is_linked (pad))
        (*(GST_PAD_IS_SRC (pad) ? outputs : inputs))++;
      g_value_reset (&item);
    }
    g_value_unset (&item);
    gst_iterator_free (it);
    gst_object_unref (element);
  }
}

GstElement *
fanbin::make_lane_branch (GstGpuFanBin * self, const std::string & bound,
    guint lane_id, gint gpu, std::string * error)
{
  GError * err = nullptr;
  GstElement * lane = gst_parse_bin_from_description_full (bound.c_str (), TRUE,
      nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &err);
  if (!lane) {
    *error = std::string ("Bad branch description: ")
        + (err ? err->message : "unknown error");
    g_clear_error (&err);
    return nullptr;
  }
  GstPad * in = gst_element_get_static_pad (lane, "sink");
  GstPad * out = gst_element_get_static_pad (lane, "src");
  /* the bin's pads ghost one unlinked pad each way: any other is an input
   * or output more (a tee's second branch), whose frames would go nowhere */
  guint inputs = in ? 1 : 0, outputs = out ? 1 : 0;
  count_unlinked_pads (GST_BIN (lane), &inputs, &outputs);
  const bool ends = inputs == 1 && outputs == 1;
  auto count = [] (guint n, const char * what) {
    return n == 0 ? std::string ("no ") + what
                  : std::to_string (n) + " " + what + "s";
  };
  if (!ends) {
    std::string has;
    if (inputs != 1)
      has = count (inputs, "input");
    if (outputs != 1)
      has += (has.empty () ? "" : " and ") + count (outputs, "output");
    *error = "The branch needs one unlinked input and one unlinked output "
             "(it has "
        + has + ")";
  }
  g_clear_object (&in);
  g_clear_object (&out);
  if (!ends) {
    gst_object_unref (gst_object_ref_sink (lane));
    return nullptr;
  }
  gchar * name = g_strdup_printf ("lane%u", lane_id);
  gst_object_set_name (GST_OBJECT (lane), name);
  g_free (name);
  g_object_set_qdata (G_OBJECT (lane), lane_id_quark (),
      GUINT_TO_POINTER (lane_id + 1));
  /* before the branch starts: DeepStream's elements read gpu-id then */
  if (!bind_lane_elements (self, lane, gpu, error)) {
    gst_object_unref (gst_object_ref_sink (lane));
    return nullptr;
  }
  GST_OBJECT_LOCK (self);
  const std::string props = self->lane_properties ? self->lane_properties : "";
  GST_OBJECT_UNLOCK (self);
  GstStructure * settings = nullptr;
  const bool set = parse_lane_properties (props, &settings, error)
      && apply_lane_properties (lane, settings, error);
  if (settings)
    gst_structure_free (settings);
  if (!set) {
    gst_object_unref (gst_object_ref_sink (lane));
    return nullptr;
  }
  return lane;
}

/* The element behind @lane's ghost pad @name (a ref). */
static GstElement *
branch_end (GstElement * lane, const char * name)
{
  GstPad * ghost = gst_element_get_static_pad (lane, name);
  GstPad * target
      = ghost ? gst_ghost_pad_get_target (GST_GHOST_PAD (ghost)) : nullptr;
  GstElement * element = target ? gst_pad_get_parent_element (target) : nullptr;
  g_clear_object (&target);
  g_clear_object (&ghost);
  return element;
}

/* What the branch's output gives against what downstream of the bin takes. */
static std::string
output_caps_error (GstGpuFanBin * self, GstElement * lane,
    const std::string & which, GstPad * to_fanin)
{
  GstPad * out = gst_element_get_static_pad (lane, "src");
  GstCaps * gives = gst_pad_query_caps (out, nullptr);
  GstCaps * takes = gst_pad_query_caps (to_fanin, nullptr);
  GstElement * last = branch_end (lane, "src");
  const std::string text = which + " gives " + gst_gpufan_caps_text (gives)
      + " (from its last element, "
      + (last ? gst_gpufan_element_text (last) : std::string ("?"))
      + "), which downstream of " + GST_OBJECT_NAME (self)
      + " cannot take (it takes " + gst_gpufan_caps_text (takes)
      + "): end the branch with a converter (e.g. videoconvert) or with caps "
        "downstream takes";
  g_clear_object (&last);
  gst_caps_unref (gives);
  gst_caps_unref (takes);
  gst_object_unref (out);
  return text;
}

std::string
fanbin::link_caps_error (GstGpuFanBin * self, GstElement * lane,
    GstPad * from_fanout, GstPad * to_fanin, bool at_output)
{
  const std::string which
      = "Lane " + std::string (GST_OBJECT_NAME (lane) + 4) + "'s branch";
  GstPad * in = gst_element_get_static_pad (lane, "sink");
  GstCaps * offered = gst_pad_query_caps (from_fanout, nullptr);
  GstCaps * in_caps = gst_pad_query_caps (in, nullptr);
  /* The output is linked first: its failure may come from the input's
   * caps, which the branch passes through (a capsfilter at its start). */
  const bool input_fits = gst_caps_can_intersect (offered, in_caps);
  std::string text;
  GstCaps * takes = nullptr;
  GstElement * refuser = input_fits
      ? nullptr
      : gst_gpufan_link_refuser (in, offered, self->fanin, &takes);
  if (input_fits && at_output) {
    text = output_caps_error (self, lane, which, to_fanin);
  } else if (refuser) {
    text = which + " cannot take the caps " + GST_OBJECT_NAME (self)
        + " receives: " + gst_gpufan_element_text (refuser) + " refuses "
        + gst_gpufan_caps_text (offered) + " (it takes "
        + gst_gpufan_caps_text (takes)
        + "): put a converter (e.g. videoconvert) at the branch's start, or "
          "make upstream give caps it takes";
  } else {
    /* the branch passes the caps on, and downstream of the bin refuses them */
    text = which + " passes on " + gst_gpufan_caps_text (offered)
        + ", which downstream of " + GST_OBJECT_NAME (self)
        + " cannot take (it takes " + gst_gpufan_caps_text (in_caps)
        + "): put a converter (e.g. videoconvert) in the branch or after "
        + GST_OBJECT_NAME (self);
  }
  g_clear_object (&refuser);
  g_clear_pointer (&takes, gst_caps_unref);
  gst_caps_unref (in_caps);
  gst_caps_unref (offered);
  gst_object_unref (in);
  return text;
}

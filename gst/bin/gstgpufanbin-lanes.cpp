/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanbin: building and removing the lanes. At NULL->READY the bin
 * requests the lanes' pads, lets the fan-out place them on their devices,
 * and adds one branch per lane between the fan-out and the fan-in; at
 * READY->NULL it takes them out and gives the pads back. Recovery adds and
 * removes single lanes while streaming (gstgpufanbin-recovery.cpp). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gpufan/placement.h"
#include "common/gstgpufandevices.h"

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

/* Lanes to build: `lanes`, else what the fan-out's `devices` says. 0 with
 * *error set when `devices` does not parse. */
static guint
lane_count (GstGpuFanBin * self, guint lanes, std::string * error)
{
  gchar * text = nullptr;
  g_object_get (self->fanout, "devices", &text, nullptr);
  const std::string devices = text ? text : "";
  g_free (text);
  gpufan::DeviceSpec spec;
  const bool ok = gpufan::DeviceSpec::Parse (devices, &spec, error);
  if (!ok) {
    *error = "Bad devices setting: " + *error;
    return 0;
  }
  /* the fan-out would only name the lane's pad it cannot place */
  if (lanes > 0 && spec.mode == gpufan::DeviceSpec::Mode::kCpu
      && spec.cpu_lanes > 0 && lanes > spec.cpu_lanes) {
    *error = "lanes=" + std::to_string (lanes) + " asks for more lanes than "
        + "devices=" + devices + " allows (" + std::to_string (spec.cpu_lanes)
        + " CPU lanes): set lanes=" + std::to_string (spec.cpu_lanes)
        + " (or lanes=0, one per device), or devices=cpu:"
        + std::to_string (lanes);
    return 0;
  }
  if (lanes > 0)
    return lanes;
  const gpufan::DeviceRegistry & registry = gst_gpufan_device_registry ();
  const guint cpus = MAX (1u, (guint)registry.cpu_count ());
  switch (spec.mode) {
    case gpufan::DeviceSpec::Mode::kGpuList:
      return (guint)spec.gpus.size ();
    case gpufan::DeviceSpec::Mode::kCpu:
      return spec.cpu_lanes > 0 ? spec.cpu_lanes : cpus;
    case gpufan::DeviceSpec::Mode::kAuto:
    default:
      return registry.gpu_count () > 0 ? (guint)registry.gpu_count () : cpus;
  }
}

GQuark
fanbin::lane_id_quark (void)
{
  static GQuark quark = g_quark_from_static_string ("gpufanbin-lane-id");
  return quark;
}

gint
fanbin::placed_gpu (GstGpuFanBin * self, guint lane_id)
{
  GstStructure * stats = nullptr;
  g_object_get (self->fanout, "stats", &stats, nullptr);
  gint gpu = -1;
  const GValue * lanes = stats ? gst_structure_get_value (stats, "lanes") : 0;
  for (guint i = 0; lanes && GST_VALUE_HOLDS_ARRAY (lanes)
       && i < gst_value_array_get_size (lanes);
       i++) {
    const GstStructure * lane
        = gst_value_get_structure (gst_value_array_get_value (lanes, i));
    guint id = G_MAXUINT;
    gst_structure_get_uint (lane, "lane", &id);
    const gchar * kind = gst_structure_get_string (lane, "device-kind");
    if (id == lane_id && kind && g_str_equal (kind, "cuda"))
      gst_structure_get_int (lane, "device-index", &gpu);
  }
  if (stats)
    gst_structure_free (stats);
  return gpu;
}

void
fanbin::remove_lane (GstGpuFanBin * self, guint lane_id)
{
  GstElement * branch = nullptr;
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    auto & branches = *self->branches;
    auto it = std::find_if (branches.begin (), branches.end (),
        [lane_id] (GstElement * b) {
          return GPOINTER_TO_UINT (
                     g_object_get_qdata (G_OBJECT (b), lane_id_quark ()))
              == lane_id + 1;
        });
    if (it == branches.end ())
      return;
    branch = *it;
    branches.erase (it);
  }
  GstPad * out = gst_element_get_static_pad (branch, "src");
  GstPad * to_fanin = out ? gst_pad_get_peer (out) : nullptr;
  GstPad * in = gst_element_get_static_pad (branch, "sink");
  GstPad * from_fanout = in ? gst_pad_get_peer (in) : nullptr;
  gst_element_set_state (branch, GST_STATE_NULL);
  gst_bin_remove (GST_BIN (self), branch);
  if (from_fanout)
    gst_element_release_request_pad (self->fanout, from_fanout);
  if (to_fanin)
    gst_element_release_request_pad (self->fanin, to_fanin);
  for (GstPad * pad : { out, to_fanin, in, from_fanout })
    if (pad)
      gst_object_unref (pad);
}

void
fanbin::remove_lanes (GstGpuFanBin * self)
{
  std::vector<GstElement *> branches;
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    branches.swap (*self->branches);
  }
  for (GstElement * branch : branches) {
    gst_element_set_state (branch, GST_STATE_NULL);
    gst_bin_remove (GST_BIN (self), branch);
  }
  /* Our request pads, in the children's order of creation. */
  for (GstElement * child : { self->fanout, self->fanin }) {
    GList * pads = nullptr;
    GST_OBJECT_LOCK (child);
    for (GList * l = child->pads; l; l = l->next)
      if (GST_PAD_PAD_TEMPLATE (l->data)
          && GST_PAD_TEMPLATE_PRESENCE (GST_PAD_PAD_TEMPLATE (l->data))
              == GST_PAD_REQUEST)
        pads = g_list_prepend (pads, gst_object_ref (l->data));
    GST_OBJECT_UNLOCK (child);
    for (GList * l = pads; l; l = l->next)
      gst_element_release_request_pad (child, GST_PAD (l->data));
    g_list_free_full (pads, gst_object_unref);
  }
}

gboolean
fanbin::add_lane (GstGpuFanBin * self, GstElement * lane, GstPad * from_fanout,
    GstPad * to_fanin, bool sync_state, std::string * error)
{
  gst_bin_add (GST_BIN (self), lane);
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    self->branches->push_back (lane);
  }
  GstPad * in = gst_element_get_static_pad (lane, "sink");
  GstPad * out = gst_element_get_static_pad (lane, "src");
  GstPadLinkReturn ret = gst_pad_link (out, to_fanin);
  bool at_output = true;
  bool started = true;
  /* in the bin's state before the fan-out can push into it */
  if (ret == GST_PAD_LINK_OK && sync_state)
    started = gst_element_sync_state_with_parent (lane);
  if (ret == GST_PAD_LINK_OK && started) {
    ret = gst_pad_link (from_fanout, in);
    at_output = false;
  }
  gst_object_unref (in);
  gst_object_unref (out);
  if (ret == GST_PAD_LINK_NOFORMAT)
    *error = link_caps_error (self, lane, from_fanout, to_fanin, at_output);
  else if (!started)
    *error = std::string (GST_OBJECT_NAME (lane)) + "'s branch cannot start";
  else if (ret != GST_PAD_LINK_OK)
    *error = std::string ("Cannot link ") + GST_OBJECT_NAME (lane)
        + "'s branch (" + gst_pad_link_get_name (ret) + ")";
  return ret == GST_PAD_LINK_OK && started;
}

#define BRANCH_ERROR(self, text, detail)                                       \
  GST_ELEMENT_ERROR (self, CORE, PAD, ("%s", (text).c_str ()),                 \
      ("%s", (detail).c_str ()))

gboolean
fanbin::build_lanes (GstGpuFanBin * self)
{
  GST_OBJECT_LOCK (self);
  const std::string branch = self->branch ? self->branch : "";
  const guint wanted = self->lanes;
  GST_OBJECT_UNLOCK (self);

  if (branch.find_first_not_of (" \t\r\n") == std::string::npos) {
    GST_ELEMENT_ERROR (self, CORE, STATE_CHANGE,
        ("gpufanbin has no branch: set branch to a gst-launch description of "
         "one lane, e.g. branch=\"videoconvert ! gaussianblur\""),
        (NULL));
    return FALSE;
  }
  std::string error;
  const guint count = lane_count (self, wanted, &error);
  if (count == 0 || count > fanbin::kMaxLanes) {
    const std::string text = count == 0
        ? error
        : "gpufanbin makes at most " + std::to_string (fanbin::kMaxLanes) + " lanes";
    GST_ELEMENT_ERROR (self, CORE, STATE_CHANGE, ("%s", text.c_str ()), (NULL));
    return FALSE;
  }

  /* The lanes' pads first: the fan-out places each lane on its device when
   * it goes to READY, and the branches are made for those devices. */
  std::vector<GstPad *> outs, ins;
  for (guint i = 0; i < count; i++) {
    outs.push_back (gst_element_request_pad_simple (self->fanout, "src_%u"));
    ins.push_back (gst_element_request_pad_simple (self->fanin, "sink_%u"));
  }
  gboolean ok = gst_element_set_state (self->fanout, GST_STATE_READY)
      != GST_STATE_CHANGE_FAILURE; /* the fan-out posted why */

  for (guint i = 0; ok && i < count; i++) {
    guint lane_id = 0;
    g_object_get (outs[i], "lane", &lane_id, nullptr);
    const gint gpu = fanbin::placed_gpu (self, lane_id);
    std::string bound;
    if (!fanbin::branch_for_gpu (branch, gpu, &bound, &error)) {
      BRANCH_ERROR (self,
          "Lane " + std::to_string (i) + " ("
              + (gpu >= 0 ? "GPU " + std::to_string (gpu) : std::string ("CPU"))
              + "): " + error,
          "branch=\"" + branch + "\"");
      ok = FALSE;
      break;
    }
    if (bound != branch)
      GST_DEBUG_OBJECT (self, "lane %u on GPU %d runs \"%s\"", i, gpu,
          bound.c_str ());
    GstElement * lane
        = fanbin::make_lane_branch (self, bound, lane_id, gpu, &error);
    if (!lane) {
      BRANCH_ERROR (self, error, "branch=\"" + branch + "\"");
      ok = FALSE;
      break;
    }
    if (!fanbin::add_lane (self, lane, outs[i], ins[i], false, &error)) {
      BRANCH_ERROR (self, error, "branch=\"" + branch + "\"");
      ok = FALSE;
    }
  }
  for (GstPad * pad : outs)
    gst_object_unref (pad);
  for (GstPad * pad : ins)
    gst_object_unref (pad);
  if (ok)
    GST_INFO_OBJECT (self, "%u lanes of \"%s\"", count, branch.c_str ());
  return ok;
}

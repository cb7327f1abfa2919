/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pairing probe: before a lane's first item, gpufanout asks through
 * the branch whether a gpufanin is at its end; the fan-in claims the lane. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <string>
#include <vector>

#include "common/gstgpufanbinding.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* A joining lane's branch is probed at least every so many dispatches. */
static constexpr guint kMaxJoiningProbeInterval = 32;

void
fanout::request_probe (GstGpuFanOut * self, const LanePtr & lane)
{
  lane->needs_probe = true;
  self->priv->probe_pending = true;
  self->priv->reset_joining_probe = true;
}

/* A joining lane gets items only once a fan-in claims it, which it does
 * when the pairing probe through its branch reaches one: probe its branch
 * again now and then (the branch may be completed anywhere along it, so no
 * link of ours announces that). */
void
fanout::reprobe_joining_lanes (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (priv->reset_joining_probe.exchange (false)) {
    priv->joining_probe_interval = 1;
    priv->dispatches_since_joining_probe = 0;
  }
  if (++priv->dispatches_since_joining_probe < priv->joining_probe_interval)
    return;
  priv->dispatches_since_joining_probe = 0;
  priv->joining_probe_interval
      = MIN (priv->joining_probe_interval * 2, kMaxJoiningProbeInterval);
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load () && !priv->session->IsLaneClaimed (lane->id)) {
      lane->needs_probe = true;
      priv->probe_pending = true;
    }
  }
}

/* A probed lane whose branch cannot work, whatever comes later: it reaches
 * several gpufanin sink pads (a tee), or it ends at a sink beside the
 * fan-in that claimed other lanes (a joining lane gets no items while a
 * claimed one can take them: that sink would never preroll). Posts the
 * error, naming the lane's pad, and returns FALSE. A branch that ends
 * nowhere yet stays joining: it may be completed while playing. */
static gboolean
check_lane_branch (GstGpuFanOut * self, const LanePtr & lane, bool claimed,
    bool others_claimed)
{
  std::vector<std::string> fanin_pads, sinks;
  gst_gpufan_branch_ends (lane->pad, &fanin_pads, &sinks);
  auto joined = [] (const std::vector<std::string> & names) {
    std::string all;
    for (const std::string & name : names)
      all += (all.empty () ? "" : ", ") + name;
    return all;
  };
  if (fanin_pads.size () > 1) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Lane %u's branch (%s:%s) ends at %u gpufanin sink pads (%s): a "
         "lane's branch must have one output; give each output its own lane "
         "(a src pad of the fan-out)",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad),
            (guint)fanin_pads.size (), joined (fanin_pads).c_str ()),
        ("a tee in the branch? each sink pad of a gpufanin takes one lane"));
    return FALSE;
  }
  if (!claimed && others_claimed && fanin_pads.empty () && !sinks.empty ()) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Lane %u's branch (%s:%s) ends at %s, not at the gpufanin that the "
         "other lanes reach: link it to a sink pad of that gpufanin, or "
         "release %s:%s",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), joined (sinks).c_str (),
            GST_DEBUG_PAD_NAME (lane->pad)),
        ("a lane no gpufanin claims gets no frames while others can take "
         "them, so its sink would never preroll"));
    return FALSE;
  }
  return TRUE;
}

/* Before a lane's first item (and after a relink or a new stream), ask its
 * branch whether a gpufanin is at the end; the fan-in claims the lane. */
gboolean
fanout::probe_lanes (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;

  /* a plain load first: the exchange writes the line, for every buffer */
  if (!priv->probe_pending.load () || !priv->probe_pending.exchange (false))
    return TRUE;
  gboolean bound = TRUE;
  std::vector<LanePtr> probed;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (!lane->needs_probe.exchange (false))
      continue;
    probed.push_back (lane);
    if (priv->session->IsLaneClaimed (lane->id))
      continue;
    GstQuery * query = gst_gpufan_pair_query_new (&priv->session->fanin_port (), lane->id,
        GST_ELEMENT (self));
    gboolean answered = gst_pad_peer_query (lane->pad, query);
    const bool claimed = answered && gst_gpufan_pair_query_claimed (query);
    lane->serial_reset = claimed && gst_gpufan_pair_query_serial_reset (query);
    GST_DEBUG_OBJECT (lane->pad, "pairing probe: %s",
        claimed ? "claimed by a gpufanin" : "no gpufanin downstream");
    gst_query_unref (query);
    /* the branch is whole now: a lane linked while streaming is bound
     * before its first item (one bound at the start says nothing again) */
    if (claimed && bound)
      bound = bind_lane_branch (self, lane);
  }
  /* after every probe: whether other lanes are claimed is known now */
  bool any_claimed = false;
  for (const LanePtr & lane : snapshot_lanes (self))
    any_claimed |= priv->session->IsLaneClaimed (lane->id);
  for (const LanePtr & lane : probed) {
    if (!bound)
      break;
    const bool claimed = priv->session->IsLaneClaimed (lane->id);
    bound = check_lane_branch (self, lane, claimed, any_claimed);
  }
  return bound;
}

/* A pairing probe of an outer fan-out enters our pair: it crosses it through
 * one lane (our fan-in passes it on with the depth back down). */
gboolean
fanout::forward_pair_query_downstream (GstGpuFanOut * self, GstQuery * query)
{
  gst_gpufan_pair_query_set_depth (query,
      gst_gpufan_pair_query_get_depth (query) + 1);
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load ())
      return gst_pad_peer_query (lane->pad, query);
  }
  return FALSE;
}

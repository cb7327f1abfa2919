/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanbin's internals, shared by its source files:
 *   gstgpufanbin.cpp            the element: properties (its own and its
 *                               children's), states, lane errors
 *   gstgpufanbin-lanes.cpp      building and removing the lanes
 *   gstgpufanbin-branch.cpp     one lane's branch, made for its device
 *   gstgpufanbin-recovery.cpp   a failed lane's branch built again
 *                               (lane-restart-delay)
 *   gstgpufanbin-laneprops.cpp  lane-properties: the same setting on
 *                               every lane
 * It reaches the fan-out and fan-in through their public interface only
 * (properties, pads, gpufanout's action signals). */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

#include "gpufan/mutex.h"
#include "gstgpufanbin.h"

GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_bin_debug);

namespace fanbin {
struct Recovery;
}

struct _GstGpuFanBin {
  GstBin parent;

  GstElement * fanout;
  GstElement * fanin;

  /* Guarded by the object lock. */
  gchar * branch;
  guint lanes;
  guint64 restart_delay_ns; /* lane-restart-delay */
  gchar * lane_properties;  /* lane-properties, as the user wrote it */

  /* The built lanes, between NULL->READY and READY->NULL: built by the
   * state change, and by recovery while streaming. */
  gpufan::Mutex branches_lock;
  std::vector<GstElement *> * branches;

  fanbin::Recovery * recovery;
};

namespace fanbin {

/* The most lanes the bin builds (the `lanes` property's maximum). */
constexpr guint kMaxLanes = 64;

/* Lanes (gstgpufanbin-lanes.cpp) */
/* NULL->READY: the lanes' pads, the fan-out to READY (it places the lanes),
 * one branch per lane; FALSE with an ERROR posted if a step failed. */
gboolean build_lanes (GstGpuFanBin * self);
/* READY->NULL (or a failed NULL->READY): every branch out of the bin, the
 * children's request pads given back. */
void remove_lanes (GstGpuFanBin * self);
/* Marks a lane's branch bin with its lane id + 1 (0: not a lane). */
GQuark lane_id_quark (void);
/* The GPU the fan-out placed lane @lane_id on, -1 for a CPU lane. */
gint placed_gpu (GstGpuFanBin * self, guint lane_id);
/* Adds @lane to the bin and links it, downstream first, and with
 * @sync_state in the bin's state before the fan-out links to it; FALSE if
 * a step failed (the lane stays in the bin, removed with the others), with
 * *error saying what to do (a caps mismatch names the caps and the element
 * that refused them). */
gboolean add_lane (GstGpuFanBin * self, GstElement * lane, GstPad * from_fanout,
    GstPad * to_fanin, bool sync_state, std::string * error);

/* Takes lane @lane_id's branch out of the bin and gives its pads back
 * (READY: no data flows). */
void remove_lane (GstGpuFanBin * self, guint lane_id);

/* Branches (gstgpufanbin-branch.cpp) */
/* @branch for a lane on @gpu (-1: CPU): caps at its ends as capsfilters,
 * elements fixed to another GPU swapped for that GPU's factory. */
bool branch_for_gpu (const std::string & branch, gint gpu, std::string * bound,
    std::string * error);
/* A fresh instance of @bound, named and marked as lane @lane_id's, its
 * elements bound to @gpu (-1: a CPU lane; gstgpufanbinding.h), or nullptr
 * with *error set. */
GstElement * make_lane_branch (GstGpuFanBin * self, const std::string & bound,
    guint lane_id, gint gpu, std::string * error);
/* Why lane @lane_id's branch @lane cannot be linked between @from_fanout
 * and @to_fanin for caps: which caps did not fit where, and what to do. */
std::string link_caps_error (GstGpuFanBin * self, GstElement * lane,
    GstPad * from_fanout, GstPad * to_fanin, bool at_output);

/* lane-properties (gstgpufanbin-laneprops.cpp) */
/* @text ("g::sigma=3.5, enc::bitrate=4000") as a structure, nullptr for
 * none; false with *error set if it does not parse. */
bool parse_lane_properties (const std::string & text, GstStructure ** settings,
    std::string * error);
/* Each of @settings on @lane's branch (before it starts, or while it
 * runs); false with *error set at the first that names nothing there or
 * whose value does not fit. */
bool apply_lane_properties (GstElement * lane, const GstStructure * settings,
    std::string * error);
/* lane-properties changed: every built lane gets the new settings (a
 * WARNING says which did not apply). */
void apply_lane_properties_to_running (GstGpuFanBin * self);

/* Recovery (gstgpufanbin-recovery.cpp) */
Recovery * recovery_new (void);
void recovery_free (Recovery * recovery);
/* READY->PAUSED: rebuilds may run (a new run: jobs of an earlier one are
 * void). */
void recovery_start (GstGpuFanBin * self);
/* PAUSED->READY, before the children change: pending rebuilds are dropped
 * and a rebuild in progress stops at its next step; after they changed,
 * recovery_join waits for the thread and removes the lanes that were
 * replaced, so that the next run has as many lanes as the first. */
void recovery_stop (GstGpuFanBin * self);
void recovery_join (GstGpuFanBin * self);
/* The fan-out took lane @lane out (gpufan-lane-failed): rebuild it after
 * lane-restart-delay, doubled for each earlier failure of the lanes that
 * stood in its place. */
void recovery_lane_failed (GstGpuFanBin * self, guint lane);

} // namespace fanbin

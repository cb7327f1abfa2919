// SPDX-License-Identifier: LGPL-2.1-or-later
// Helpers of the gpufanbin tests (test-gpufanbin-*.cpp, one binary): what a
// bin built at READY holds, test elements, lanes made to fail, and the
// messages a failed or rebuilt lane posts.
#pragma once

#include <gst/gst.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

namespace gpufan_test {

// ------------------------------------------------------- test elements ---

// A test element class: ANY caps on an always sink and src pad.
void TestElementClassInit(gpointer klass, const char *longname,
                          const char *classification);

// Registers `factory`, a GstBaseTransform subclass of the given sizes (0:
// the base's) made by `class_init` with `class_data`.
void RegisterTransform(const char *factory, guint16 class_size,
                       GClassInitFunc class_init, gpointer class_data,
                       guint16 instance_size = 0,
                       GInstanceInitFunc instance_init = nullptr);

// "gpufantestcannotstart": a pass-through element that cannot start
// (READY->PAUSED posts an ERROR): always while g_refusals is negative, else
// that many more times.
extern std::atomic<int> g_refusals;
void RegisterCannotStart();

// -------------------------------------------------------- the bin's lanes ---

// Per lane, in lane order: the factories of its elements, sorted.
std::vector<std::string> LaneFactories(GstElement *bin);
guint LaneCount(GstElement *bin);
// Lane i's device kind ("cpu", "cuda") in the bin's statistics.
std::string LaneDeviceKind(GstElement *bin, guint i);

// Goes to READY and expects it to fail with an ERROR whose text holds
// `expected`.
void ExpectReadyFails(const std::string& description,
                      const std::string& expected);

// A pipeline of 4 lanes of `identity name=inject`, round-robin so that each
// lane gets a quarter of the buffers whatever the machine's speed. Failed
// lanes are not rebuilt unless `settings` says so (lane-restart-delay).
std::string FourLanes(int buffers, const char *settings = "");

// The element named `name` in lane `lane` of bin "bin" (a ref).
GstElement *LaneElement(LaunchedPipeline& p, guint lane, const char *name);
// Builds the lanes (READY) and returns lane `lane`'s element `name` (a ref),
// for a test to make it fail.
GstElement *BuildAndFindInLane(LaunchedPipeline& p, guint lane,
                               const char *name);
// Builds the lanes (READY) and injects `kind` from frame `at` on into lane
// `lane`'s element named inject; nullptr when there is no such element.
std::unique_ptr<LaneFault> FaultInLane(LaunchedPipeline& p, guint lane,
                                       LaneFault::Kind kind, int64_t at);

// Sets the pipeline PLAYING without waiting for it: in tests whose branch
// fails early, the error may come before PLAYING is reached.
void StartPlaying(LaunchedPipeline& p);

bool StrictlyIncreasing(const std::vector<int64_t>& v);

// ------------------------------------------------------------- messages ---

// The first ERROR whose text holds `text` (other ERRORs may come first).
GstMessage *WaitForError(LaunchedPipeline& p, const std::string& text);
// WARNING messages whose source is named `name`, once `expected` of them
// came (gpufanbin posts a lane's ERROR as a WARNING once the lane is out:
// the stream may end first).
size_t WarningsFrom(LaunchedPipeline& p, const char *name, size_t expected);
// A gpufan-lane-restored message; its field `field` (G_MAXUINT: none).
bool IsRestored(GstMessage *m);
guint RestoredField(GstMessage *m, const char *field);

// Holds the source at frame `at` until the bus has `n` restored messages
// (bounded: the test fails rather than hangs).
struct HoldUntilRestored {
  LaunchedPipeline *p;
  int64_t at;
  size_t n;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *h = static_cast<HoldUntilRestored *>(data);
    if (static_cast<int64_t>(
            GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info))) == h->at)
      h->p->bus().WaitForCount(IsRestored, h->n, kLongWait);
    return GST_PAD_PROBE_OK;
  }
};

}  // namespace gpufan_test

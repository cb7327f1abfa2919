// SPDX-License-Identifier: LGPL-2.1-or-later
// Pad-level rigs for the element tests: a pipeline (for its bus and state
// handling) holding gpufanout (and gpufanin), wired to the test pads of
// gst-test-util.h.
//
//   FanoutRig:  Source ─► gpufanout ─► src_i ─► PadCollector lane(i)
//   FanRig:     Source ─► gpufanout ─► src_i ─► Branch i ─► gpufanin.sink_j ─►
//   PadCollector out
#pragma once

#include <memory>
#include <vector>

#include "gst-test-util.h"

namespace gpufan_test {

// Pushes buffers first..first+count-1; each must return OK.
::testing::AssertionResult PushRange(Source& source, uint64_t first,
                                     uint64_t count);
// Pushes buffers from `first` until one returns `wanted` (at most `max`
// pushes; every other return must be OK). The number of pushes, or nullopt.
std::optional<uint64_t> PushUntil(Source& source, uint64_t first, uint64_t max,
                                  GstFlowReturn wanted);

class PipelineRig {
 public:
  PipelineRig();
  virtual ~PipelineRig();
  PipelineRig(const PipelineRig&) = delete;
  PipelineRig& operator=(const PipelineRig&) = delete;

  GstElement *pipeline() const { return pipeline_; }
  BusLog& bus() { return *bus_; }
  // Makes an element and adds it to the pipeline; nullptr (and a test
  // failure) when the factory is missing.
  GstElement *AddElement(const char *factory, const char *name);
  bool Play() { return SetStateAndWait(pipeline_, GST_STATE_PLAYING); }
  bool Stop() { return SetStateAndWait(pipeline_, GST_STATE_NULL); }

 protected:
  GstElement *pipeline_ = nullptr;
  std::unique_ptr<BusLog> bus_;
};

class FanoutRig : public PipelineRig {
 public:
  explicit FanoutRig(guint lanes, const char *policy = "round-robin");
  ~FanoutRig() override;

  bool ok() const { return fanout_ != nullptr; }
  GstElement *fanout() const { return fanout_; }
  Source& source() { return *source_; }
  guint lanes() const { return static_cast<guint>(collectors_.size()); }
  PadCollector& lane(guint i) { return *collectors_.at(i); }
  GstPad *lane_pad(guint i) const { return pads_.at(i); }

  // Requests one more src_%u pad (returns its slot) and links a collector
  // unless `link` is false.
  guint AddLane(bool link = true);
  bool LinkLane(guint i);
  void UnlinkLane(guint i);
  // The data indices every lane got, all lanes together, sorted.
  std::vector<int64_t> AllIndicesSorted() const;

 private:
  GstElement *fanout_ = nullptr;
  std::unique_ptr<Source> source_;
  std::vector<GstPad *> pads_;
  std::vector<std::unique_ptr<PadCollector>> collectors_;
};

struct FanRigOptions {
  guint lanes = 2;
  const char *policy = "round-robin";
  Branch::Mode mode = Branch::Mode::kPassthrough;
  bool capture_flush = false;
  // Unreachable by default: holding a lane in a test never trips it.
  GstClockTime stall_timeout = kNoStallTimeout;
  // Fan-out lane i feeds fan-in pad sink_(lanes-1-i).
  bool crossed = false;
};

class FanRig : public PipelineRig {
 public:
  explicit FanRig(const FanRigOptions& options = {});
  ~FanRig() override;

  bool ok() const { return fanout_ && fanin_ && wired_; }
  GstElement *fanout() const { return fanout_; }
  GstElement *fanin() const { return fanin_; }
  Source& source() { return *source_; }
  Branch& branch(guint i) { return *branches_.at(i); }
  PadCollector& out() { return *out_; }
  guint lanes() const { return static_cast<guint>(branches_.size()); }
  GstPad *fanout_pad(guint i) const { return fanout_pads_.at(i); }
  // The fan-in pad lane i feeds (nullptr once released).
  GstPad *fanin_pad(guint i) const { return fanin_pads_.at(i); }
  void ReleaseFaninPad(guint i);

 private:
  GstElement *fanout_ = nullptr;
  GstElement *fanin_ = nullptr;
  bool wired_ = false;
  std::unique_ptr<Source> source_;
  std::vector<std::unique_ptr<Branch>> branches_;
  std::vector<GstPad *> fanout_pads_;
  std::vector<GstPad *> fanin_pads_;
  std::unique_ptr<PadCollector> out_;
};

// A pipeline from a gst-launch description, with probes that are removed
// only after the pipeline is NULL.
class LaunchedPipeline {
 public:
  explicit LaunchedPipeline(const std::string& description);
  ~LaunchedPipeline();
  LaunchedPipeline(const LaunchedPipeline&) = delete;
  LaunchedPipeline& operator=(const LaunchedPipeline&) = delete;

  bool ok() const { return pipeline_ != nullptr; }
  GstElement *get() const { return pipeline_; }
  // Borrowed: the pipeline keeps its children alive.
  GstElement *element(const char *name) const;
  BusLog& bus() { return *bus_; }
  // Records what passes element.pad (buffers and downstream events).
  RecordLog& Record(const char *element, const char *pad);
  // Stamps a running index into every buffer passing element.pad.
  IndexStamper& Stamp(const char *element, const char *pad);
  // A probe of the test's own, removed after the pipeline is NULL (so
  // `user_data` must outlive this object).
  void AddProbe(const char *element, const char *pad, GstPadProbeType type,
                GstPadProbeCallback callback, gpointer user_data);
  bool Play() { return SetStateAndWait(pipeline_, GST_STATE_PLAYING); }
  bool Stop() { return SetStateAndWait(pipeline_, GST_STATE_NULL); }
  // The first EOS or ERROR message, or nullptr after the timeout.
  GstMessage *WaitEosOrError(Duration timeout);
  // Plays and waits (kLongWait) for EOS; false, with a test failure that
  // says why, on ERROR or a timeout.
  bool PlayToEos();

 private:
  GstPad *Pad(const char *element, const char *pad) const;

  GstElement *pipeline_ = nullptr;
  std::unique_ptr<BusLog> bus_;
  std::vector<std::unique_ptr<ProbeRecorder>> recorders_;
  std::vector<std::unique_ptr<IndexStamper>> stampers_;
  std::vector<std::pair<GstPad *, gulong>> probes_;
};

// The gpufan-lane-failed messages about `lane`, once `expected` of them
// came (waiting up to kLongWait; the fan-out posts one after giving up or
// sending on the lane's frames: the stream may end first).
size_t LaneFailedMessages(LaunchedPipeline& p, guint lane, size_t expected);
// Field `field` of lane `lane`'s gpufan-lane-failed message (0: none).
guint LaneFailedField(LaunchedPipeline& p, guint lane, const char *field);

// Plays `p` and makes `seeks` flushing seeks (each under a bounded wait; new
// data must reach `out` after every `check_every`-th), then one with a stop
// position `last` frames in: the stream must end in EOS (never ERROR), with
// exactly that segment's frames in order after the last FLUSH_STOP, and one
// FLUSH_START and one FLUSH_STOP out per seek. `out` records the sink.
void CheckFlushingSeeks(LaunchedPipeline& p, RecordLog& out, int seeks,
                        int check_every, int last);

}  // namespace gpufan_test

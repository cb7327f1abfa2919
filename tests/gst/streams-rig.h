// SPDX-License-Identifier: LGPL-2.1-or-later
// The several-streams rig: sources on gpufanout's sink_%u pads, collectors
// on gpufanin's src_%u pads, test branches as lanes (test-streams*.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufan-rig.h"

namespace gpufan_test {

// Stream k's buffers carry index k * kStreamStride + i: a frame that leaves
// on another stream's pad shows.
constexpr uint64_t kStreamStride = 1000;

//   Source k ─► gpufanout.sink_k ─► (lanes: src_i ─► Branch i ─► sink_i) ─►
//   gpufanin.src_k ─► PadCollector k
class StreamsRig : public PipelineRig {
 public:
  StreamsRig(guint streams, guint lanes, Branch::Mode mode,
             const char *policy = "round-robin") {
    fanout_ = AddElement("gpufanout", "fanout");
    fanin_ = AddElement("gpufanin", "fanin");
    if (!fanout_ || !fanin_)
      return;
    gst_util_set_object_arg(G_OBJECT(fanout_), "policy", policy);
    g_object_set(fanout_, "devices", "cpu", nullptr);
    g_object_set(fanin_, "stall-timeout", static_cast<guint64>(kNoStallTimeout),
                 nullptr);
    bool ok = true;
    for (guint i = 0; i < lanes; i++)
      ok = AddLane(mode) && ok;
    for (guint k = 0; k < streams; k++)
      ok = AddStream() && ok;
    EXPECT_TRUE(ok) << "wiring the streams rig failed";
    wired_ = ok;
  }

  ~StreamsRig() override {
    EXPECT_TRUE(Stop()) << "setting the streams pipeline to NULL failed";
    sources_.clear();
    branches_.clear();
    for (GstPad *pad : sink_pads_)
      Release(fanout_, pad);
    for (GstPad *pad : lane_pads_)
      Release(fanout_, pad);
    for (GstPad *pad : fanin_pads_)
      Release(fanin_, pad);
    for (GstPad *pad : out_pads_)
      Release(fanin_, pad);
    outs_.clear();
  }

  // One more lane: src_%u ─► Branch ─► gpufanin.sink_%u (the branch's end
  // first, so that a lane requested while playing is whole before its
  // first item).
  bool AddLane(Branch::Mode mode = Branch::Mode::kPassthrough) {
    const guint i = static_cast<guint>(branches_.size());
    branches_.push_back(
        std::make_unique<Branch>(("branch" + std::to_string(i)).c_str(), mode));
    GstPad *in = gst_element_request_pad_simple(fanin_, "sink_%u");
    fanin_pads_.push_back(in);
    bool ok =
        in && gst_pad_link(branches_.back()->src(), in) == GST_PAD_LINK_OK;
    GstPad *out = gst_element_request_pad_simple(fanout_, "src_%u");
    lane_pads_.push_back(out);
    return ok && out &&
           gst_pad_link(out, branches_.back()->sink()) == GST_PAD_LINK_OK;
  }

  // One more stream: a Source on a new sink_%u, a collector on src_%u of
  // the same index.
  bool AddStream() {
    const guint k = static_cast<guint>(sources_.size());
    const std::string sink_name = "sink_" + std::to_string(k);
    const std::string src_name = "src_" + std::to_string(k);
    GstPad *sink = gst_element_request_pad_simple(fanout_, sink_name.c_str());
    GstPad *src = gst_element_request_pad_simple(fanin_, src_name.c_str());
    sink_pads_.push_back(sink);
    out_pads_.push_back(src);
    sources_.push_back(std::make_unique<Source>());
    outs_.push_back(
        std::make_unique<PadCollector>(("out" + std::to_string(k)).c_str()));
    return sink && src && sources_.back()->LinkTo(sink) &&
           gst_pad_link(src, outs_.back()->pad()) == GST_PAD_LINK_OK;
  }

  bool ok() const { return wired_; }
  // Plays and starts every stream (stream-start, caps, segment).
  ::testing::AssertionResult PlayAndStart() {
    if (!Play())
      return ::testing::AssertionFailure() << "the pipeline did not play";
    for (size_t k = 0; k < sources_.size(); k++)
      if (!sources_[k]->Start())
        return ::testing::AssertionFailure() << "stream " << k << " refused";
    return ::testing::AssertionSuccess();
  }
  GstElement *fanout() const { return fanout_; }
  GstElement *fanin() const { return fanin_; }
  Source& source(guint k) { return *sources_.at(k); }
  PadCollector& out(guint k) { return *outs_.at(k); }
  Branch& branch(guint i) { return *branches_.at(i); }
  GstPad *sink_pad(guint k) const { return sink_pads_.at(k); }

  // Buffer i of stream k.
  std::optional<GstFlowReturn> Push(guint k, uint64_t i) {
    GstBuffer *buffer = MakeIndexedBuffer(k * kStreamStride + i);
    GST_BUFFER_PTS(buffer) = i * kFrame;
    return source(k).Push(buffer);
  }

  // Stream k's pad released (the stream removed): null in sink_pads_.
  void ReleaseSinkPad(guint k) {
    Release(fanout_, sink_pads_.at(k));
    sink_pads_[k] = nullptr;
  }

 private:
  static void Release(GstElement *element, GstPad *pad) {
    if (!pad)
      return;
    gst_element_release_request_pad(element, pad);
    gst_object_unref(pad);
  }

  GstElement *fanout_ = nullptr;
  GstElement *fanin_ = nullptr;
  bool wired_ = false;
  std::vector<GstPad *> lane_pads_, fanin_pads_, sink_pads_, out_pads_;
  std::vector<std::unique_ptr<Branch>> branches_;
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<std::unique_ptr<PadCollector>> outs_;
};

inline std::vector<int64_t> Indices(uint64_t stream, uint64_t first, uint64_t count) {
  std::vector<int64_t> v;
  for (uint64_t i = first; i < first + count; i++)
    v.push_back(static_cast<int64_t>(stream * kStreamStride + i));
  return v;
}

}  // namespace gpufan_test

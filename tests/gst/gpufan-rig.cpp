// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan-rig.h"

#include <algorithm>

namespace gpufan_test {

::testing::AssertionResult PushRange(Source& source, uint64_t first,
                                     uint64_t count) {
  for (uint64_t i = first; i < first + count; i++) {
    std::optional<GstFlowReturn> r = source.PushIndex(i);
    if (!r)
      return ::testing::AssertionFailure()
             << "push of buffer " << i << " blocked";
    if (*r != GST_FLOW_OK)
      return ::testing::AssertionFailure()
             << "push of buffer " << i << " returned " << gst_flow_get_name(*r);
  }
  return ::testing::AssertionSuccess();
}

std::optional<uint64_t> PushUntil(Source& source, uint64_t first, uint64_t max,
                                  GstFlowReturn wanted) {
  for (uint64_t i = first; i < first + max; i++) {
    std::optional<GstFlowReturn> r = source.PushIndex(i);
    if (!r)
      return std::nullopt;
    if (*r == wanted)
      return i - first + 1;
    EXPECT_EQ(*r, GST_FLOW_OK)
        << "push of buffer " << i << " returned " << gst_flow_get_name(*r)
        << " while waiting for " << gst_flow_get_name(wanted);
  }
  return std::nullopt;
}

PipelineRig::PipelineRig() {
  pipeline_ = gst_pipeline_new("rig");
  bus_ = std::make_unique<BusLog>(pipeline_);
}

PipelineRig::~PipelineRig() {
  gst_element_set_state(pipeline_, GST_STATE_NULL);
  bus_.reset();
  gst_object_unref(pipeline_);
}

GstElement *PipelineRig::AddElement(const char *factory, const char *name) {
  GstElement *element = gst_element_factory_make(factory, name);
  if (!element) {
    ADD_FAILURE() << "no element '" << factory
                  << "' (is GST_PLUGIN_PATH set to the plugin?)";
    return nullptr;
  }
  gst_bin_add(GST_BIN(pipeline_), element);
  return element;
}

// ------------------------------------------------------------- FanoutRig ---

FanoutRig::FanoutRig(guint lanes, const char *policy) {
  fanout_ = AddElement("gpufanout", "fanout");
  source_ = std::make_unique<Source>();
  if (!fanout_)
    return;
  if (policy)
    gst_util_set_object_arg(G_OBJECT(fanout_), "policy", policy);
  GstPad *sink = gst_element_get_static_pad(fanout_, "sink");
  EXPECT_TRUE(source_->LinkTo(sink));
  gst_object_unref(sink);
  for (guint i = 0; i < lanes; i++)
    AddLane(true);
}

FanoutRig::~FanoutRig() {
  for (auto& c : collectors_)
    c->Unblock();
  EXPECT_TRUE(Stop()) << "setting the fan-out pipeline to NULL failed";
  source_.reset();
  for (size_t i = 0; i < pads_.size(); i++) {
    if (!pads_[i])
      continue;
    UnlinkLane(static_cast<guint>(i));
    gst_element_release_request_pad(fanout_, pads_[i]);
    gst_object_unref(pads_[i]);
  }
  collectors_.clear();
}

guint FanoutRig::AddLane(bool link) {
  GstPad *pad = gst_element_request_pad_simple(fanout_, "src_%u");
  EXPECT_NE(pad, nullptr) << "gpufanout refused a src_%u request";
  const guint slot = static_cast<guint>(pads_.size());
  std::string name = "lane" + std::to_string(slot);
  pads_.push_back(pad);
  collectors_.push_back(std::make_unique<PadCollector>(name.c_str()));
  if (pad && link)
    LinkLane(slot);
  return slot;
}

bool FanoutRig::LinkLane(guint i) {
  const bool ok =
      gst_pad_link(pads_.at(i), collectors_.at(i)->pad()) == GST_PAD_LINK_OK;
  EXPECT_TRUE(ok) << "linking lane " << i;
  return ok;
}

void FanoutRig::UnlinkLane(guint i) {
  if (gst_pad_is_linked(pads_.at(i)))
    gst_pad_unlink(pads_.at(i), collectors_.at(i)->pad());
}

std::vector<int64_t> FanoutRig::AllIndicesSorted() const {
  std::vector<int64_t> all;
  for (const auto& c : collectors_) {
    std::vector<int64_t> v = c->log().BufferIndices();
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

// ---------------------------------------------------------------- FanRig ---

FanRig::FanRig(const FanRigOptions& options) {
  fanout_ = AddElement("gpufanout", "fanout");
  fanin_ = AddElement("gpufanin", "fanin");
  source_ = std::make_unique<Source>();
  out_ = std::make_unique<PadCollector>("out");
  if (!fanout_ || !fanin_)
    return;
  if (options.policy)
    gst_util_set_object_arg(G_OBJECT(fanout_), "policy", options.policy);
  g_object_set(fanin_, "stall-timeout",
               static_cast<guint64>(options.stall_timeout), nullptr);

  GstPad *sink = gst_element_get_static_pad(fanout_, "sink");
  bool ok = source_->LinkTo(sink);
  gst_object_unref(sink);
  GstPad *src = gst_element_get_static_pad(fanin_, "src");
  ok = ok && gst_pad_link(src, out_->pad()) == GST_PAD_LINK_OK;
  gst_object_unref(src);

  std::vector<GstPad *> fanin_pads;
  for (guint i = 0; i < options.lanes; i++) {
    fanout_pads_.push_back(gst_element_request_pad_simple(fanout_, "src_%u"));
    fanin_pads.push_back(gst_element_request_pad_simple(fanin_, "sink_%u"));
    std::string name = "branch" + std::to_string(i);
    branches_.push_back(std::make_unique<Branch>(name.c_str(), options.mode));
    branches_.back()->CaptureFlush(options.capture_flush);
  }
  for (guint i = 0; i < options.lanes; i++) {
    GstPad *in = fanin_pads[options.crossed ? options.lanes - 1 - i : i];
    fanin_pads_.push_back(in);
    ok = ok && fanout_pads_[i] && in &&
         gst_pad_link(fanout_pads_[i], branches_[i]->sink()) ==
             GST_PAD_LINK_OK &&
         gst_pad_link(branches_[i]->src(), in) == GST_PAD_LINK_OK;
  }
  EXPECT_TRUE(ok) << "wiring the fan-out/fan-in rig failed";
  wired_ = ok;
}

FanRig::~FanRig() {
  EXPECT_TRUE(Stop()) << "setting the fan-out/fan-in pipeline to NULL failed";
  source_.reset();
  branches_.clear();  // unlinks both sides
  for (GstPad *pad : fanout_pads_) {
    if (!pad)
      continue;
    gst_element_release_request_pad(fanout_, pad);
    gst_object_unref(pad);
  }
  for (guint i = 0; i < fanin_pads_.size(); i++)
    ReleaseFaninPad(i);
  out_.reset();
}

void FanRig::ReleaseFaninPad(guint i) {
  GstPad *pad = fanin_pads_.at(i);
  if (!pad)
    return;
  fanin_pads_[i] = nullptr;
  gst_element_release_request_pad(fanin_, pad);
  gst_object_unref(pad);
}

// ------------------------------------------------------ LaunchedPipeline ---

LaunchedPipeline::LaunchedPipeline(const std::string& description) {
  GError *error = nullptr;
  pipeline_ = gst_parse_launch(description.c_str(), &error);
  if (error) {
    ADD_FAILURE() << "gst_parse_launch failed: " << error->message << "\n  "
                  << description;
    g_clear_error(&error);
    if (pipeline_)
      gst_object_unref(pipeline_);
    pipeline_ = nullptr;
    return;
  }
  bus_ = std::make_unique<BusLog>(pipeline_);
}

LaunchedPipeline::~LaunchedPipeline() {
  if (!pipeline_)
    return;
  EXPECT_TRUE(Stop()) << "setting the pipeline to NULL failed";
  recorders_.clear();
  stampers_.clear();
  for (auto& [pad, id] : probes_) {
    gst_pad_remove_probe(pad, id);
    gst_object_unref(pad);
  }
  bus_.reset();
  gst_object_unref(pipeline_);
}

GstElement *LaunchedPipeline::element(const char *name) const {
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline_), name);
  if (!e) {
    ADD_FAILURE() << "no element named " << name;
    return nullptr;
  }
  gst_object_unref(e);
  return e;
}

GstPad *LaunchedPipeline::Pad(const char *element_name,
                              const char *pad_name) const {
  GstElement *e = element(element_name);
  GstPad *pad = e ? gst_element_get_static_pad(e, pad_name) : nullptr;
  if (!pad)
    ADD_FAILURE() << "no pad " << element_name << "." << pad_name;
  return pad;
}

RecordLog& LaunchedPipeline::Record(const char *element_name,
                                    const char *pad_name) {
  GstPad *pad = Pad(element_name, pad_name);
  recorders_.push_back(std::make_unique<ProbeRecorder>(pad));
  if (pad)
    gst_object_unref(pad);
  return recorders_.back()->log();
}

IndexStamper& LaunchedPipeline::Stamp(const char *element_name,
                                      const char *pad_name) {
  GstPad *pad = Pad(element_name, pad_name);
  stampers_.push_back(std::make_unique<IndexStamper>(pad));
  if (pad)
    gst_object_unref(pad);
  return *stampers_.back();
}

void LaunchedPipeline::AddProbe(const char *element_name, const char *pad_name,
                                GstPadProbeType type,
                                GstPadProbeCallback callback,
                                gpointer user_data) {
  GstPad *pad = Pad(element_name, pad_name);
  if (!pad)
    return;
  probes_.emplace_back(
      pad, gst_pad_add_probe(pad, type, callback, user_data, nullptr));
}

GstMessage *LaunchedPipeline::WaitEosOrError(Duration timeout) {
  return bus_->WaitForType(
      static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR),
      timeout);
}

bool LaunchedPipeline::PlayToEos() {
  EXPECT_TRUE(Play());
  GstMessage *m = WaitEosOrError(kLongWait);
  if (!m) {
    ADD_FAILURE() << "no EOS within " << kLongWait.count() << " ms";
    return false;
  }
  if (GST_MESSAGE_TYPE(m) != GST_MESSAGE_EOS) {
    ADD_FAILURE() << "ERROR instead of EOS: " << bus_->ErrorsText();
    return false;
  }
  return true;
}

size_t LaneFailedMessages(LaunchedPipeline& p, guint lane, size_t expected) {
  auto of_lane = [lane](GstMessage *m) {
    if (!BusLog::IsElementMessage(m, "gpufan-lane-failed"))
      return false;
    guint got = G_MAXUINT;
    gst_structure_get_uint(gst_message_get_structure(m), "lane", &got);
    return got == lane;
  };
  if (expected > 0)
    p.bus().WaitForCount(of_lane, expected, kLongWait);
  return p.bus().Count(of_lane);
}

guint LaneFailedField(LaunchedPipeline& p, guint lane, const char *field) {
  guint value = 0;
  p.bus().Count([&](GstMessage *m) {
    if (!BusLog::IsElementMessage(m, "gpufan-lane-failed"))
      return false;
    const GstStructure *s = gst_message_get_structure(m);
    guint got = G_MAXUINT;
    gst_structure_get_uint(s, "lane", &got);
    if (got == lane)
      gst_structure_get_uint(s, field, &value);
    return false;
  });
  return value;
}

void CheckFlushingSeeks(LaunchedPipeline& p, RecordLog& out, int seeks,
                        int check_every, int last) {
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(out.WaitBuffers(10)) << out.Summary(20);
  Source runner;  // runs each seek under a bounded wait
  for (int i = 0; i < seeks; i++) {
    const GstClockTime position = (i * 37 % 500) * kFrame;
    bool ok = false;
    ASSERT_TRUE(runner.Run(
        [&] {
          ok = gst_element_seek_simple(p.get(), GST_FORMAT_TIME,
                                       GST_SEEK_FLAG_FLUSH, position);
        },
        kWait, "flushing seek"))
        << "seek " << i << " hung";
    ASSERT_TRUE(ok) << "seek " << i << " refused";
    if (i % check_every == 0) {
      const size_t n = out.Buffers();
      ASSERT_TRUE(out.WaitBuffers(n + 1)) << "no data after seek " << i;
    }
  }
  bool ok = false;
  ASSERT_TRUE(runner.Run(
      [&] {
        ok = gst_element_seek(p.get(), 1.0, GST_FORMAT_TIME,
                              GST_SEEK_FLAG_FLUSH, GST_SEEK_TYPE_SET, 0,
                              GST_SEEK_TYPE_SET, last * kFrame);
      },
      kWait, "final seek"));
  ASSERT_TRUE(ok) << "the final seek was refused";
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS after the seeks";
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();

  std::vector<Entry> entries = out.Snapshot();
  size_t start = 0;
  for (size_t k = 0; k < entries.size(); k++)
    if (entries[k].type() == GST_EVENT_FLUSH_STOP)
      start = k + 1;
  ASSERT_GT(start, 0u) << "no FLUSH_STOP reached the sink";
  std::vector<int64_t> segment;
  size_t eos = 0;
  for (size_t k = start; k < entries.size(); k++) {
    if (entries[k].is_buffer)
      segment.push_back(entries[k].pts_index);
    if (entries[k].type() == GST_EVENT_EOS)
      eos++;
  }
  EXPECT_TRUE(IsSequence(segment, 0, last)) << "after the final seek";
  EXPECT_EQ(eos, 1u);
  EXPECT_EQ(out.Events(GST_EVENT_FLUSH_STOP), static_cast<size_t>(seeks) + 1)
      << "one FLUSH_STOP out per seek";
  EXPECT_EQ(out.Events(GST_EVENT_FLUSH_START), static_cast<size_t>(seeks) + 1)
      << "one FLUSH_START out per seek";
}

}  // namespace gpufan_test

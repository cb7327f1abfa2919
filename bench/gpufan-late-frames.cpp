// SPDX-License-Identifier: LGPL-2.1-or-later
// How many frames reach a sync=true sink later than the latency the
// pipeline configured: a live source, three lanes of 20, 30 and 40 ms
// (identity sleep-time), gpufanin, fakesink sync=true. A frame is late when
// the clock is past its running time + the pipeline's latency when it
// reaches the sink. LATENCY messages are handled as gst-launch handles them
// (the pipeline recalculates).
//
//   gpufan-late-frames [--frames N] [--fps F]
//
// Prints one line: frames, late frames, the configured latency and the
// largest lateness. A measurement, not a test: it asserts nothing.
#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Counter {
  GstElement *pipeline = nullptr;
  std::atomic<int> frames{0};
  std::atomic<int> late{0};
  std::atomic<gint64> worst_ns{0};
};

GstPadProbeReturn OnBuffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
  auto *c = static_cast<Counter *>(data);
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  GstElement *sink = GST_ELEMENT(gst_pad_get_parent(pad));
  GstClock *clock = gst_element_get_clock(sink);
  GstEvent *seg_event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0);
  if (clock && seg_event && GST_BUFFER_PTS_IS_VALID(buffer)) {
    const GstSegment *segment;
    gst_event_parse_segment(seg_event, &segment);
    const GstClockTime running = gst_segment_to_running_time(
        segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer));
    const GstClockTime now =
        gst_clock_get_time(clock) - gst_element_get_base_time(sink);
    const GstClockTime due =
        running + gst_base_sink_get_latency(GST_BASE_SINK(sink));
    c->frames++;
    if (now > due) {
      c->late++;
      const gint64 by = static_cast<gint64>(now - due);
      gint64 worst = c->worst_ns.load();
      while (by > worst && !c->worst_ns.compare_exchange_weak(worst, by)) {}
    }
  }
  if (seg_event)
    gst_event_unref(seg_event);
  if (clock)
    gst_object_unref(clock);
  gst_object_unref(sink);
  return GST_PAD_PROBE_OK;
}

}  // namespace

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  int frames = 600, fps = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--frames"))
      frames = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--fps"))
      fps = atoi(argv[i + 1]);
  }
  const std::string description =
      "videotestsrc is-live=true num-buffers=" + std::to_string(frames) +
      " ! video/x-raw,format=GRAY8,width=64,height=64,framerate=" +
      std::to_string(fps) +
      "/1 ! gpufanout name=f  gpufanin name=m ! fakesink name=out sync=true"
      "  f.src_0 ! identity sleep-time=20000 ! m.sink_0"
      "  f.src_1 ! identity sleep-time=30000 ! m.sink_1"
      "  f.src_2 ! identity sleep-time=40000 ! m.sink_2";
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  if (!pipeline) {
    fprintf(stderr, "pipeline: %s\n", error ? error->message : "?");
    return 1;
  }
  Counter counter;
  counter.pipeline = pipeline;
  GstElement *out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  GstPad *sinkpad = gst_element_get_static_pad(out, "sink");
  gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_BUFFER, OnBuffer, &counter,
                    nullptr);
  gst_object_unref(sinkpad);
  gst_object_unref(out);

  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  int latency_messages = 0;
  bool ok = false;
  for (bool done = false; !done;) {
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, 60 * GST_SECOND,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
                                    GST_MESSAGE_LATENCY));
    if (!msg)
      break;
    switch (GST_MESSAGE_TYPE(msg)) {
      case GST_MESSAGE_LATENCY:
        latency_messages++;
        gst_bin_recalculate_latency(GST_BIN(pipeline));
        break;
      case GST_MESSAGE_EOS:
        ok = true;
        done = true;
        break;
      default:
        done = true;
        break;
    }
    gst_message_unref(msg);
  }
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  const GstClockTime latency = gst_base_sink_get_latency(GST_BASE_SINK(sink));
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  printf(
      "%s: %d frames, %d late, latency %.1f ms, %d LATENCY messages, "
      "worst %.1f ms late\n",
      ok ? "EOS" : "NO EOS", counter.frames.load(), counter.late.load(),
      latency / 1e6, latency_messages, counter.worst_ns.load() / 1e6);
  return ok ? 0 : 1;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanout's metrics-port: the OpenMetrics formatter on made-up statistics,
// and the HTTP server of a playing pipeline scraped with a real client.
#include <gio/gio.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/gstgpufanmetrics.h"
#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A port nothing listens on now: bound to port 0, read back, let go.
guint FreePort() {
  GSocket *socket = g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
                                 G_SOCKET_PROTOCOL_TCP, nullptr);
  GInetAddress *loopback = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
  GSocketAddress *any = g_inet_socket_address_new(loopback, 0);
  guint port = 0;
  if (g_socket_bind(socket, any, TRUE, nullptr)) {
    GSocketAddress *bound = g_socket_get_local_address(socket, nullptr);
    port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(bound));
    g_object_unref(bound);
  }
  g_object_unref(any);
  g_object_unref(loopback);
  g_socket_close(socket, nullptr);
  g_object_unref(socket);
  return port;
}

// The whole response to "GET <path> HTTP/1.0" on 127.0.0.1:port ("" when
// nothing answers).
std::string HttpGet(guint port, const std::string& path) {
  GSocketClient *client = g_socket_client_new();
  g_socket_client_set_timeout(client, 10);
  GSocketConnection *c = g_socket_client_connect_to_host(
      client, "127.0.0.1", port, nullptr, nullptr);
  g_object_unref(client);
  if (!c)
    return "";
  const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
  GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(c));
  std::string response;
  if (g_output_stream_write_all(out, request.data(), request.size(), nullptr,
                                nullptr, nullptr)) {
    GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(c));
    char buf[4096];
    gssize n;
    while ((n = g_input_stream_read(in, buf, sizeof buf, nullptr, nullptr)) >
           0)
      response.append(buf, n);
  }
  g_io_stream_close(G_IO_STREAM(c), nullptr, nullptr);
  g_object_unref(c);
  return response;
}

std::string Header(const std::string& response, const std::string& name) {
  const std::string key = "\r\n" + name + ": ";
  size_t at = response.find(key);
  if (at == std::string::npos)
    return "";
  at += key.size();
  return response.substr(at, response.find("\r\n", at) - at);
}

std::string Body(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// The value of the first sample line that starts with `prefix`, or -1.
double SampleValue(const std::string& body, const std::string& prefix) {
  size_t at = body.find("\n" + prefix);
  if (at == std::string::npos)
    return -1;
  size_t end = body.find('\n', at + 1);
  std::string line = body.substr(at + 1, end - at - 1);
  return g_ascii_strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
}

std::string LivePipeline(guint port) {
  return "videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=8,"
         "height=8,framerate=100/1 ! gpufanout name=f devices=cpu:2 "
         "metrics-port=" +
         std::to_string(port) +
         "  gpufanin name=m stall-timeout=" + std::to_string(kNoStallTimeout) +
         " ! fakesink  f.src_0 ! queue ! m.sink_0  f.src_1 ! queue ! m.sink_1";
}

gpufan::SessionStats MadeUpStats() {
  gpufan::SessionStats s;
  s.dispatched = 10;
  s.released = 8;
  s.in_flight = 2;
  gpufan::LaneStats a;
  a.lane = 0;
  a.device.kind = gpufan::DeviceKind::kCpu;
  a.device.index = 0;
  a.completed = 5;
  a.dropped = 1;
  a.service_ns = 2500000;
  a.fps = 12.5;
  a.described = true;
  a.copies = 3;
  gpufan::LaneStats b = a;
  b.lane = 1;
  b.device.index = 1;
  b.completed = 3;
  b.state = gpufan::LaneHealth::kStalled;
  s.lanes = {a, b};
  gpufan::StreamStats st;
  st.stream = 1;  // sink_0
  st.delivered = 8;
  st.lost = 1;
  st.latency_ns = 250'000'000;
  st.max_latency_ns = 1'500'000'000;
  s.streams = {st};
  return s;
}

}  // namespace

TEST(MetricsFormat, MadeUpStatistics) {
  const std::string text = gst_gpufan_metrics_format(MadeUpStats());
  EXPECT_TRUE(EndsWith(text, "\n# EOF\n")) << text;
  EXPECT_NE(text.find("# TYPE gpufan_lane_frames counter\n"
                      "# HELP gpufan_lane_frames "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ngpufan_dispatched_total 10\n"), std::string::npos);
  EXPECT_NE(text.find("\ngpufan_released_total 8\n"), std::string::npos);
  EXPECT_NE(text.find("\ngpufan_in_flight 2\n"), std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_frames_total{lane=\"0\",device=\"cpu:0\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ngpufan_lane_frames_total{lane=\"1\",device=\"cpu:1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_dropped_total{lane=\"0\",device=\"cpu:0\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_service_seconds{lane=\"0\",device=\"cpu:0\"} 0.0025\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ngpufan_lane_fps{lane=\"0\",device=\"cpu:0\"} 12.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_state{lane=\"0\",device=\"cpu:0\",state=\"active\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ngpufan_lane_state{lane=\"1\",device=\"cpu:1\",state=\"active\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_state{lane=\"1\",device=\"cpu:1\",state=\"stalled\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_lane_copies_total{lane=\"0\",device=\"cpu:0\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_stream_frames_total{stream=\"0\"} 8\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_stream_lost_total{stream=\"0\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ngpufan_stream_latency_seconds{stream=\"0\"} 0.25\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\ngpufan_stream_max_latency_seconds{stream=\"0\"} 1.5\n"),
      std::string::npos);
  // every family has its TYPE and HELP, once
  size_t types = 0, helps = 0;
  for (size_t at = 0; (at = text.find("# TYPE ", at)) != std::string::npos;
       at++)
    types++;
  for (size_t at = 0; (at = text.find("# HELP ", at)) != std::string::npos;
       at++)
    helps++;
  EXPECT_GT(types, 10u);
  EXPECT_EQ(types, helps);
}

TEST(MetricsFormat, NoStreamsNoLanesMeansNoSuchFamilies) {
  const std::string text = gst_gpufan_metrics_format(gpufan::SessionStats{});
  EXPECT_EQ(text.find("gpufan_stream_"), std::string::npos);
  EXPECT_EQ(text.find("gpufan_lane_"), std::string::npos);
  EXPECT_TRUE(EndsWith(text, "# EOF\n"));
}

TEST(MetricsFormat, Responses) {
  auto source = [] { return MadeUpStats(); };
  std::string ok = gst_gpufan_metrics_respond(
      "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", source);
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_EQ(Header(ok, "Content-Type"), GST_GPUFAN_METRICS_CONTENT_TYPE);
  EXPECT_EQ(Header(ok, "Content-Length"), std::to_string(Body(ok).size()));
  EXPECT_EQ(gst_gpufan_metrics_respond("GET /metrics?x=1 HTTP/1.0\r\n\r\n",
                                       source)
                .rfind("HTTP/1.0 200 ", 0),
            0u);
  EXPECT_EQ(gst_gpufan_metrics_respond("GET /other HTTP/1.0\r\n\r\n", source)
                .rfind("HTTP/1.0 404 ", 0),
            0u);
  EXPECT_EQ(gst_gpufan_metrics_respond("POST /metrics HTTP/1.0\r\n\r\n", source)
                .rfind("HTTP/1.0 405 ", 0),
            0u);
}

TEST(Metrics, ALivePipelineIsScraped) {
  const guint port = FreePort();
  ASSERT_NE(port, 0u);
  LaunchedPipeline p(LivePipeline(port));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play()) << p.bus().ErrorsText();

  std::string response, body;
  double frames = -1;
  const auto deadline = std::chrono::steady_clock::now() + kLongWait;
  while (std::chrono::steady_clock::now() < deadline) {
    response = HttpGet(port, "/metrics");
    body = Body(response);
    frames = SampleValue(body, "gpufan_lane_frames_total{lane=\"0\"");
    if (frames > 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(frames, 0) << response;
  EXPECT_EQ(response.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << response;
  EXPECT_EQ(Header(response, "Content-Type"),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_TRUE(EndsWith(body, "# EOF\n")) << body;
  EXPECT_NE(body.find("gpufan_lane_frames_total{lane=\"1\""),
            std::string::npos);

  const std::string other = HttpGet(port, "/other");
  EXPECT_EQ(other.rfind("HTTP/1.0 404 ", 0), 0u) << other;

  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  ASSERT_TRUE(p.Stop());
  // stopped with the element: nothing answers
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

TEST(Metrics, ATakenPortIsAWarningAndTheStreamGoesOn) {
  // a listener of ours holds the port
  GSocketService *holder = g_socket_service_new();
  guint port = 0;
  for (int tries = 0; tries < 20 && port == 0; tries++) {
    guint candidate = FreePort();
    GInetAddress *loopback = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    GSocketAddress *address = g_inet_socket_address_new(loopback, candidate);
    if (g_socket_listener_add_address(G_SOCKET_LISTENER(holder), address,
                                      G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, nullptr, nullptr,
                                      nullptr))
      port = candidate;
    g_object_unref(address);
    g_object_unref(loopback);
  }
  ASSERT_NE(port, 0u);

  LaunchedPipeline p(LivePipeline(port));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play()) << p.bus().ErrorsText();
  GstMessage *warning = p.bus().WaitForType(GST_MESSAGE_WARNING, kLongWait);
  ASSERT_NE(warning, nullptr);
  const std::string text = BusLog::ErrorText(warning);
  EXPECT_NE(text.find("metrics"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(port)), std::string::npos) << text;
  // the stream still flows
  GstElement *f = p.element("f");
  bool flowed = false;
  const auto deadline = std::chrono::steady_clock::now() + kLongWait;
  while (!flowed && std::chrono::steady_clock::now() < deadline) {
    GstStructure *stats = nullptr;
    g_object_get(f, "stats", &stats, nullptr);
    guint64 dispatched = 0;
    gst_structure_get_uint64(stats, "dispatched", &dispatched);
    gst_structure_free(stats);
    flowed = dispatched > 0;
    if (!flowed)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(flowed);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  ASSERT_TRUE(p.Stop());
  g_socket_listener_close(G_SOCKET_LISTENER(holder));
  g_object_unref(holder);
}

TEST(Metrics, GpufanbinOffersTheProperty) {
  GstElement *bin = gst_element_factory_make("gpufanbin", nullptr);
  ASSERT_NE(bin, nullptr);
  GParamSpec *spec =
      g_object_class_find_property(G_OBJECT_GET_CLASS(bin), "metrics-port");
  EXPECT_NE(spec, nullptr);
  gst_object_unref(bin);
}

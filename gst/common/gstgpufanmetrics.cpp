/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanmetrics.h"

#include <gio/gio.h>

#include <utility>

namespace {

/* How much of a request is read: its request line and headers, no more. */
constexpr gsize kMaxRequest = 4096;
/* How long a client may take to send its request or read the response. */
constexpr guint kSocketTimeoutS = 5;

std::string
EscapeLabel (const std::string & value)
{
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string
Number (double value)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_dtostr (buf, sizeof buf, value);
}

std::string
Number (guint64 value)
{
  return std::to_string (value);
}

/* ns as seconds, to the ns (no binary noise such as 0.0025000000000000001) */
std::string
Seconds (gint64 ns)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_formatd (buf, sizeof buf, "%.9g", (double)MAX (ns, 0) / 1e9);
}

/* OpenMetrics text: each family's TYPE and HELP, then its samples. */
class Writer {
 public:
  /* A counter family `name` has samples `name`_total. */
  void Family (const char * name, const char * type, const char * help) {
    name_ = name;
    suffix_ = g_str_equal (type, "counter") ? "_total" : "";
    out_ += std::string ("# TYPE ") + name + " " + type + "\n";
    out_ += std::string ("# HELP ") + name + " " + help + "\n";
  }
  void Sample (const std::string & labels, const std::string & value) {
    out_ += name_ + suffix_;
    if (!labels.empty ())
      out_ += "{" + labels + "}";
    out_ += " " + value + "\n";
  }
  std::string Finish () { return out_ + "# EOF\n"; }

 private:
  std::string out_;
  std::string name_;
  std::string suffix_;
};

std::string
LaneLabels (const gpufan::LaneStats & l)
{
  const std::string device = std::string (gpufan::DeviceKindName (
          l.device.kind)) + ":" + std::to_string (l.device.index);
  return "lane=\"" + std::to_string (l.lane) + "\",device=\""
      + EscapeLabel (device) + "\"";
}

std::string
StreamLabels (const gpufan::StreamStats & st)
{
  /* numbered as the stats structure's streams (sink_0 is stream 0) */
  return "stream=\"" + std::to_string (st.stream - 1) + "\"";
}

template <typename Get>
void
LaneFamily (Writer & w, const gpufan::SessionStats & s, const char * name,
    const char * type, const char * help, Get get)
{
  w.Family (name, type, help);
  for (const auto & l : s.lanes)
    w.Sample (LaneLabels (l), get (l));
}

template <typename Get>
void
StreamFamily (Writer & w, const gpufan::SessionStats & s, const char * name,
    const char * type, const char * help, Get get)
{
  w.Family (name, type, help);
  for (const auto & st : s.streams)
    w.Sample (StreamLabels (st), get (st));
}

}  // namespace

std::string
gst_gpufan_metrics_format (const gpufan::SessionStats & s)
{
  using gpufan::LaneStats;
  using gpufan::StreamStats;
  Writer w;

  w.Family ("gpufan_dispatched", "counter", "Frames given to a lane.");
  w.Sample ("", Number (s.dispatched));
  w.Family ("gpufan_released", "counter",
      "Frames that left the reorder window.");
  w.Sample ("", Number (s.released));
  w.Family ("gpufan_unmatched", "counter",
      "Frames that came back with no way to tell which they were.");
  w.Sample ("", Number (s.unmatched));
  w.Family ("gpufan_in_flight", "gauge", "Frames dispatched, not yet back.");
  w.Sample ("", Number ((guint64)s.in_flight));
  w.Family ("gpufan_max_in_flight", "gauge",
      "The bound on frames in flight.");
  w.Sample ("", Number ((guint64)s.max_in_flight));
  w.Family ("gpufan_window_peak", "gauge",
      "The most frames the reorder window held.");
  w.Sample ("", Number ((guint64)s.window_peak));
  w.Family ("gpufan_added_latency_seconds", "gauge",
      "The latency the fan-out and fan-in add.");
  w.Sample ("", Seconds (s.added_latency_ns));
  w.Family ("gpufan_elapsed_seconds", "gauge", "Time since the first dispatch.");
  w.Sample ("", Seconds (s.elapsed_ns));

  if (!s.lanes.empty ()) {
    LaneFamily (w, s, "gpufan_lane_frames", "counter",
        "Frames that came back from the lane (or were pushed, no fan-in).",
        [](const LaneStats & l) { return Number (l.completed); });
    LaneFamily (w, s, "gpufan_lane_dispatched", "counter",
        "Frames given to the lane.",
        [](const LaneStats & l) { return Number (l.dispatched); });
    LaneFamily (w, s, "gpufan_lane_dropped", "counter",
        "Frames the lane's branch dropped.",
        [](const LaneStats & l) { return Number (l.dropped); });
    LaneFamily (w, s, "gpufan_lane_failed", "counter",
        "Frames the lane returned an error for.",
        [](const LaneStats & l) { return Number (l.failed); });
    LaneFamily (w, s, "gpufan_lane_timed_out", "counter",
        "Frames the fan-in stopped waiting for (stall).",
        [](const LaneStats & l) { return Number (l.timed_out); });
    LaneFamily (w, s, "gpufan_lane_late", "counter",
        "Frames that came back after their slot was given up.",
        [](const LaneStats & l) { return Number (l.late); });
    LaneFamily (w, s, "gpufan_lane_replayed", "counter",
        "Frames sent to the lane again after their lane failed.",
        [](const LaneStats & l) { return Number (l.replayed); });
    LaneFamily (w, s, "gpufan_lane_stalls", "counter",
        "Times the lane was declared stalled.",
        [](const LaneStats & l) { return Number (l.stalls); });
    LaneFamily (w, s, "gpufan_lane_in_flight", "gauge",
        "Frames dispatched to the lane, not yet back.",
        [](const LaneStats & l) { return Number ((guint64)l.in_flight); });
    LaneFamily (w, s, "gpufan_lane_queued", "gauge",
        "Frames queued for the lane's worker.",
        [](const LaneStats & l) { return Number ((guint64)l.queued); });
    LaneFamily (w, s, "gpufan_lane_service_seconds", "gauge",
        "The lane's learned service time per frame (0: not known yet).",
        [](const LaneStats & l) { return Seconds (l.service_ns); });
    LaneFamily (w, s, "gpufan_lane_fps", "gauge",
        "Frames completed per second since the first dispatch.",
        [](const LaneStats & l) { return Number (l.fps); });
    LaneFamily (w, s, "gpufan_lane_weight", "gauge", "The lane's weight.",
        [](const LaneStats & l) { return Number (l.weight); });

    w.Family ("gpufan_lane_state", "gauge",
        "1 for the lane's current scheduling state, else 0.");
    for (const auto & l : s.lanes) {
      for (int i = 0; i <= (int)gpufan::LaneHealth::kFailed; i++) {
        const auto state = static_cast<gpufan::LaneHealth> (i);
        w.Sample (LaneLabels (l) + ",state=\""
            + gpufan::LaneHealthName (state) + "\"",
            l.state == state ? "1" : "0");
      }
    }

    bool described = false;
    for (const auto & l : s.lanes)
      described = described || l.described;
    if (described) {
      w.Family ("gpufan_lane_copies", "counter",
          "Frames copied into the lane's host pool.");
      for (const auto & l : s.lanes)
        if (l.described)
          w.Sample (LaneLabels (l), Number (l.copies));
      w.Family ("gpufan_lane_copies_skipped", "counter",
          "Frames that could not be copied into the lane's host pool.");
      for (const auto & l : s.lanes)
        if (l.described)
          w.Sample (LaneLabels (l), Number (l.copies_skipped));
    }
  }

  if (!s.streams.empty ()) {
    StreamFamily (w, s, "gpufan_stream_frames", "counter",
        "The stream's frames that left the reorder window.",
        [](const StreamStats & st) { return Number (st.delivered); });
    StreamFamily (w, s, "gpufan_stream_dispatched", "counter",
        "The stream's frames given to a lane.",
        [](const StreamStats & st) { return Number (st.dispatched); });
    StreamFamily (w, s, "gpufan_stream_lost", "counter",
        "The stream's frames given up (dropped, stalled or flushed).",
        [](const StreamStats & st) { return Number (st.lost); });
    StreamFamily (w, s, "gpufan_stream_leaky_dropped", "counter",
        "The stream's frames dropped before dispatch (leaky).",
        [](const StreamStats & st) { return Number (st.leaky_dropped); });
    StreamFamily (w, s, "gpufan_stream_in_flight", "gauge",
        "The stream's frames dispatched, not yet out of the window.",
        [](const StreamStats & st) { return Number ((guint64)st.in_flight); });
    StreamFamily (w, s, "gpufan_stream_wait_seconds", "counter",
        "Total time the stream's frames waited for admission.",
        [](const StreamStats & st) { return Seconds (st.wait_ns); });
    StreamFamily (w, s, "gpufan_stream_max_wait_seconds", "gauge",
        "The longest admission wait of the stream's frames.",
        [](const StreamStats & st) { return Seconds (st.max_wait_ns); });
    StreamFamily (w, s, "gpufan_stream_latency_seconds", "gauge",
        "The mean time from admission until the stream's frames left the "
        "reorder window.",
        [](const StreamStats & st) { return Seconds (st.latency_ns); });
    StreamFamily (w, s, "gpufan_stream_max_latency_seconds", "gauge",
        "The longest time from admission until one of the stream's frames "
        "left the reorder window.",
        [](const StreamStats & st) { return Seconds (st.max_latency_ns); });
    StreamFamily (w, s, "gpufan_stream_fps", "gauge",
        "The stream's frames dispatched per second.",
        [](const StreamStats & st) { return Number (st.fps); });
  }
  return w.Finish ();
}

static std::string
http_response (const char * status, const char * content_type,
    const std::string & body)
{
  return std::string ("HTTP/1.0 ") + status + "\r\nContent-Type: "
      + content_type + "\r\nContent-Length: " + std::to_string (body.size ())
      + "\r\nConnection: close\r\n\r\n" + body;
}

std::string
gst_gpufan_metrics_respond (const std::string & request,
    const std::function<gpufan::SessionStats ()> & stats_source)
{
  const std::string line = request.substr (0, request.find_first_of ("\r\n"));
  const size_t sp1 = line.find (' ');
  const std::string method = line.substr (0, sp1);
  std::string target;
  if (sp1 != std::string::npos) {
    const size_t sp2 = line.find (' ', sp1 + 1);
    target = line.substr (sp1 + 1,
        sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
  }
  if (method != "GET")
    return http_response ("405 Method Not Allowed",
        "text/plain; charset=utf-8", "Only GET /metrics is served.\n");
  const std::string path = target.substr (0, target.find ('?'));
  if (path != "/metrics")
    return http_response ("404 Not Found", "text/plain; charset=utf-8",
        "Not found: the metrics are at /metrics.\n");
  return http_response ("200 OK", GST_GPUFAN_METRICS_CONTENT_TYPE,
      gst_gpufan_metrics_format (stats_source ()));
}

struct _GstGpuFanMetricsServer {
  GMainContext * context = nullptr;
  GMainLoop * loop = nullptr;
  GSocketService * service = nullptr;
  GThread * thread = nullptr;
  std::function<gpufan::SessionStats ()> stats_source;
};

/* On the server's thread: reads the request (bounded), answers, closes. */
static gboolean
on_incoming (GSocketService *, GSocketConnection * connection, GObject *,
    gpointer user_data)
{
  auto * server = static_cast<GstGpuFanMetricsServer *> (user_data);
  GSocket * socket = g_socket_connection_get_socket (connection);
  g_socket_set_blocking (socket, TRUE);
  g_socket_set_timeout (socket, kSocketTimeoutS);

  std::string request;
  gchar buf[1024];
  while (request.size () < kMaxRequest
      && request.find ("\r\n\r\n") == std::string::npos
      && request.find ("\n\n") == std::string::npos) {
    const gsize want = MIN (sizeof buf, kMaxRequest - request.size ());
    gssize n = g_socket_receive (socket, buf, want, nullptr, nullptr);
    if (n <= 0)
      break;
    request.append (buf, n);
  }
  if (!request.empty ()) {
    const std::string response
        = gst_gpufan_metrics_respond (request, server->stats_source);
    gsize sent = 0;
    while (sent < response.size ()) {
      gssize n = g_socket_send (socket, response.data () + sent,
          response.size () - sent, nullptr, nullptr);
      if (n <= 0)
        break;
      sent += n;
    }
  }
  g_io_stream_close (G_IO_STREAM (connection), nullptr, nullptr);
  return TRUE;
}

static gpointer
server_thread (gpointer data)
{
  auto * server = static_cast<GstGpuFanMetricsServer *> (data);
  g_main_context_push_thread_default (server->context);
  g_main_loop_run (server->loop);
  /* the cancelled accept's completion, so that it lets the service go */
  while (g_main_context_iteration (server->context, FALSE)) {
  }
  g_main_context_pop_thread_default (server->context);
  return nullptr;
}

static gboolean
stop_on_server_thread (gpointer data)
{
  auto * server = static_cast<GstGpuFanMetricsServer *> (data);
  g_socket_service_stop (server->service);
  g_socket_listener_close (G_SOCKET_LISTENER (server->service));
  g_main_loop_quit (server->loop);
  return G_SOURCE_REMOVE;
}

static void
server_free (GstGpuFanMetricsServer * server)
{
  g_clear_object (&server->service);
  g_clear_pointer (&server->loop, g_main_loop_unref);
  g_clear_pointer (&server->context, g_main_context_unref);
  delete server;
}

GstGpuFanMetricsServer *
gst_gpufan_metrics_server_start (guint port,
    std::function<gpufan::SessionStats ()> stats_source, GError ** error)
{
  auto * server = new GstGpuFanMetricsServer;
  server->stats_source = std::move (stats_source);
  server->context = g_main_context_new ();
  server->loop = g_main_loop_new (server->context, FALSE);

  /* the service's accepts attach to the thread-default context */
  g_main_context_push_thread_default (server->context);
  server->service = g_socket_service_new ();
  g_socket_service_stop (server->service);
  GInetAddress * loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  GSocketAddress * address = g_inet_socket_address_new (loopback, port);
  gboolean bound = g_socket_listener_add_address (
      G_SOCKET_LISTENER (server->service), address, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_TCP, nullptr, nullptr, error);
  g_object_unref (address);
  g_object_unref (loopback);
  if (bound) {
    g_signal_connect (server->service, "incoming", G_CALLBACK (on_incoming),
        server);
    g_socket_service_start (server->service);
  }
  g_main_context_pop_thread_default (server->context);
  if (!bound) {
    server_free (server);
    return nullptr;
  }
  server->thread = g_thread_new ("gpufan-metrics", server_thread, server);
  return server;
}

void
gst_gpufan_metrics_server_stop (GstGpuFanMetricsServer * server)
{
  if (!server)
    return;
  g_main_context_invoke (server->context, stop_on_server_thread, server);
  g_thread_join (server->thread);
  server_free (server);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufan-lane-worker: runs one lane's branch for a remote gpufanremote.
 *
 *   gpufan-lane-worker --listen srt://HOST:PORT --branch "DESC"
 *       [--passphrase P] [--pbkeylen 16|24|32] [--health-port N]
 *
 * Pipeline: srtsrc (listener, PORT) ! gdpdepay ! BRANCH ! GDP pay ! srtsink
 * (listener, PORT+1): the client sends on PORT and reads the results from
 * PORT+1 (srtsrc and srtsink each own their SRT socket, so one connection
 * cannot carry both ways). One client at a time; when it goes away (closed,
 * broken, or its stream fails) the pipeline is torn down and listens for the
 * next. SIGTERM drains: EOS through the branch, then exit 0. */
#include <gio/gio.h>
#include <gst/gst.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gdp-guard.h"
#include "remote/gstgpufanremotewire.h"
#include "remote/gstgpufanwirepay.h"

/* The item field of gpufanout's chunk events (its drain's EOS, its reset's
 * flush): gstgpufanprotocol.cpp's ITEM_SEQ_FIELD. */
static constexpr const char * kItemSeqField = "gpufan-seq";
/* The wire's payloader, registered under this name in this process. */
#define kWirePay "gpufanlaneworkerpay"

/* The most one GDP packet may carry: a 4K RGBA frame is 33 MB. */
static constexpr guint kDefaultMaxPacket = 64 * 1024 * 1024;
/* How long a SIGTERM drain may take before the worker gives up. */
static constexpr guint kDefaultDrainTimeoutS = 30;
/* The longest srtsrc waits in one poll (see build_pipeline). */
static constexpr gint kPollTimeoutMs = 500;

enum class State { kStarting, kReady, kDraining };

struct Worker {
  std::string host, branch, passphrase;
  guint port = 0;
  gint pbkeylen = 0;
  gint peer_idle_timeout_ms = 0;
  GMainLoop * loop = nullptr;
  GstElement * pipeline = nullptr;
  GstElement * src = nullptr;
  std::atomic<State> state{ State::kStarting };
  std::atomic<bool> client{ false };
  /* the client also connected to PORT+1, where its results go */
  std::atomic<bool> back_connected{ false };
  /* counts the pipeline's starts: a deadline set for one client does not
   * act on the next */
  std::atomic<guint> generation{ 0 };
  /* --client-idle-timeout: a client that sent nothing for this long is
   * dropped (0: never); @last_input is when its last bytes came, in
   * g_get_monotonic_time () microseconds */
  guint client_idle_timeout_s = 60;
  std::atomic<gint64> last_input{ 0 };
  std::atomic<bool> reset_pending{ false };
  GdpGuard guard{ kDefaultMaxPacket };
  /* Chunk mode: the client resets the branch (a flush naming the chunk)
   * right after the chunk's drain (an EOS naming it), without waiting for
   * the results; the flush is held until the drain is out of the branch,
   * which a queue in the branch would otherwise let it overtake. */
  std::mutex drain_lock;
  std::condition_variable drain_cond;
  bool drain_out = false;  /* the drain of drained_seq left the branch */
  guint64 drained_seq = 0;
  bool closing = false;    /* the pipeline is being torn down */
  guint drain_timeout_s = kDefaultDrainTimeoutS;
  int exit_code = 0;
};

static void
log_line (const std::string & text)
{
  g_print ("gpufan-lane-worker: %s\n", text.c_str ());
}

static std::string
srt_uri (const Worker & w, guint port)
{
  std::string uri = "srt://" + w.host + ":" + std::to_string (port)
      + "?mode=listener&" GST_GPUFAN_REMOTE_SRT_QUERY;
  if (w.peer_idle_timeout_ms > 0)
    uri += "&peeridletimeo=" + std::to_string (w.peer_idle_timeout_ms);
  return uri;
}

static gboolean restart_pipeline (gpointer data);

/* From any thread: the client is gone (or its stream failed); the main
 * loop tears the pipeline down and listens again. */
static void
client_gone (Worker * w, const std::string & why)
{
  if (w->state.load () == State::kDraining)
    return;
  if (w->reset_pending.exchange (true))
    return;
  log_line ("client disconnected: " + why);
  g_idle_add (restart_pipeline, w);
}

/* How long a client that connected to PORT has to connect to PORT+1 too:
 * until then the branch's first result would wait for it, and with it the
 * worker's input (a client that never does would hold the worker). */
static constexpr guint kBackConnectTimeoutS = 10;

struct ClientDeadline {
  Worker * worker;
  guint generation;
};

/* Calls @passed on the main loop after @ms for this client (the pipeline's
 * start @generation): a later client's start makes it a no-op. */
static void
arm_client_deadline (Worker * w, guint generation, guint ms,
    GSourceFunc passed)
{
  g_timeout_add_full (G_PRIORITY_DEFAULT, ms, passed,
      new ClientDeadline{ w, generation },
      [] (gpointer d) { delete static_cast<ClientDeadline *> (d); });
}

static gboolean
back_deadline_passed (gpointer data)
{
  const ClientDeadline * d = static_cast<ClientDeadline *> (data);
  Worker * w = d->worker;
  if (d->generation == w->generation.load () && !w->back_connected.load ())
    client_gone (w, "it did not connect to the results port "
        + std::to_string (w->port + 1) + " within "
        + std::to_string (kBackConnectTimeoutS) + " s");
  return G_SOURCE_REMOVE;
}

/* The client's idle deadline: armed for the rest of the period since its
 * last bytes, dropping it when nothing came for the whole period. GStreamer's
 * srtsrc listener can miss a caller that closes just after connecting (SRT
 * reports the broken socket before srtsrc polls it): without this bound
 * such a ghost would hold the worker for good. */
static gboolean
idle_deadline_passed (gpointer data)
{
  const ClientDeadline * d = static_cast<ClientDeadline *> (data);
  Worker * w = d->worker;
  if (d->generation != w->generation.load ())
    return G_SOURCE_REMOVE;
  const gint64 period = (gint64) w->client_idle_timeout_s * G_USEC_PER_SEC;
  const gint64 idle = g_get_monotonic_time () - w->last_input.load ();
  if (idle >= period) {
    client_gone (w, "it sent nothing for "
        + std::to_string (w->client_idle_timeout_s)
        + " s (--client-idle-timeout)");
    return G_SOURCE_REMOVE;
  }
  arm_client_deadline (w, d->generation, (guint) ((period - idle) / 1000) + 1,
      idle_deadline_passed);
  return G_SOURCE_REMOVE;
}

static void
on_caller_added (GstElement *, gint, GSocketAddress * address, Worker * w)
{
  gchar * text = address
      ? g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (address))
      : g_strdup ("?");
  if (!w->client.exchange (true)) {
    log_line (std::string ("client connected from ") + text);
    const guint generation = w->generation.load ();
    arm_client_deadline (w, generation, kBackConnectTimeoutS * 1000,
        back_deadline_passed);
    w->last_input = g_get_monotonic_time ();
    if (w->client_idle_timeout_s > 0)
      arm_client_deadline (w, generation, w->client_idle_timeout_s * 1000,
          idle_deadline_passed);
  }
  g_free (text);
}

static void
on_back_caller_added (GstElement *, gint, GSocketAddress *, Worker * w)
{
  w->back_connected = true;
}

/* A listener's caller that went away (closed, or silent past the peer idle
 * timeout): srtsrc and srtsink say so by this signal and wait for another
 * caller rather than ending their stream. */
static void
on_caller_removed (GstElement * element, gint, GSocketAddress *, Worker * w)
{
  client_gone (w, std::string ("the client closed the connection (")
      + GST_OBJECT_NAME (element) + ")");
}

/* srtsrc's own EOS is the connection's end (the stream's EOS travels as a
 * custom event until after gdpdepay); the guard looks at every byte. */
static GstPadProbeReturn
src_probe (GstPad *, GstPadProbeInfo * info, gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) != GST_EVENT_EOS
        || w->state.load () == State::kDraining)
      return GST_PAD_PROBE_OK;
    client_gone (w, "the client closed the connection");
    return GST_PAD_PROBE_DROP;
  }
  GstBuffer * buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstMapInfo map;
  if (!gst_buffer_map (buffer, &map, GST_MAP_READ))
    return GST_PAD_PROBE_DROP;
  w->last_input = g_get_monotonic_time ();
  const bool ok = w->guard.Feed (map.data, map.size);
  gst_buffer_unmap (buffer, &map);
  if (ok)
    return GST_PAD_PROBE_OK;
  client_gone (w, "bad input: " + w->guard.error ());
  return GST_PAD_PROBE_DROP;
}

/* A drain is over when its EOS has come through the branch. */
static GstPadProbeReturn
drained_probe (GstPad *, GstPadProbeInfo * info, gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  GstEvent * event = GST_PAD_PROBE_INFO_EVENT (info);
  const GstStructure * s = gst_event_get_structure (event);
  guint64 seq = 0;
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS && s
      && gst_structure_get_uint64 (s, kItemSeqField, &seq)) {
    std::lock_guard<std::mutex> lk (w->drain_lock);
    w->drain_out = true;
    w->drained_seq = seq;
    w->drain_cond.notify_all ();
  }
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS
      && w->state.load () == State::kDraining)
    g_idle_add (
        [] (gpointer d) -> gboolean {
          Worker * w = static_cast<Worker *> (d);
          log_line ("drained; exiting");
          g_main_loop_quit (w->loop);
          return G_SOURCE_REMOVE;
        },
        w);
  return GST_PAD_PROBE_OK;
}

/* A chunk's reset waits for its drain to leave the branch (see Worker). */
static GstPadProbeReturn
reset_gate_probe (GstPad *, GstPadProbeInfo * info, gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  GstEvent * event = GST_PAD_PROBE_INFO_EVENT (info);
  const GstStructure * s = gst_event_get_structure (event);
  guint64 seq = 0;
  if (GST_EVENT_TYPE (event) != GST_EVENT_FLUSH_START || !s
      || !gst_structure_get_uint64 (s, kItemSeqField, &seq))
    return GST_PAD_PROBE_OK;
  std::unique_lock<std::mutex> lk (w->drain_lock);
  const bool out = w->drain_cond.wait_for (lk,
      std::chrono::seconds (w->drain_timeout_s), [w, seq] {
        return w->closing || (w->drain_out && w->drained_seq == seq);
      });
  w->drain_out = false;
  const bool closing = w->closing;
  lk.unlock ();
  if (!out && !closing)
    client_gone (w, "the branch did not finish chunk "
        + std::to_string (seq) + "'s drain within "
        + std::to_string (w->drain_timeout_s) + " s");
  return GST_PAD_PROBE_OK;
}

/* Wakes a held reset: the pipeline is about to stop (@closing), or starts
 * again. */
static void
set_closing (Worker * w, bool closing)
{
  std::lock_guard<std::mutex> lk (w->drain_lock);
  w->closing = closing;
  w->drain_out = false;
  w->drain_cond.notify_all ();
}

static GstElement *
build_pipeline (Worker * w, std::string * error)
{
  const std::string desc = "srtsrc name=in ! gdpdepay name=depay ! "
      + w->branch + " ! " kWirePay " name=pay ! srtsink name=out sync=false "
      + "async=false";
  GError * err = nullptr;
  GstElement * pipeline = gst_parse_launch_full (desc.c_str (), nullptr,
      GST_PARSE_FLAG_FATAL_ERRORS, &err);
  if (!pipeline) {
    *error = std::string ("bad --branch: ") + (err ? err->message : "?");
    g_clear_error (&err);
    return nullptr;
  }
  GstElement * in = gst_bin_get_by_name (GST_BIN (pipeline), "in");
  GstElement * out = gst_bin_get_by_name (GST_BIN (pipeline), "out");
  GstElement * pay = gst_bin_get_by_name (GST_BIN (pipeline), "pay");
  GstElement * depay = gst_bin_get_by_name (GST_BIN (pipeline), "depay");
  for (GstElement * e : { in, out }) {
    const std::string uri = srt_uri (*w, e == in ? w->port : w->port + 1);
    g_object_set (e, "uri", uri.c_str (), nullptr);
    if (!w->passphrase.empty ())
      g_object_set (e, "passphrase", w->passphrase.c_str (), nullptr);
    if (w->pbkeylen)
      gst_util_set_object_arg (G_OBJECT (e), "pbkeylen",
          std::to_string (w->pbkeylen).c_str ());
  }
  /* srtsrc's unlock does not cut a poll short: without a bound, tearing
   * the pipeline down after a client left waits for the next packet that
   * never comes */
  g_object_set (in, "poll-timeout", kPollTimeoutMs, nullptr);
  g_signal_connect (in, "caller-added", G_CALLBACK (on_caller_added), w);
  g_signal_connect (out, "caller-added", G_CALLBACK (on_back_caller_added),
      w);
  for (GstElement * e : { in, out })
    g_signal_connect (e, "caller-removed", G_CALLBACK (on_caller_removed), w);
  GstPad * pad = gst_element_get_static_pad (in, "src");
  gst_pad_add_probe (pad,
      (GstPadProbeType)(GST_PAD_PROBE_TYPE_BUFFER
          | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      src_probe, w, nullptr);
  gst_object_unref (pad);
  /* before the wire's probe, which turns the EOS into its custom event */
  pad = gst_element_get_static_pad (pay, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, drained_probe,
      w, nullptr);
  gst_object_unref (pad);
  gst_gpufan_remote_wire_payloader (pay);
  gst_gpufan_remote_wire_depayloader (depay);
  pad = gst_element_get_static_pad (depay, "src");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_EVENT_FLUSH, reset_gate_probe,
      w, nullptr);
  gst_object_unref (pad);
  w->src = in;
  for (GstElement * e : { out, pay, depay })
    gst_object_unref (e);
  return pipeline;
}

/* Starts listening: FALSE if the pipeline cannot start (the port taken). */
static bool
start_pipeline (Worker * w)
{
  w->guard.Reset ();
  w->client = false;
  w->back_connected = false;
  w->generation++;
  set_closing (w, false);
  if (gst_element_set_state (w->pipeline, GST_STATE_PLAYING)
      == GST_STATE_CHANGE_FAILURE)
    return false;
  w->state = State::kReady;
  return true;
}

static gboolean
restart_pipeline (gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  if (w->state.load () == State::kDraining)
    return G_SOURCE_REMOVE;
  w->state = State::kStarting;
  set_closing (w, true);
  gst_element_set_state (w->pipeline, GST_STATE_NULL);
  w->reset_pending = false;
  if (!start_pipeline (w)) {
    log_line ("cannot listen again on " + srt_uri (*w, w->port));
    w->exit_code = 1;
    g_main_loop_quit (w->loop);
    return G_SOURCE_REMOVE;
  }
  log_line ("waiting for the next client on " + srt_uri (*w, w->port));
  return G_SOURCE_REMOVE;
}

static gboolean
on_bus (GstBus *, GstMessage * message, gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  if (GST_MESSAGE_TYPE (message) != GST_MESSAGE_ERROR)
    return G_SOURCE_CONTINUE;
  GError * err = nullptr;
  gchar * debug = nullptr;
  gst_message_parse_error (message, &err, &debug);
  const std::string text = std::string (GST_OBJECT_NAME (GST_MESSAGE_SRC (
                                            message)))
      + ": " + err->message + " (" + (debug ? debug : "") + ")";
  g_clear_error (&err);
  g_free (debug);
  if (w->state.load () == State::kDraining) {
    log_line ("error while draining: " + text);
    w->exit_code = 1;
    g_main_loop_quit (w->loop);
  } else {
    client_gone (w, "lane error: " + text);
  }
  return G_SOURCE_CONTINUE;
}

static gboolean
on_sigterm (gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  if (w->state.exchange (State::kDraining) == State::kDraining)
    return G_SOURCE_REMOVE;
  if (!w->client.load ()) {
    log_line ("SIGTERM with no client; exiting");
    g_main_loop_quit (w->loop);
    return G_SOURCE_REMOVE;
  }
  log_line ("SIGTERM: draining the client's lane");
  gst_element_send_event (w->src, gst_event_new_eos ());
  g_timeout_add_seconds (w->drain_timeout_s,
      [] (gpointer d) -> gboolean {
        Worker * w = static_cast<Worker *> (d);
        log_line ("the drain did not end in time; exiting");
        w->exit_code = 1;
        g_main_loop_quit (w->loop);
        return G_SOURCE_REMOVE;
      },
      w);
  return G_SOURCE_REMOVE;
}

/* SIGTERM and SIGINT are blocked in every thread and taken here: the
 * first asks the main loop to drain; from then on the worker is gone by
 * --drain-timeout (plus the teardown's grace) whatever the main loop does,
 * for a branch or an SRT element stuck in a state change would keep it
 * from ever running its own timer. A second signal exits at once. The
 * thread also ends when main is done (@finished). */
struct Stopper {
  std::mutex lock;
  std::condition_variable cond;
  bool finished = false;
  sigset_t signals;
};

static constexpr guint kTeardownGraceS = 5;

static void
stopper_thread (Worker * w, Stopper * stopper)
{
  int sig = 0;
  /* woken by a signal, or by main's own SIGUSR1 when it is done */
  if (sigwait (&stopper->signals, &sig) != 0 || sig == SIGUSR1)
    return;
  g_main_context_invoke (nullptr, on_sigterm, w);
  {
    std::unique_lock<std::mutex> lk (stopper->lock);
    if (stopper->cond.wait_for (lk,
            std::chrono::seconds (w->drain_timeout_s + kTeardownGraceS),
            [stopper] { return stopper->finished; }))
      return;
  }
  log_line ("the drain did not end within --drain-timeout ("
      + std::to_string (w->drain_timeout_s) + " s) and "
      + std::to_string (kTeardownGraceS) + " s more; exiting");
  _exit (1);
}

/* --health-port: GET /healthz is 200 while listening, 503 otherwise. */
static gboolean
on_health (GThreadedSocketService *, GSocketConnection * connection,
    GObject *, gpointer data)
{
  Worker * w = static_cast<Worker *> (data);
  GSocket * socket = g_socket_connection_get_socket (connection);
  g_socket_set_timeout (socket, 5);
  gchar request[1024];
  gssize n = g_input_stream_read (
      g_io_stream_get_input_stream (G_IO_STREAM (connection)), request,
      sizeof (request) - 1, nullptr, nullptr);
  request[MAX (n, 0)] = '\0';
  const bool healthz = g_str_has_prefix (request, "GET /healthz ")
      || g_str_has_prefix (request, "GET /healthz?");
  const bool ready = w->state.load () == State::kReady;
  const gchar * status = !healthz ? "404 Not Found"
      : ready                     ? "200 OK"
                                  : "503 Service Unavailable";
  const gchar * body = !healthz ? "not found\n" : ready ? "ok\n" : "not ready\n";
  gchar * reply = g_strdup_printf ("HTTP/1.0 %s\r\nContent-Type: text/plain"
                                   "\r\nContent-Length: %zu\r\nConnection: "
                                   "close\r\n\r\n%s",
      status, strlen (body), body);
  g_output_stream_write_all (
      g_io_stream_get_output_stream (G_IO_STREAM (connection)), reply,
      strlen (reply), nullptr, nullptr, nullptr);
  g_free (reply);
  return TRUE;
}

static int
fail (const std::string & text)
{
  g_printerr ("gpufan-lane-worker: %s\n", text.c_str ());
  return 2;
}

int
main (int argc, char ** argv)
{
  /* before any thread exists, so that every one inherits the mask */
  Stopper stopper;
  sigemptyset (&stopper.signals);
  for (int sig : { SIGTERM, SIGINT, SIGUSR1 })
    sigaddset (&stopper.signals, sig);
  pthread_sigmask (SIG_BLOCK, &stopper.signals, nullptr);

  gchar * listen = nullptr;
  gchar * branch = nullptr;
  gchar * passphrase = nullptr;
  gint pbkeylen = 0, health_port = 0, peer_idle = 0, max_packet = 0;
  gint drain_timeout = kDefaultDrainTimeoutS;
  gint client_idle = 60;
  GOptionEntry entries[] = {
    { "listen", 'l', 0, G_OPTION_ARG_STRING, &listen,
        "Where to listen: srt://HOST:PORT (results go out on PORT+1)",
        "URI" },
    { "branch", 'b', 0, G_OPTION_ARG_STRING, &branch,
        "The lane's branch, a gst-launch description (as gpufanbin's)",
        "DESC" },
    { "passphrase", 'p', 0, G_OPTION_ARG_STRING, &passphrase,
        "SRT AES passphrase (10 to 79 characters); required unless HOST is "
        "a loopback address",
        "P" },
    { "pbkeylen", 0, 0, G_OPTION_ARG_INT, &pbkeylen,
        "AES key length in bytes: 16, 24 or 32 (default: SRT's, 16)", "N" },
    { "health-port", 0, 0, G_OPTION_ARG_INT, &health_port,
        "Serve HTTP GET /healthz on this TCP port (200 ready, 503 draining)",
        "N" },
    { "peer-idle-timeout", 0, 0, G_OPTION_ARG_INT, &peer_idle,
        "Milliseconds of silence after which a client counts as gone "
        "(default: SRT's, 5000)",
        "MS" },
    { "client-idle-timeout", 0, 0, G_OPTION_ARG_INT, &client_idle,
        "Seconds without input after which a client is dropped (default "
        "60; 0: never)",
        "S" },
    { "max-packet", 0, 0, G_OPTION_ARG_INT, &max_packet,
        "Largest GDP packet accepted, in bytes (default 64 MiB)", "BYTES" },
    { "drain-timeout", 0, 0, G_OPTION_ARG_INT, &drain_timeout,
        "Seconds a SIGTERM drain may take (default 30)", "S" },
    { nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr }
  };
  GOptionContext * context = g_option_context_new ("- run one gpufan lane's "
                                                   "branch for a remote "
                                                   "gpufanremote");
  g_option_context_add_main_entries (context, entries, nullptr);
  g_option_context_add_group (context, gst_init_get_option_group ());
  GError * err = nullptr;
  if (!g_option_context_parse (context, &argc, &argv, &err)) {
    g_option_context_free (context);
    const std::string text = err->message;
    g_clear_error (&err);
    return fail (text);
  }
  g_option_context_free (context);

  Worker w;
  std::string error;
  if (!listen || !branch)
    return fail ("--listen srt://HOST:PORT and --branch \"DESC\" are both "
                 "required (see --help)");
  if (!gst_gpufan_remote_parse_uri (listen, &w.host, &w.port, &error))
    return fail ("--listen: " + error);
  w.branch = branch;
  w.passphrase = passphrase ? passphrase : "";
  if (w.passphrase.empty () && !gst_gpufan_remote_host_is_loopback (w.host))
    return fail ("refusing to listen on " + w.host
        + " without --passphrase: it is not a loopback address, and the "
          "frames would cross the network unencrypted. Give --passphrase "
          "(SRT AES), or listen on 127.0.0.1");
  if (!w.passphrase.empty ()
      && (w.passphrase.size () < 10 || w.passphrase.size () > 79))
    return fail ("--passphrase must have 10 to 79 characters (SRT's rule)");
  if (pbkeylen != 0 && pbkeylen != 16 && pbkeylen != 24 && pbkeylen != 32)
    return fail ("--pbkeylen must be 16, 24 or 32");
  w.pbkeylen = pbkeylen;
  w.peer_idle_timeout_ms = MAX (peer_idle, 0);
  w.client_idle_timeout_s = (guint) MAX (client_idle, 0);
  if (max_packet > 0)
    w.guard = GdpGuard ((uint32_t) max_packet);
  w.drain_timeout_s = (guint) MAX (drain_timeout, 1);
  g_free (listen);
  g_free (branch);
  g_free (passphrase);

  gst_element_register (nullptr, kWirePay, GST_RANK_NONE,
      gst_gpufan_wire_pay_get_type ());
  w.pipeline = build_pipeline (&w, &error);
  if (!w.pipeline)
    return fail (error);
  w.loop = g_main_loop_new (nullptr, FALSE);
  GstBus * bus = gst_element_get_bus (w.pipeline);
  gst_bus_add_watch (bus, on_bus, &w);

  GSocketService * health = nullptr;
  if (health_port > 0) {
    health = g_threaded_socket_service_new (2);
    if (!g_socket_listener_add_inet_port (G_SOCKET_LISTENER (health),
            (guint16) health_port, nullptr, &err)) {
      const std::string text = err->message;
      g_clear_error (&err);
      return fail ("--health-port " + std::to_string (health_port) + ": "
          + text);
    }
    g_signal_connect (health, "run", G_CALLBACK (on_health), &w);
    g_socket_service_start (health);
  }

  if (!start_pipeline (&w)) {
    gst_element_set_state (w.pipeline, GST_STATE_NULL);
    return fail ("cannot listen on " + srt_uri (w, w.port) + " and "
        + srt_uri (w, w.port + 1) + " (ports taken?)");
  }
  log_line ("listening on " + srt_uri (w, w.port) + " (results on port "
      + std::to_string (w.port + 1) + "), branch \"" + w.branch + "\"");
  /* a signal that came before is pending and taken now */
  std::thread stop_thread (stopper_thread, &w, &stopper);
  g_main_loop_run (w.loop);

  set_closing (&w, true);
  gst_element_set_state (w.pipeline, GST_STATE_NULL);
  {
    std::lock_guard<std::mutex> lk (stopper.lock);
    stopper.finished = true;
    stopper.cond.notify_all ();
  }
  pthread_kill (stop_thread.native_handle (), SIGUSR1);
  stop_thread.join ();
  if (health) {
    g_socket_service_stop (health);
    g_socket_listener_close (G_SOCKET_LISTENER (health));
    g_object_unref (health);
  }
  gst_bus_remove_watch (bus);
  gst_object_unref (bus);
  gst_object_unref (w.src);
  gst_object_unref (w.pipeline);
  g_main_loop_unref (w.loop);
  gst_deinit ();
  return w.exit_code;
}

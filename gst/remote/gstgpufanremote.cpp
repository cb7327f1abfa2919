/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-gpufanremote
 * @title: gpufanremote
 *
 * A lane's branch that runs in another process or machine: a
 * gpufan-lane-worker started with `--listen srt://HOST:PORT`. Buffers,
 * caps, timestamps and serialized events go out GDP-framed over SRT
 * (`gdppay ! srtsink`, caller, to PORT) and the branch's output comes back
 * the same way (`srtsrc ! gdpdepay`, caller, from PORT+1).
 *
 * It answers locally what gpufanout and gpufanin ask each other through a
 * branch: their pairing queries cross it from one pad to the other, a
 * `gst.cuda.context` query from downstream goes to the lane's upstream,
 * and an allocation query is answered with "any memory" (the wire copies
 * the bytes). The #GstGpuFanMeta does not cross the wire: gpufanin matches
 * what comes back by the lane's FIFO order and PTS, which GDP keeps.
 *
 * A broken connection (the worker killed, a network cut, a wrong
 * passphrase, a worker that closed the lane after its branch failed) is an
 * ERROR of this element, posted once: in gpufanbin, or with gpufanout's
 * on-lane-error=replay, the lane's frames go to the other lanes. SRT
 * notices a silent peer after #GstGpuFanRemote:peer-idle-timeout.
 *
 * The element holds an SRT source, which is live: a pipeline with a remote
 * lane does not preroll (its state change to PAUSED returns NO_PREROLL) and
 * its results come back once it is PLAYING.
 *
 * A #GstGpuFanRemote:uri whose host is not a loopback address needs a
 * #GstGpuFanRemote:passphrase (SRT AES); without one the READY to PAUSED
 * change fails with an error that says so.
 *
 * ## Example launch line
 * |[
 * gpufan-lane-worker --listen srt://127.0.0.1:7001 --branch "videoflip method=clockwise" &
 * gst-launch-1.0 videotestsrc num-buffers=300 ! gpufanout name=f \
 *   gpufanin name=i ! fakesink \
 *   f.src_0 ! queue ! videoflip method=clockwise ! i.sink_0 \
 *   f.src_1 ! gpufanremote uri=srt://127.0.0.1:7001 ! i.sink_1
 * ]| One local lane and one lane in the worker process.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanremote.h"

#include <atomic>
#include <string>

#include "common/gstgpufanprotocol.h"
#include "gstgpufanremotewire.h"
#include "gstgpufanwirepay.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_remote_debug);
#define GST_CAT_DEFAULT gst_gpufan_remote_debug

#define DEFAULT_PEER_IDLE_TIMEOUT 5000
#define DEFAULT_PBKEYLEN 0

enum {
  PROP_0,
  PROP_URI,
  PROP_PASSPHRASE,
  PROP_PBKEYLEN,
  PROP_PEER_IDLE_TIMEOUT,
};

struct _GstGpuFanRemote {
  GstBin parent;

  GstElement * pay, * out, * back, * depay;
  GstPad * sinkpad, * srcpad;

  /* Guarded by the object lock. */
  gchar * uri;
  gchar * passphrase;
  guint pbkeylen;
  gint peer_idle_timeout;

  /* One ERROR per run: the two SRT elements both see a broken link. */
  std::atomic<bool> error_posted;
  /* The stream's EOS came back: the worker may close the link now. */
  std::atomic<bool> ended;
  /* Set at NULL->READY: the settings allowed a link. */
  bool link_ok;
};

G_DEFINE_TYPE (GstGpuFanRemote, gst_gpufan_remote, GST_TYPE_BIN);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanremote, "gpufanremote",
    GST_RANK_NONE, GST_TYPE_GPUFAN_REMOTE,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_remote_debug, "gpufanremote", 0,
        "gpufan remote lane"));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

static std::string
uri_text (GstGpuFanRemote * self)
{
  GST_OBJECT_LOCK (self);
  std::string uri = self->uri ? self->uri : "(no uri)";
  GST_OBJECT_UNLOCK (self);
  return uri;
}

/* Posts the lane's one ERROR for this run. */
static void
post_lane_error (GstGpuFanRemote * self, const std::string & what,
    const std::string & detail)
{
  if (self->error_posted.exchange (true))
    return;
  const std::string uri = uri_text (self);
  GST_ELEMENT_ERROR (self, RESOURCE, READ,
      ("Remote lane %s: %s", uri.c_str (), what.c_str ()), ("%s",
          detail.c_str ()));
}

/* --- queries: what a branch answers, answered here ---------------------- */

/* What the ghost pad would do: ask the child it leads to. */
static gboolean
query_inside (GstPad * pad, GstQuery * query)
{
  GstProxyPad * internal = gst_proxy_pad_get_internal (GST_PROXY_PAD (pad));
  if (!internal)
    return FALSE;
  gboolean res = gst_pad_peer_query (GST_PAD (internal), query);
  gst_object_unref (internal);
  return res;
}

static gboolean
gst_gpufan_remote_sink_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (parent);
  /* a gpufanout probes for the gpufanin at the end of its lane */
  if (gst_gpufan_is_pair_query (query)) {
    /* the worker holds a chunk's reset until its drain is out */
    gst_gpufan_pair_query_set_serial_reset (query);
    return gst_pad_peer_query (self->srcpad, query);
  }
  if (GST_QUERY_TYPE (query) == GST_QUERY_ALLOCATION)
    return TRUE; /* the bytes are copied onto the wire: any memory */
  return query_inside (pad, query);
}

static gboolean
gst_gpufan_remote_src_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (parent);
  /* a gpufanin asks which lane feeds it; a CUDA element after us asks for
   * the lane's context: both are the lane's upstream's to answer */
  if (gst_gpufan_is_pair_query (query)
      || GST_QUERY_TYPE (query) == GST_QUERY_CONTEXT)
    return gst_pad_peer_query (self->sinkpad, query);
  return query_inside (pad, query);
}

/* --- the link's end ----------------------------------------------------- */

/* srtsrc's own EOS is the connection's end (the stream's EOS comes as the
 * wire's custom event): after the stream's EOS it is the worker letting
 * go, before it the lane is lost. */
static GstPadProbeReturn
link_eos_probe (GstPad *, GstPadProbeInfo * info, gpointer data)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (data);
  if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) != GST_EVENT_EOS)
    return GST_PAD_PROBE_OK;
  if (!self->ended.load ())
    post_lane_error (self, "the worker closed the connection",
        "see the worker's log: its branch may have failed on this lane's "
        "stream, or it was stopped");
  return GST_PAD_PROBE_DROP;
}

static GstPadProbeReturn
stream_end_probe (GstPad *, GstPadProbeInfo * info, gpointer data)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (data);
  GstEvent * event = GST_PAD_PROBE_INFO_EVENT (info);
  const GstStructure * s = gst_event_get_structure (event);
  /* a chunk's drain carries the item fields and a flush follows it; the
   * stream's own EOS does not */
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS
      && !(s && gst_structure_has_field (s, "gpufan-seq")))
    self->ended = true;
  else if (GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START)
    self->ended = false;
  return GST_PAD_PROBE_OK;
}

/* A child's ERROR becomes the lane's, in words about the remote lane. */
static void
gst_gpufan_remote_handle_message (GstBin * bin, GstMessage * message)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (bin);
  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR
      && GST_MESSAGE_SRC (message) != GST_OBJECT_CAST (self)) {
    GError * err = nullptr;
    gchar * debug = nullptr;
    gst_message_parse_error (message, &err, &debug);
    GstObject * src = GST_MESSAGE_SRC (message);
    const bool link = src == GST_OBJECT_CAST (self->out)
        || src == GST_OBJECT_CAST (self->back);
    const std::string what = link
        ? "the connection to the worker failed or broke (worker not "
          "running or gone, network cut, or a passphrase that does not "
          "match the worker's)"
        : std::string ("the worker's data cannot be read: ") + err->message;
    post_lane_error (self, what,
        std::string (GST_OBJECT_NAME (src)) + ": " + err->message + " ("
            + (debug ? debug : "") + ")");
    g_clear_error (&err);
    g_free (debug);
    gst_message_unref (message);
    return;
  }
  GST_BIN_CLASS (gst_gpufan_remote_parent_class)->handle_message (bin,
      message);
}

/* --- states ------------------------------------------------------------- */

/* The SRT elements' settings, from ours; FALSE (with an ERROR posted if
 * @post) when ours do not allow a link. */
static gboolean
configure_link (GstGpuFanRemote * self, bool post)
{
  GST_OBJECT_LOCK (self);
  const std::string uri = self->uri ? self->uri : "";
  const std::string passphrase = self->passphrase ? self->passphrase : "";
  const guint pbkeylen = self->pbkeylen;
  const gint idle = self->peer_idle_timeout;
  GST_OBJECT_UNLOCK (self);

  std::string host, error;
  guint port = 0;
  if (!gst_gpufan_remote_parse_uri (uri, &host, &port, &error)) {
    if (post)
      GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("gpufanremote: uri %s", error.c_str ()), (NULL));
    return FALSE;
  }
  if (passphrase.empty () && !gst_gpufan_remote_host_is_loopback (host)) {
    if (post)
      GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("gpufanremote: %s is not a loopback address and no passphrase is "
         "set: the frames would cross the network unencrypted. Set "
         "passphrase (the worker's --passphrase)",
            host.c_str ()),
        ("uri=%s", uri.c_str ()));
    return FALSE;
  }
  for (GstElement * e : { self->out, self->back }) {
    const std::string srt = "srt://" + host + ":"
        + std::to_string (e == self->out ? port : port + 1)
        + "?peeridletimeo=" + std::to_string (idle) + "&"
        + GST_GPUFAN_REMOTE_SRT_QUERY;
    g_object_set (e, "uri", srt.c_str (), "auto-reconnect", FALSE, nullptr);
    if (!passphrase.empty ())
      g_object_set (e, "passphrase", passphrase.c_str (), nullptr);
    if (pbkeylen)
      gst_util_set_object_arg (G_OBJECT (e), "pbkeylen",
          std::to_string (pbkeylen).c_str ());
  }
  return TRUE;
}

static GstStateChangeReturn
gst_gpufan_remote_change_state (GstElement * element,
    GstStateChange transition)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (element);
  /* srtsink and srtsrc take their uri in NULL only (they open at
   * NULL->READY): set there, and refused with the settings' error at
   * READY->PAUSED, before they connect */
  if (transition == GST_STATE_CHANGE_NULL_TO_READY)
    self->link_ok = configure_link (self, false);
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) {
    self->error_posted = false;
    self->ended = false;
    if (!self->link_ok && !configure_link (self, true))
      return GST_STATE_CHANGE_FAILURE;
  }
  return GST_ELEMENT_CLASS (gst_gpufan_remote_parent_class)
      ->change_state (element, transition);
}

/* --- the object --------------------------------------------------------- */

static void
gst_gpufan_remote_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (object);
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_URI:
      g_free (self->uri);
      self->uri = g_value_dup_string (value);
      break;
    case PROP_PASSPHRASE:
      g_free (self->passphrase);
      self->passphrase = g_value_dup_string (value);
      break;
    case PROP_PBKEYLEN:
      self->pbkeylen = g_value_get_uint (value);
      break;
    case PROP_PEER_IDLE_TIMEOUT:
      self->peer_idle_timeout = g_value_get_int (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_gpufan_remote_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (object);
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_URI:
      g_value_set_string (value, self->uri);
      break;
    case PROP_PBKEYLEN:
      g_value_set_uint (value, self->pbkeylen);
      break;
    case PROP_PEER_IDLE_TIMEOUT:
      g_value_set_int (value, self->peer_idle_timeout);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static GstElement *
make_child (GstGpuFanRemote * self, const gchar * factory, const gchar * name)
{
  GstElement * e = gst_element_factory_make (factory, name);
  if (!e)
    return nullptr;
  /* the SRT ends are a filter's insides: the bin is neither a sink (whose
   * EOS the pipeline would wait for) nor a source */
  GST_OBJECT_FLAG_UNSET (e, GST_ELEMENT_FLAG_SINK | GST_ELEMENT_FLAG_SOURCE);
  gst_bin_add (GST_BIN (self), e);
  return e;
}

static void
gst_gpufan_remote_init (GstGpuFanRemote * self)
{
  self->peer_idle_timeout = DEFAULT_PEER_IDLE_TIMEOUT;
  self->pbkeylen = DEFAULT_PBKEYLEN;
  new (&self->error_posted) std::atomic<bool> (false);
  new (&self->ended) std::atomic<bool> (false);

  self->pay = gst_gpufan_wire_pay_new ();
  gst_object_set_name (GST_OBJECT (self->pay), "pay");
  gst_bin_add (GST_BIN (self), self->pay);
  self->out = make_child (self, "srtsink", "out");
  self->back = make_child (self, "srtsrc", "back");
  self->depay = make_child (self, "gdpdepay", "depay");

  GstPad * sink_target = nullptr, * src_target = nullptr;
  if (self->pay && self->out && self->back && self->depay) {
    g_object_set (self->out, "sync", FALSE, "async", FALSE, nullptr);
    gst_element_link (self->pay, self->out);
    gst_element_link (self->back, self->depay);
    gst_gpufan_remote_wire_payloader (self->pay);
    gst_gpufan_remote_wire_depayloader (self->depay);
    GstPad * pad = gst_element_get_static_pad (self->back, "src");
    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
        link_eos_probe, self, nullptr);
    gst_object_unref (pad);
    pad = gst_element_get_static_pad (self->depay, "src");
    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
        stream_end_probe, self, nullptr);
    gst_object_unref (pad);
    sink_target = gst_element_get_static_pad (self->pay, "sink");
    src_target = gst_element_get_static_pad (self->depay, "src");
  }
  /* without gdpdepay, srtsink and kin (gst-plugins-bad) the pads have no
   * target and READY->PAUSED fails below */
  self->sinkpad = sink_target
      ? gst_ghost_pad_new_from_template ("sink", sink_target,
            gst_static_pad_template_get (&sink_template))
      : gst_ghost_pad_new_no_target_from_template ("sink",
            gst_static_pad_template_get (&sink_template));
  self->srcpad = src_target
      ? gst_ghost_pad_new_from_template ("src", src_target,
            gst_static_pad_template_get (&src_template))
      : gst_ghost_pad_new_no_target_from_template ("src",
            gst_static_pad_template_get (&src_template));
  g_clear_object (&sink_target);
  g_clear_object (&src_target);
  gst_pad_set_query_function (self->sinkpad, gst_gpufan_remote_sink_query);
  gst_pad_set_query_function (self->srcpad, gst_gpufan_remote_src_query);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}

static void
gst_gpufan_remote_finalize (GObject * object)
{
  GstGpuFanRemote * self = GST_GPUFAN_REMOTE (object);
  g_free (self->uri);
  g_free (self->passphrase);
  G_OBJECT_CLASS (gst_gpufan_remote_parent_class)->finalize (object);
}

static void
gst_gpufan_remote_class_init (GstGpuFanRemoteClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_remote_set_property;
  gobject_class->get_property = gst_gpufan_remote_get_property;
  gobject_class->finalize = gst_gpufan_remote_finalize;
  element_class->change_state
      = GST_DEBUG_FUNCPTR (gst_gpufan_remote_change_state);
  GST_BIN_CLASS (klass)->handle_message
      = GST_DEBUG_FUNCPTR (gst_gpufan_remote_handle_message);

  const GParamFlags ready = (GParamFlags)(G_PARAM_READWRITE
      | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  /**
   * GstGpuFanRemote:uri:
   *
   * The worker: srt://HOST:PORT, as its `--listen`. Frames go to PORT, the
   * results come from PORT+1.
   */
  g_object_class_install_property (gobject_class, PROP_URI,
      g_param_spec_string ("uri", "URI",
          "The gpufan-lane-worker: srt://HOST:PORT (results come from "
          "PORT+1)",
          nullptr, ready));
  /**
   * GstGpuFanRemote:passphrase:
   *
   * SRT AES passphrase (10 to 79 characters), the worker's `--passphrase`.
   * Required when the uri's host is not a loopback address.
   */
  g_object_class_install_property (gobject_class, PROP_PASSPHRASE,
      g_param_spec_string ("passphrase", "Passphrase",
          "SRT AES passphrase, the worker's --passphrase (required unless "
          "the host is a loopback address)",
          nullptr,
          (GParamFlags)(G_PARAM_WRITABLE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));
  /**
   * GstGpuFanRemote:pbkeylen:
   *
   * AES key length in bytes: 16, 24 or 32; 0 leaves SRT's default (16).
   */
  g_object_class_install_property (gobject_class, PROP_PBKEYLEN,
      g_param_spec_uint ("pbkeylen", "Key length",
          "AES key length in bytes (16, 24, 32; 0 = SRT's default)", 0, 32,
          DEFAULT_PBKEYLEN, ready));
  /**
   * GstGpuFanRemote:peer-idle-timeout:
   *
   * Milliseconds without a packet from the worker after which SRT calls the
   * connection broken (SRTO_PEERIDLETIMEO): how soon a killed worker or a
   * cut network becomes a lane error.
   */
  g_object_class_install_property (gobject_class, PROP_PEER_IDLE_TIMEOUT,
      g_param_spec_int ("peer-idle-timeout", "Peer idle timeout",
          "Milliseconds of silence from the worker after which the lane "
          "fails (SRT's peer idle timeout)",
          1, G_MAXINT, DEFAULT_PEER_IDLE_TIMEOUT, ready));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "GPU fan remote lane",
      "Generic/Bin",
      "A lane's branch run by a gpufan-lane-worker elsewhere, over SRT with "
      "GDP framing",
      "gst-gpufan developers");
}

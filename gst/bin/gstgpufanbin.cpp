/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-gpufanbin
 * @title: gpufanbin
 *
 * One element for the whole fan-out: a gpufanout, one instance of #GstGpuFanBin:branch
 * per lane, and a gpufanin, built when the bin goes to READY. The branch is
 * a gst-launch description of one lane's elements, with one unlinked input
 * and one unlinked output. The number of lanes is #GstGpuFanBin:lanes, or,
 * when that is 0, what `devices` says: one lane per GPU with `auto` (one per
 * CPU where there is no GPU), one per listed ordinal with `0,1,1`, N with
 * `cpu:N`, one per CPU with `cpu`.
 *
 * A branch element that is registered for one GPU only (GStreamer's
 * `nvh264dec`, `nvh264enc` and their kin have a read-only `cuda-device-id`;
 * the plain names are GPU 0, `nvh264device1dec` is GPU 1) is replaced, in a
 * lane on another GPU, by the factory of the same family registered for that
 * lane's GPU; where there is none, going to READY fails with an error that
 * names the element and the GPU.
 *
 * The fan-out's and fan-in's properties are the bin's own (same names, same
 * meaning); see gpufanout and gpufanin. The branch and the lane count are
 * read at each NULL to READY change.
 *
 * A lane whose branch fails leaves the stream and the frames it held go to
 * the other lanes (on-lane-error=replay, the bin's default): the output
 * keeps every frame, in order. The lane's elements' ERROR messages reach
 * the application as WARNINGs. After #GstGpuFanBin:lane-restart-delay a
 * fresh instance of the branch takes the failed lane's place.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=600 ! gpufanbin lanes=2 \
 *   branch="videoconvert ! gaussianblur" ! fakesink
 * ]| Two lanes, each with its own videoconvert and gaussianblur; the frames
 * come out in input order.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include "fanin/gstgpufanin.h"
#include "fanout/gstgpufanout.h"

GST_DEBUG_CATEGORY (gst_gpufan_bin_debug);
#define GST_CAT_DEFAULT gst_gpufan_bin_debug

#define DEFAULT_LANES 0

#define DEFAULT_RESTART_DELAY GST_SECOND
/* a day: far beyond any use, and safe to add to a steady clock */
#define MAX_RESTART_DELAY (24 * 3600 * GST_SECOND)

enum {
  BIN_PROP_0,
  BIN_PROP_BRANCH,
  BIN_PROP_LANES,
  BIN_PROP_RESTART_DELAY,
  BIN_PROP_LANE_PROPERTIES,
  BIN_PROP_REMOTE_LANES,
  BIN_PROP_REMOTE_PASSPHRASE,
  BIN_PROP_FIRST_CHILD,
};

/* The properties of the children that the bin offers as its own. */
struct ChildProperty {
  const gchar * name;
  bool on_fanin; /* else on the fan-out */
};

static const ChildProperty child_properties[] = {
  { "devices", false },
  { "policy", false },
  { "queue-size", false },
  { "max-in-flight", false },
  { "min-free-memory", false },
  { "min-compute-capability", false },
  { "require-codecs", false },
  { "host-pool-size", false },
  { "staging", false },
  { "chunk", false },
  { "chunk-frames", false },
  { "stats", false },
  { "stats-interval", false },
  { "stall-timeout", true },
  { "on-lane-error", false },
  { "on-stall", false },
  { "metrics-port", false },
};

/* The bin's own default: a failing lane leaves, its frames go to the
 * others, the stream goes on. */
#define DEFAULT_ON_LANE_ERROR_NICK "replay"

G_DEFINE_TYPE (GstGpuFanBin, gst_gpufan_bin, GST_TYPE_BIN);

GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanbin, "gpufanbin", GST_RANK_NONE,
    GST_TYPE_GPUFAN_BIN,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_bin_debug, "gpufanbin", 0,
        "gpufan bin"));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

/* A copy of a child's property spec, so that gst-inspect-1.0 gpufanbin
 * documents it with the child's words, range and default. */
static GParamSpec *
copy_param_spec (GParamSpec * p)
{
  const gchar * name = g_param_spec_get_name (p);
  const gchar * nick = g_param_spec_get_nick (p);
  const gchar * blurb = g_param_spec_get_blurb (p);
  const GParamFlags flags = p->flags;

  if (G_IS_PARAM_SPEC_UINT (p)) {
    GParamSpecUInt * s = G_PARAM_SPEC_UINT (p);
    return g_param_spec_uint (name, nick, blurb, s->minimum, s->maximum,
        s->default_value, flags);
  }
  if (G_IS_PARAM_SPEC_UINT64 (p)) {
    GParamSpecUInt64 * s = G_PARAM_SPEC_UINT64 (p);
    return g_param_spec_uint64 (name, nick, blurb, s->minimum, s->maximum,
        s->default_value, flags);
  }
  if (G_IS_PARAM_SPEC_INT (p)) {
    GParamSpecInt * s = G_PARAM_SPEC_INT (p);
    return g_param_spec_int (name, nick, blurb, s->minimum, s->maximum,
        s->default_value, flags);
  }
  if (G_IS_PARAM_SPEC_ENUM (p)) {
    GParamSpecEnum * s = G_PARAM_SPEC_ENUM (p);
    gint default_value = s->default_value;
    if (g_str_equal (name, "on-lane-error"))
      default_value
          = g_enum_get_value_by_nick (s->enum_class, DEFAULT_ON_LANE_ERROR_NICK)
                ->value;
    return g_param_spec_enum (name, nick, blurb, p->value_type, default_value,
        flags);
  }
  if (G_IS_PARAM_SPEC_FLAGS (p)) {
    GParamSpecFlags * s = G_PARAM_SPEC_FLAGS (p);
    return g_param_spec_flags (name, nick, blurb, p->value_type,
        s->default_value, flags);
  }
  if (G_IS_PARAM_SPEC_STRING (p))
    return g_param_spec_string (name, nick, blurb,
        G_PARAM_SPEC_STRING (p)->default_value, flags);
  if (G_IS_PARAM_SPEC_BOXED (p))
    return g_param_spec_boxed (name, nick, blurb, p->value_type, flags);
  g_assert_not_reached ();
  return nullptr;
}

static GstElement *
child_for (GstGpuFanBin * self, guint prop_id)
{
  const ChildProperty & c = child_properties[prop_id - BIN_PROP_FIRST_CHILD];
  return c.on_fanin ? self->fanin : self->fanout;
}

static void
gst_gpufan_bin_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (object);

  switch (prop_id) {
    case BIN_PROP_BRANCH:
      GST_OBJECT_LOCK (self);
      g_free (self->branch);
      self->branch = g_value_dup_string (value);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_LANES:
      GST_OBJECT_LOCK (self);
      self->lanes = g_value_get_uint (value);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_RESTART_DELAY:
      GST_OBJECT_LOCK (self);
      self->restart_delay_ns = g_value_get_uint64 (value);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_LANE_PROPERTIES:
      GST_OBJECT_LOCK (self);
      g_free (self->lane_properties);
      self->lane_properties = g_value_dup_string (value);
      GST_OBJECT_UNLOCK (self);
      fanbin::apply_lane_properties_to_running (self);
      break;
    case BIN_PROP_REMOTE_LANES:
      GST_OBJECT_LOCK (self);
      g_free (self->remote_lanes);
      self->remote_lanes = g_value_dup_string (value);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_REMOTE_PASSPHRASE:
      GST_OBJECT_LOCK (self);
      g_free (self->remote_passphrase);
      self->remote_passphrase = g_value_dup_string (value);
      GST_OBJECT_UNLOCK (self);
      break;
    default:
      if (prop_id < BIN_PROP_FIRST_CHILD) {
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
        break;
      }
      if (g_str_equal (pspec->name, "on-stall")) {
        GST_OBJECT_LOCK (self);
        self->on_stall_set = true;
        self->on_stall_implied = false;
        GST_OBJECT_UNLOCK (self);
      }
      g_object_set_property (G_OBJECT (child_for (self, prop_id)),
          pspec->name, value);
      break;
  }
}

static void
gst_gpufan_bin_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (object);

  switch (prop_id) {
    case BIN_PROP_BRANCH:
      GST_OBJECT_LOCK (self);
      g_value_set_string (value, self->branch);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_LANES:
      GST_OBJECT_LOCK (self);
      g_value_set_uint (value, self->lanes);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_RESTART_DELAY:
      GST_OBJECT_LOCK (self);
      g_value_set_uint64 (value, self->restart_delay_ns);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_LANE_PROPERTIES:
      GST_OBJECT_LOCK (self);
      g_value_set_string (value, self->lane_properties);
      GST_OBJECT_UNLOCK (self);
      break;
    case BIN_PROP_REMOTE_LANES:
      GST_OBJECT_LOCK (self);
      g_value_set_string (value, self->remote_lanes);
      GST_OBJECT_UNLOCK (self);
      break;
    default:
      if (prop_id >= BIN_PROP_FIRST_CHILD)
        g_object_get_property (G_OBJECT (child_for (self, prop_id)),
            pspec->name, value);
      else
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static GstStateChangeReturn
gst_gpufan_bin_change_state (GstElement * element, GstStateChange transition)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (element);

  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !fanbin::build_lanes (self)) {
    gst_element_set_state (self->fanout, GST_STATE_NULL);
    fanbin::remove_lanes (self);
    return GST_STATE_CHANGE_FAILURE;
  }
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
    fanbin::recovery_start (self);
  /* no rebuild begins once the lanes stop (one under way finishes first:
   * it holds the fan-out's stream lock, which stopping its pad takes) */
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY)
    fanbin::recovery_stop (self);
  GstStateChangeReturn ret = GST_ELEMENT_CLASS (gst_gpufan_bin_parent_class)
                                 ->change_state (element, transition);
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY
      || (transition == GST_STATE_CHANGE_READY_TO_PAUSED
          && ret == GST_STATE_CHANGE_FAILURE)) {
    fanbin::recovery_stop (self);
    fanbin::recovery_join (self);
  }
  if (transition == GST_STATE_CHANGE_READY_TO_NULL
      || (transition == GST_STATE_CHANGE_NULL_TO_READY
          && ret == GST_STATE_CHANGE_FAILURE)) {
    if (ret == GST_STATE_CHANGE_FAILURE)
      gst_element_set_state (self->fanout, GST_STATE_NULL);
    fanbin::remove_lanes (self);
  }
  return ret;
}

/* Whether the fan-out's on-lane-error is `fail` (a lane's error stops the
 * stream), read through the property as an application would. */
static bool
lane_errors_fail_stream (GstGpuFanBin * self)
{
  gint action = 0;
  g_object_get (self->fanout, "on-lane-error", &action, nullptr);
  GParamSpec * p = g_object_class_find_property (
      G_OBJECT_GET_CLASS (self->fanout), "on-lane-error");
  GEnumValue * fail
      = g_enum_get_value_by_nick (G_PARAM_SPEC_ENUM (p)->enum_class, "fail");
  return fail && action == fail->value;
}

/* An ERROR from an element of a lane's branch while streaming: with
 * on-lane-error=drop-lane or replay the fan-out takes the lane out and the
 * stream goes on, so it reaches the application as a WARNING (same error,
 * details and seqnum). */
static void
gst_gpufan_bin_handle_message (GstBin * bin, GstMessage * message)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (bin);
  GstObject * src = GST_MESSAGE_SRC (message);
  const GstStructure * s = gst_message_get_structure (message);
  /* the fan-out took a lane out: build it again (lane-restart-delay) */
  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ELEMENT
      && src == GST_OBJECT_CAST (self->fanout) && s
      && gst_structure_has_name (s, "gpufan-lane-failed")) {
    guint lane = 0;
    if (gst_structure_get_uint (s, "lane", &lane))
      fanbin::recovery_lane_failed (self, lane);
  }
  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR && src) {
    const bool lane_errors_fail = lane_errors_fail_stream (self);
    /* Only while streaming: an element that cannot start (READY->PAUSED)
     * fails the state change, and that stays an ERROR. */
    GST_OBJECT_LOCK (self);
    const bool streaming = GST_STATE (self) >= GST_STATE_PAUSED;
    GST_OBJECT_UNLOCK (self);
    /* the bin's child that holds the source: one of the lanes? */
    GstObject * child = GST_OBJECT_CAST (gst_object_ref (src));
    GstObject * parent;
    while ((parent = gst_object_get_parent (child))
        && parent != GST_OBJECT_CAST (bin)) {
      gst_object_unref (child);
      child = parent;
    }
    gpointer lane_id = parent
        ? g_object_get_qdata (G_OBJECT (child), fanbin::lane_id_quark ())
        : nullptr;
    if (parent)
      gst_object_unref (parent);
    gst_object_unref (child);
    if (lane_id && streaming && !lane_errors_fail) {
      /* the ERROR itself takes the lane out, whether or not a push fails */
      g_signal_emit_by_name (self->fanout, "fail-lane",
          GPOINTER_TO_UINT (lane_id) - 1);
      GError * err = nullptr;
      gchar * debug = nullptr;
      const GstStructure * details = nullptr;
      gst_message_parse_error (message, &err, &debug);
      gst_message_parse_error_details (message, &details);
      GstMessage * warning = gst_message_new_warning_with_details (src, err,
          debug, details ? gst_structure_copy (details) : nullptr);
      gst_message_set_seqnum (warning, gst_message_get_seqnum (message));
      g_clear_error (&err);
      g_free (debug);
      gst_message_unref (message);
      message = warning;
    }
  }
  GST_BIN_CLASS (gst_gpufan_bin_parent_class)->handle_message (bin, message);
}

/* --- the object ---------------------------------------------------------- */

static void
gst_gpufan_bin_init (GstGpuFanBin * self)
{
  self->branches = new std::vector<GstElement *> ();
  self->lanes = DEFAULT_LANES;
  self->restart_delay_ns = DEFAULT_RESTART_DELAY;
  self->recovery = fanbin::recovery_new ();
  self->fanout = gst_element_factory_make ("gpufanout", "fanout");
  self->fanin = gst_element_factory_make ("gpufanin", "fanin");
  g_assert (self->fanout && self->fanin); /* registered by this plugin */
  gst_util_set_object_arg (G_OBJECT (self->fanout), "on-lane-error",
      DEFAULT_ON_LANE_ERROR_NICK);
  gst_bin_add_many (GST_BIN (self), self->fanout, self->fanin, nullptr);

  GstPad * target = gst_element_get_static_pad (self->fanout, "sink");
  GstPad * pad = gst_ghost_pad_new_from_template ("sink", target,
      gst_static_pad_template_get (&sink_template));
  gst_object_unref (target);
  gst_element_add_pad (GST_ELEMENT (self), pad);
  target = gst_element_get_static_pad (self->fanin, "src");
  pad = gst_ghost_pad_new_from_template ("src", target,
      gst_static_pad_template_get (&src_template));
  gst_object_unref (target);
  gst_element_add_pad (GST_ELEMENT (self), pad);
}

static void
gst_gpufan_bin_finalize (GObject * object)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (object);
  fanbin::recovery_free (self->recovery);
  delete self->branches;
  g_free (self->branch);
  g_free (self->lane_properties);
  g_free (self->remote_lanes);
  g_free (self->remote_passphrase);
  G_OBJECT_CLASS (gst_gpufan_bin_parent_class)->finalize (object);
}

static void
gst_gpufan_bin_class_init (GstGpuFanBinClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_bin_set_property;
  gobject_class->get_property = gst_gpufan_bin_get_property;
  gobject_class->finalize = gst_gpufan_bin_finalize;
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_gpufan_bin_change_state);
  GST_BIN_CLASS (klass)->handle_message
      = GST_DEBUG_FUNCPTR (gst_gpufan_bin_handle_message);

  /**
   * GstGpuFanBin:branch:
   *
   * A gst-launch description of one lane's elements, with one unlinked
   * input and one unlinked output, e.g. `videoconvert ! gaussianblur`. Each
   * lane gets its own instance. Read at the NULL to READY change; a
   * description that does not parse fails that change with the parser's
   * message.
   */
  g_object_class_install_property (gobject_class, BIN_PROP_BRANCH,
      g_param_spec_string ("branch", "Branch",
          "gst-launch description of one lane's elements (one unlinked input "
          "and output), e.g. \"videoconvert ! gaussianblur\"; one instance per "
          "lane",
          nullptr,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanBin:lanes:
   *
   * How many lanes to build. 0: as `devices` says (one per GPU with `auto`,
   * or one per CPU where there is no GPU; one per listed ordinal; N with
   * `cpu:N`; one per CPU with `cpu`).
   */
  g_object_class_install_property (gobject_class, BIN_PROP_LANES,
      g_param_spec_uint ("lanes", "Lanes",
          "Lanes to build (0 = as devices says: one per GPU, or per CPU "
          "where there is no GPU; one per listed GPU; N with cpu:N)",
          0, fanbin::kMaxLanes, DEFAULT_LANES,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanBin:lane-restart-delay:
   *
   * How long after a lane was taken out (on-lane-error or on-stall) a fresh
   * instance of the branch takes its place, as a new lane on the device a
   * new lane gets; doubled for each further failure in that place during
   * the run (up to 60 s, or the delay itself if longer). The failed lane's
   * elements stay out of the stream (one may be stuck in a push) until the
   * bin stops. A `gpufan-lane-restored` element message (lane, new-lane,
   * device, failures, delay) says so. 0: failed lanes stay out until the
   * next start.
   */
  g_object_class_install_property (gobject_class, BIN_PROP_RESTART_DELAY,
      g_param_spec_uint64 ("lane-restart-delay", "Lane restart delay (ns)",
          "Nanoseconds after a lane failed until a fresh branch takes its "
          "place (doubled for each further failure there, up to 60 s); 0 = "
          "never",
          0, MAX_RESTART_DELAY, DEFAULT_RESTART_DELAY,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanBin:lane-properties:
   *
   * The same property settings on every lane's branch, as
   * `ELEMENT::PROPERTY=VALUE` separated by commas, e.g.
   * `g::sigma=3.5, enc::bitrate=4000` (elements named in `branch`, or by
   * factory name: `gaussianblur::sigma=3.5` sets every gaussianblur of a
   * lane). Applied to each lane as it is built (an ELEMENT or PROPERTY that
   * is not there fails the change to READY with a message that says so),
   * and to the running lanes when set while playing (a WARNING says what
   * did not apply). One lane alone: `lane0::g::sigma=3.5`, as for any bin.
   */
  g_object_class_install_property (gobject_class, BIN_PROP_LANE_PROPERTIES,
      g_param_spec_string ("lane-properties", "Lane properties",
          "The same settings on every lane's branch: ELEMENT::PROPERTY=VALUE, "
          "comma-separated (e.g. \"g::sigma=3.5, x264enc::bitrate=4000\"); "
          "applied as each lane is built and, when changed, to the running "
          "lanes",
          nullptr,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanBin:remote-lanes:
   *
   * Lanes run by gpufan-lane-worker processes elsewhere, as comma-separated
   * `srt://HOST:PORT` URIs (`srt://a:7001,srt://b:7001`): each is one more
   * lane whose branch is a `gpufanremote` to that worker (which runs its own
   * `--branch`). With remote lanes, `lanes` local lanes are built next to
   * them (0: none, and `branch` may stay unset); without, `lanes` means what
   * it always did. A remote lane that fails is built again after
   * `lane-restart-delay` like any lane, to the same worker: a worker that
   * came back (a restart) is picked up, one still down is tried again.
   * With remote lanes, `on-stall` is `replay` unless set: a killed worker's
   * lane stalls before SRT calls the link broken, and `skip` would give
   * frames up.
   */
  g_object_class_install_property (gobject_class, BIN_PROP_REMOTE_LANES,
      g_param_spec_string ("remote-lanes", "Remote lanes",
          "Lanes in gpufan-lane-worker processes: comma-separated "
          "srt://HOST:PORT (one lane each, next to `lanes` local lanes); "
          "with remote lanes on-stall is replay unless set",
          nullptr,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanBin:remote-passphrase:
   *
   * The SRT passphrase of the remote lanes (their workers' `--passphrase`),
   * required for a worker that is not on a loopback address.
   */
  g_object_class_install_property (gobject_class, BIN_PROP_REMOTE_PASSPHRASE,
      g_param_spec_string ("remote-passphrase", "Remote passphrase",
          "SRT passphrase of the remote lanes (the workers' --passphrase; "
          "required unless they are on a loopback address)",
          nullptr,
          (GParamFlags)(G_PARAM_WRITABLE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /* The children's own properties, under the same names. */
  GObjectClass * fanout_class
      = G_OBJECT_CLASS (g_type_class_ref (GST_TYPE_GPUFAN_OUT));
  GObjectClass * fanin_class
      = G_OBJECT_CLASS (g_type_class_ref (GST_TYPE_GPUFAN_IN));
  for (guint i = 0; i < G_N_ELEMENTS (child_properties); i++) {
    const ChildProperty & c = child_properties[i];
    GParamSpec * p
        = g_object_class_find_property (c.on_fanin ? fanin_class : fanout_class,
            c.name);
    g_assert (p);
    g_object_class_install_property (gobject_class, BIN_PROP_FIRST_CHILD + i,
        copy_param_spec (p));
  }
  /* Kept: the copies' strings are the children's. */
  (void)fanout_class;
  (void)fanin_class;

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "GPU fan-out bin",
      "Generic/Bin",
      "Runs a branch description on N parallel lanes (one per GPU, or CPU "
      "lanes) and outputs the frames in input order: gpufanout, the branch "
      "per lane, gpufanin",
      "gst-gpufan developers");
  gst_element_class_add_static_metadata (element_class,
      GST_ELEMENT_METADATA_DOC_URI, GST_GPUFAN_DOCS_URL "#gpufanbin");
}

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

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "gpufan/placement.h"
#include "common/gstgpufanbinding.h"
#include "common/gstgpufandevices.h"
#include "fanin/gstgpufanin.h"
#include "fanout/gstgpufanout.h"

GST_DEBUG_CATEGORY (gst_gpufan_bin_debug);
#define GST_CAT_DEFAULT gst_gpufan_bin_debug

#define DEFAULT_LANES 0
#define MAX_LANES 64

#define DEFAULT_RESTART_DELAY GST_SECOND
/* a day: far beyond any use, and safe to add to a steady clock */
#define MAX_RESTART_DELAY (24 * 3600 * GST_SECOND)

enum {
  BIN_PROP_0,
  BIN_PROP_BRANCH,
  BIN_PROP_LANES,
  BIN_PROP_RESTART_DELAY,
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
    default:
      if (prop_id >= BIN_PROP_FIRST_CHILD)
        g_object_set_property (G_OBJECT (child_for (self, prop_id)),
            pspec->name, value);
      else
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
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
    default:
      if (prop_id >= BIN_PROP_FIRST_CHILD)
        g_object_get_property (G_OBJECT (child_for (self, prop_id)),
            pspec->name, value);
      else
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

/* --- the lane count ------------------------------------------------------ */

/* Lanes to build: `lanes`, else what the fan-out's `devices` says. 0 with
 * *error set when `devices` does not parse. */
static guint
lane_count (GstGpuFanBin * self, guint lanes, std::string * error)
{
  if (lanes > 0)
    return lanes;
  gchar * text = nullptr;
  g_object_get (self->fanout, "devices", &text, nullptr);
  gpufan::DeviceSpec spec;
  const bool ok = gpufan::DeviceSpec::Parse (text ? text : "", &spec, error);
  g_free (text);
  if (!ok)
    return 0;
  const gpufan::DeviceRegistry & registry = gst_gpufan_device_registry ();
  const guint cpus = MAX (1u, (guint)registry.cpu_count ());
  switch (spec.mode) {
    case gpufan::DeviceSpec::Mode::kGpuList:
      return (guint)spec.gpus.size ();
    case gpufan::DeviceSpec::Mode::kCpu:
      return spec.cpu_lanes > 0 ? spec.cpu_lanes : cpus;
    case gpufan::DeviceSpec::Mode::kAuto:
    default:
      return registry.gpu_count () > 0 ? (guint)registry.gpu_count () : cpus;
  }
}

/* --- binding a branch to its lane's GPU ------------------------------------ */

/* The branch description for a lane on GPU `gpu` (-1: a CPU lane): every
 * element fixed to another GPU is replaced by its family's factory for
 * `gpu`. false with *error when one has no such factory. */
static bool
bind_branch_to_device (const std::string & branch, gint gpu,
    std::string * bound, std::string * error)
{
  *bound = branch;
  /* Element names stand between the start, '!' and white space. */
  static const std::regex word ("[A-Za-z0-9_-]+");
  std::vector<std::string> names;
  for (std::sregex_iterator it (branch.begin (), branch.end (), word), end;
       it != end; ++it) {
    const size_t at = it->position ();
    const size_t stop = at + it->length ();
    const bool starts
        = at == 0 || branch[at - 1] == '!' || g_ascii_isspace (branch[at - 1]);
    const bool ends = stop == branch.size () || branch[stop] == '!'
        || g_ascii_isspace (branch[stop]);
    if (starts && ends)
      names.push_back (it->str ());
  }
  for (const std::string & name : names) {
    GstElementFactory * factory = gst_element_factory_find (name.c_str ());
    if (!factory)
      continue;
    const gint fixed = gst_gpufan_fixed_cuda_device (factory);
    gst_object_unref (factory);
    if (fixed < 0 || fixed == gpu)
      continue;
    if (gpu < 0) {
      *error = name + " runs on GPU " + std::to_string (fixed)
          + " only, and this lane is a CPU lane";
      return false;
    }
    const std::string replacement = gst_gpufan_factory_for_gpu (name, gpu);
    if (replacement.empty ()) {
      *error = name + " runs on GPU " + std::to_string (fixed)
          + " only, and no element of its family is registered for GPU "
          + std::to_string (gpu);
      return false;
    }
    const std::regex whole ("(^|[!\\s])" + name + "(?=$|[!\\s])");
    *bound = std::regex_replace (*bound, whole, "$1" + replacement);
  }
  return true;
}

/* In gst-launch syntax caps belong to a link between two elements: a branch
 * that starts or ends with caps ("videoscale ! video/x-raw,width=640")
 * would be read as an element named "video". Such an end becomes a
 * capsfilter. */
static std::string
caps_ends_as_capsfilters (const std::string & branch)
{
  std::vector<std::string> links (1);
  bool quoted = false;
  for (const char c : branch) {
    if (c == '"')
      quoted = !quoted;
    if (c == '!' && !quoted)
      links.emplace_back ();
    else
      links.back () += c;
  }
  static const std::regex caps ("^\\s*([A-Za-z]+/[^\\s!]+)\\s*$");
  std::smatch m;
  for (std::string * end : { &links.front (), &links.back () })
    if (std::regex_match (*end, m, caps)) {
      std::string text = m[1].str ();
      if (text.find ('"') == std::string::npos)
        *end = " capsfilter caps=\"" + text + "\" ";
    }
  std::string out;
  for (size_t i = 0; i < links.size (); i++)
    out += (i ? "!" : "") + links[i];
  return out;
}

/* On each lane's bin: its fan-out lane id + 1 (0: not a lane). */
GQuark
fanbin::lane_id_quark (void)
{
  static GQuark quark = g_quark_from_static_string ("gpufanbin-lane-id");
  return quark;
}

/* --- building and removing the lanes -------------------------------------- */

gint
fanbin::placed_gpu (GstGpuFanBin * self, guint lane_id)
{
  GstStructure * stats = nullptr;
  g_object_get (self->fanout, "stats", &stats, nullptr);
  gint gpu = -1;
  const GValue * lanes = stats ? gst_structure_get_value (stats, "lanes") : 0;
  for (guint i = 0; lanes && GST_VALUE_HOLDS_ARRAY (lanes)
       && i < gst_value_array_get_size (lanes);
       i++) {
    const GstStructure * lane
        = gst_value_get_structure (gst_value_array_get_value (lanes, i));
    guint id = G_MAXUINT;
    gst_structure_get_uint (lane, "lane", &id);
    const gchar * kind = gst_structure_get_string (lane, "device-kind");
    if (id == lane_id && kind && g_str_equal (kind, "cuda"))
      gst_structure_get_int (lane, "device-index", &gpu);
  }
  if (stats)
    gst_structure_free (stats);
  return gpu;
}

bool
fanbin::branch_for_gpu (const std::string & branch, gint gpu,
    std::string * bound, std::string * error)
{
  return bind_branch_to_device (caps_ends_as_capsfilters (branch), gpu, bound,
      error);
}

void
fanbin::remove_lane (GstGpuFanBin * self, guint lane_id)
{
  GstElement * branch = nullptr;
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    auto & branches = *self->branches;
    auto it = std::find_if (branches.begin (), branches.end (),
        [lane_id] (GstElement * b) {
          return GPOINTER_TO_UINT (
                     g_object_get_qdata (G_OBJECT (b), lane_id_quark ()))
              == lane_id + 1;
        });
    if (it == branches.end ())
      return;
    branch = *it;
    branches.erase (it);
  }
  GstPad * out = gst_element_get_static_pad (branch, "src");
  GstPad * to_fanin = out ? gst_pad_get_peer (out) : nullptr;
  GstPad * in = gst_element_get_static_pad (branch, "sink");
  GstPad * from_fanout = in ? gst_pad_get_peer (in) : nullptr;
  gst_element_set_state (branch, GST_STATE_NULL);
  gst_bin_remove (GST_BIN (self), branch);
  if (from_fanout)
    gst_element_release_request_pad (self->fanout, from_fanout);
  if (to_fanin)
    gst_element_release_request_pad (self->fanin, to_fanin);
  for (GstPad * pad : { out, to_fanin, in, from_fanout })
    if (pad)
      gst_object_unref (pad);
}

static void
remove_lanes (GstGpuFanBin * self)
{
  std::vector<GstElement *> branches;
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    branches.swap (*self->branches);
  }
  for (GstElement * branch : branches) {
    gst_element_set_state (branch, GST_STATE_NULL);
    gst_bin_remove (GST_BIN (self), branch);
  }
  /* Our request pads, in the children's order of creation. */
  for (GstElement * child : { self->fanout, self->fanin }) {
    GList * pads = nullptr;
    GST_OBJECT_LOCK (child);
    for (GList * l = child->pads; l; l = l->next)
      if (GST_PAD_PAD_TEMPLATE (l->data)
          && GST_PAD_TEMPLATE_PRESENCE (GST_PAD_PAD_TEMPLATE (l->data))
              == GST_PAD_REQUEST)
        pads = g_list_prepend (pads, gst_object_ref (l->data));
    GST_OBJECT_UNLOCK (child);
    for (GList * l = pads; l; l = l->next)
      gst_element_release_request_pad (child, GST_PAD (l->data));
    g_list_free_full (pads, gst_object_unref);
  }
}

/* Binds every element of a lane's branch to @gpu (what the description's
 * factories leave: `gpu-id`, elements inside bins); warnings are posted,
 * an element fixed to another GPU is an error. */
static bool
bind_lane_elements (GstGpuFanBin * self, GstElement * lane, gint gpu,
    std::string * error)
{
  bool ok = true;
  for (GstElement * element : gst_gpufan_elements_in_bin (GST_BIN (lane))) {
    const GstGpuFanBinding bound = gst_gpufan_bind_element (element, gpu);
    gst_object_unref (element);
    if (!bound.done.empty ())
      GST_INFO_OBJECT (self, "%s: %s", GST_OBJECT_NAME (lane),
          bound.done.c_str ());
    if (!bound.warning.empty ())
      GST_ELEMENT_WARNING (self, CORE, NEGOTIATION,
          ("%s", bound.warning.c_str ()), ("in %s", GST_OBJECT_NAME (lane)));
    if (!bound.error.empty () && ok) {
      *error = bound.error;
      ok = false;
    }
  }
  return ok;
}

/* Adds the pads of @bin's elements that are not linked, by direction. */
static void
count_unlinked_pads (GstBin * bin, guint * inputs, guint * outputs)
{
  for (GstElement * element : gst_gpufan_elements_in_bin (bin)) {
    GstIterator * it = gst_element_iterate_pads (element);
    GValue item = G_VALUE_INIT;
    while (gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
      GstPad * pad = GST_PAD (g_value_get_object (&item));
      if (!gst_pad_is_linked (pad))
        (*(GST_PAD_IS_SRC (pad) ? outputs : inputs))++;
      g_value_reset (&item);
    }
    g_value_unset (&item);
    gst_iterator_free (it);
    gst_object_unref (element);
  }
}

GstElement *
fanbin::make_lane_branch (GstGpuFanBin * self, const std::string & bound,
    guint lane_id, gint gpu, std::string * error)
{
  GError * err = nullptr;
  GstElement * lane = gst_parse_bin_from_description_full (bound.c_str (), TRUE,
      nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &err);
  if (!lane) {
    *error = std::string ("Bad branch description: ")
        + (err ? err->message : "unknown error");
    g_clear_error (&err);
    return nullptr;
  }
  GstPad * in = gst_element_get_static_pad (lane, "sink");
  GstPad * out = gst_element_get_static_pad (lane, "src");
  /* the bin's pads ghost one unlinked pad each way: any other is an input
   * or output more (a tee's second branch), whose frames would go nowhere */
  guint inputs = in ? 1 : 0, outputs = out ? 1 : 0;
  count_unlinked_pads (GST_BIN (lane), &inputs, &outputs);
  const bool ends = inputs == 1 && outputs == 1;
  auto count = [] (guint n, const char * what) {
    return n == 0 ? std::string ("no ") + what
                  : std::to_string (n) + " " + what + "s";
  };
  if (!ends) {
    std::string has;
    if (inputs != 1)
      has = count (inputs, "input");
    if (outputs != 1)
      has += (has.empty () ? "" : " and ") + count (outputs, "output");
    *error = "The branch needs one unlinked input and one unlinked output "
             "(it has "
        + has + ")";
  }
  g_clear_object (&in);
  g_clear_object (&out);
  if (!ends) {
    gst_object_unref (gst_object_ref_sink (lane));
    return nullptr;
  }
  gchar * name = g_strdup_printf ("lane%u", lane_id);
  gst_object_set_name (GST_OBJECT (lane), name);
  g_free (name);
  g_object_set_qdata (G_OBJECT (lane), lane_id_quark (),
      GUINT_TO_POINTER (lane_id + 1));
  /* before the branch starts: DeepStream's elements read gpu-id then */
  if (!bind_lane_elements (self, lane, gpu, error)) {
    gst_object_unref (gst_object_ref_sink (lane));
    return nullptr;
  }
  return lane;
}

gboolean
fanbin::add_lane (GstGpuFanBin * self, GstElement * lane, GstPad * from_fanout,
    GstPad * to_fanin, bool sync_state)
{
  gst_bin_add (GST_BIN (self), lane);
  {
    std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
    self->branches->push_back (lane);
  }
  GstPad * in = gst_element_get_static_pad (lane, "sink");
  GstPad * out = gst_element_get_static_pad (lane, "src");
  bool linked = gst_pad_link (out, to_fanin) == GST_PAD_LINK_OK;
  /* in the bin's state before the fan-out can push into it */
  if (linked && sync_state)
    linked = gst_element_sync_state_with_parent (lane);
  linked = linked && gst_pad_link (from_fanout, in) == GST_PAD_LINK_OK;
  gst_object_unref (in);
  gst_object_unref (out);
  return linked;
}

#define BRANCH_ERROR(self, text, detail)                                       \
  GST_ELEMENT_ERROR (self, CORE, PAD, ("%s", (text).c_str ()),                 \
      ("%s", (detail).c_str ()))

static gboolean
build_lanes (GstGpuFanBin * self)
{
  GST_OBJECT_LOCK (self);
  const std::string branch = self->branch ? self->branch : "";
  const guint wanted = self->lanes;
  GST_OBJECT_UNLOCK (self);

  if (branch.find_first_not_of (" \t\r\n") == std::string::npos) {
    GST_ELEMENT_ERROR (self, CORE, STATE_CHANGE,
        ("gpufanbin has no branch: set branch to a gst-launch description of "
         "one lane, e.g. branch=\"videoconvert ! gaussianblur\""),
        (NULL));
    return FALSE;
  }
  std::string error;
  const guint count = lane_count (self, wanted, &error);
  if (count == 0 || count > MAX_LANES) {
    const std::string text = count == 0
        ? "Bad devices setting: " + error
        : "gpufanbin makes at most " + std::to_string (MAX_LANES) + " lanes";
    GST_ELEMENT_ERROR (self, CORE, STATE_CHANGE, ("%s", text.c_str ()), (NULL));
    return FALSE;
  }

  /* The lanes' pads first: the fan-out places each lane on its device when
   * it goes to READY, and the branches are made for those devices. */
  std::vector<GstPad *> outs, ins;
  for (guint i = 0; i < count; i++) {
    outs.push_back (gst_element_request_pad_simple (self->fanout, "src_%u"));
    ins.push_back (gst_element_request_pad_simple (self->fanin, "sink_%u"));
  }
  gboolean ok = gst_element_set_state (self->fanout, GST_STATE_READY)
      != GST_STATE_CHANGE_FAILURE; /* the fan-out posted why */

  for (guint i = 0; ok && i < count; i++) {
    guint lane_id = 0;
    g_object_get (outs[i], "lane", &lane_id, nullptr);
    const gint gpu = fanbin::placed_gpu (self, lane_id);
    std::string bound;
    if (!fanbin::branch_for_gpu (branch, gpu, &bound, &error)) {
      BRANCH_ERROR (self,
          "Lane " + std::to_string (i) + " ("
              + (gpu >= 0 ? "GPU " + std::to_string (gpu) : std::string ("CPU"))
              + "): " + error,
          "branch=\"" + branch + "\"");
      ok = FALSE;
      break;
    }
    if (bound != branch)
      GST_DEBUG_OBJECT (self, "lane %u on GPU %d runs \"%s\"", i, gpu,
          bound.c_str ());
    GstElement * lane
        = fanbin::make_lane_branch (self, bound, lane_id, gpu, &error);
    if (!lane) {
      BRANCH_ERROR (self, error, "branch=\"" + branch + "\"");
      ok = FALSE;
      break;
    }
    if (!fanbin::add_lane (self, lane, outs[i], ins[i], false)) {
      BRANCH_ERROR (self,
          "Cannot link lane " + std::to_string (i) + "'s branch",
          "branch=\"" + branch + "\"");
      ok = FALSE;
    }
  }
  for (GstPad * pad : outs)
    gst_object_unref (pad);
  for (GstPad * pad : ins)
    gst_object_unref (pad);
  if (ok)
    GST_INFO_OBJECT (self, "%u lanes of \"%s\"", count, branch.c_str ());
  return ok;
}

static GstStateChangeReturn
gst_gpufan_bin_change_state (GstElement * element, GstStateChange transition)
{
  GstGpuFanBin * self = GST_GPUFAN_BIN (element);

  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !build_lanes (self)) {
    gst_element_set_state (self->fanout, GST_STATE_NULL);
    remove_lanes (self);
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
    remove_lanes (self);
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
          0, MAX_LANES, DEFAULT_LANES,
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
      g_param_spec_uint64 ("lane-restart-delay", "Lane restart delay",
          "Nanoseconds after a lane failed until a fresh branch takes its "
          "place (doubled for each further failure there, up to 60 s); 0 = "
          "never",
          0, MAX_RESTART_DELAY, DEFAULT_RESTART_DELAY,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

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
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanremotewire.h"

#include <gio/gio.h>

#include "gstgpufanwirepay.h"

#define WIRE_EOS_NAME "GstGpuFanRemoteEos"

static GstPadProbeReturn
wrap_eos (GstPad *, GstPadProbeInfo * info, gpointer)
{
  GstEvent * event = GST_PAD_PROBE_INFO_EVENT (info);
  if (GST_EVENT_TYPE (event) != GST_EVENT_EOS)
    return GST_PAD_PROBE_OK;
  const GstStructure * s = gst_event_get_structure (event);
  GstStructure * fields = s ? gst_structure_copy (s)
                            : gst_structure_new_empty (WIRE_EOS_NAME);
  gst_structure_set_name (fields, WIRE_EOS_NAME);
  GstEvent * wrapped = gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM,
      fields);
  gst_event_set_seqnum (wrapped, gst_event_get_seqnum (event));
  gst_event_unref (event);
  GST_PAD_PROBE_INFO_DATA (info) = wrapped;
  return GST_PAD_PROBE_OK;
}

/* A custom event as our payloader sends it (its type in a field, GDP's
 * type field being too short) made whole again. */
static GstEvent *
restore_custom_type (GstEvent * event)
{
  const GstStructure * s = gst_event_get_structure (event);
  guint type = 0;
  if (!s || !gst_structure_get_uint (s, GST_GPUFAN_WIRE_TYPE_FIELD, &type))
    return event;
  /* the custom types only: another type with made-up fields would trip an
   * element that parses it */
  static const GstEventType kCustom[] = { GST_EVENT_CUSTOM_DOWNSTREAM,
    GST_EVENT_CUSTOM_DOWNSTREAM_OOB, GST_EVENT_CUSTOM_DOWNSTREAM_STICKY,
    GST_EVENT_CUSTOM_BOTH, GST_EVENT_CUSTOM_BOTH_OOB };
  bool custom = false;
  for (GstEventType t : kCustom)
    custom = custom || (guint) t == type;
  if (!custom)
    return event;
  GstStructure * fields = gst_structure_copy (s);
  gst_structure_remove_field (fields, GST_GPUFAN_WIRE_TYPE_FIELD);
  if (gst_structure_has_name (fields, GST_GPUFAN_WIRE_EVENT)
      && gst_structure_n_fields (fields) == 0) {
    gst_structure_free (fields);
    fields = nullptr;
  }
  GstEvent * whole = gst_event_new_custom ((GstEventType) type, fields);
  gst_event_set_seqnum (whole, gst_event_get_seqnum (event));
  gst_event_unref (event);
  return whole;
}

static GstPadProbeReturn
unwrap_eos (GstPad *, GstPadProbeInfo * info, gpointer)
{
  GstEvent * event = restore_custom_type (GST_PAD_PROBE_INFO_EVENT (info));
  GST_PAD_PROBE_INFO_DATA (info) = event;
  const GstStructure * s = gst_event_get_structure (event);
  if (GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_DOWNSTREAM || !s
      || !gst_structure_has_name (s, WIRE_EOS_NAME))
    return GST_PAD_PROBE_OK;
  GstEvent * eos = gst_event_new_eos ();
  if (gst_structure_n_fields (s) > 0) {
    GstStructure * fields = gst_event_writable_structure (eos);
    for (gint i = 0; i < gst_structure_n_fields (s); i++) {
      const gchar * name = gst_structure_nth_field_name (s, i);
      gst_structure_set_value (fields, name, gst_structure_get_value (s, name));
    }
  }
  gst_event_unref (event);
  GST_PAD_PROBE_INFO_DATA (info) = eos;
  return GST_PAD_PROBE_OK;
}

void
gst_gpufan_remote_wire_payloader (GstElement * pay)
{
  GstPad * sink = gst_element_get_static_pad (pay, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, wrap_eos,
      nullptr, nullptr);
  gst_object_unref (sink);
}

void
gst_gpufan_remote_wire_depayloader (GstElement * gdpdepay)
{
  GstPad * src = gst_element_get_static_pad (gdpdepay, "src");
  gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, unwrap_eos,
      nullptr, nullptr);
  gst_object_unref (src);
}

bool
gst_gpufan_remote_host_is_loopback (const std::string & host)
{
  if (g_ascii_strcasecmp (host.c_str (), "localhost") == 0)
    return true;
  std::string bare = host;
  if (bare.size () > 2 && bare.front () == '[' && bare.back () == ']')
    bare = bare.substr (1, bare.size () - 2);
  GInetAddress * address = g_inet_address_new_from_string (bare.c_str ());
  if (!address)
    return false; /* a name: it may resolve anywhere */
  const bool loopback = g_inet_address_get_is_loopback (address);
  g_object_unref (address);
  return loopback;
}

bool
gst_gpufan_remote_parse_uri (const std::string & uri, std::string * host,
    guint * port, std::string * error)
{
  GstUri * parsed = gst_uri_from_string (uri.c_str ());
  const gchar * scheme = parsed ? gst_uri_get_scheme (parsed) : nullptr;
  const gchar * h = parsed ? gst_uri_get_host (parsed) : nullptr;
  const guint p = parsed ? gst_uri_get_port (parsed) : GST_URI_NO_PORT;
  bool ok = scheme && g_ascii_strcasecmp (scheme, "srt") == 0 && h && *h
      && p != GST_URI_NO_PORT && p > 0 && p < 65535;
  if (ok) {
    *host = h;
    *port = p;
  } else {
    *error = "'" + uri + "' is not srt://HOST:PORT (a port below 65535: "
        "the results come back on PORT+1)";
  }
  if (parsed)
    gst_uri_unref (parsed);
  return ok;
}

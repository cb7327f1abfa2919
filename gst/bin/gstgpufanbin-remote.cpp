/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanbin's remote lanes (remote-lanes): each srt:// URI is one more lane
 * whose branch is a gpufanremote talking to the gpufan-lane-worker there.
 * They are built next to the local lanes and, after a failure, built again
 * by recovery like any lane: a worker that came back is picked up. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include "remote/gstgpufanremotewire.h"

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

/* Marks a remote lane's element with its worker's URI. */
static GQuark
remote_uri_quark (void)
{
  static GQuark quark = g_quark_from_static_string ("gpufanbin-remote-uri");
  return quark;
}

bool
fanbin::parse_remote_lanes (const std::string & text,
    std::vector<std::string> * uris, std::string * error)
{
  uris->clear ();
  gchar ** parts = g_strsplit (text.c_str (), ",", -1);
  bool ok = true;
  for (gchar ** p = parts; ok && *p; p++) {
    const std::string uri = g_strstrip (*p);
    if (uri.empty ())
      continue;
    std::string host;
    guint port = 0;
    ok = gst_gpufan_remote_parse_uri (uri, &host, &port, error);
    if (!ok)
      *error = "remote-lanes: " + *error;
    else
      uris->push_back (uri);
  }
  g_strfreev (parts);
  return ok;
}

GstElement *
fanbin::make_remote_lane (GstGpuFanBin * self, const std::string & uri,
    guint lane_id, std::string * error)
{
  GstElement * lane = gst_element_factory_make ("gpufanremote", nullptr);
  if (!lane) {
    *error = "remote-lanes needs gpufanremote, which needs gdpdepay and "
             "srtsink/srtsrc (gst-plugins-bad): not installed";
    return nullptr;
  }
  GST_OBJECT_LOCK (self);
  const std::string passphrase
      = self->remote_passphrase ? self->remote_passphrase : "";
  GST_OBJECT_UNLOCK (self);
  g_object_set (lane, "uri", uri.c_str (), nullptr);
  if (!passphrase.empty ())
    g_object_set (lane, "passphrase", passphrase.c_str (), nullptr);
  gchar * name = g_strdup_printf ("lane%u", lane_id);
  gst_object_set_name (GST_OBJECT (lane), name);
  g_free (name);
  g_object_set_qdata (G_OBJECT (lane), lane_id_quark (),
      GUINT_TO_POINTER (lane_id + 1));
  g_object_set_qdata_full (G_OBJECT (lane), remote_uri_quark (),
      g_strdup (uri.c_str ()), g_free);
  return lane;
}

std::string
fanbin::remote_uri_of_lane (GstGpuFanBin * self, guint lane_id)
{
  std::lock_guard<gpufan::Mutex> lk (self->branches_lock);
  for (GstElement * branch : *self->branches) {
    if (GPOINTER_TO_UINT (g_object_get_qdata (G_OBJECT (branch),
            lane_id_quark ())) != lane_id + 1)
      continue;
    const gchar * uri = static_cast<const gchar *> (
        g_object_get_qdata (G_OBJECT (branch), remote_uri_quark ()));
    return uri ? uri : "";
  }
  return "";
}

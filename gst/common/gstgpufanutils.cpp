/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanutils.h"

#include <cstring>

GST_DEBUG_CATEGORY (gst_gpufan_debug);

/* --- event de-duplication --- */

bool
GstGpuFanSeqnumMemory::Seen (guint32 seqnum)
{
  for (guint32 s : seqnums_)
    if (s == seqnum)
      return true;
  seqnums_.push_back (seqnum);
  if (seqnums_.size () > kRemembered)
    seqnums_.pop_front ();
  return false;
}

/* --- request pads --- */

gboolean
gst_gpufan_request_pad_index (GstElement * element, const gchar * prefix,
    const gchar * name, const std::function<bool (guint)> & taken,
    guint * index)
{
  if (!name) {
    guint i = 0;
    while (taken (i))
      i++;
    *index = i;
    return TRUE;
  }

  size_t len = strlen (prefix);
  gchar * end = nullptr;
  guint64 v = G_MAXUINT64;
  if (g_str_has_prefix (name, prefix) && name[len] != '\0')
    v = g_ascii_strtoull (name + len, &end, 10);
  if (!end || *end != '\0' || v > G_MAXUINT32) {
    GST_WARNING_OBJECT (element, "cannot make a pad named '%s': expected %s%%u",
        name, prefix);
    return FALSE;
  }
  if (taken ((guint)v)) {
    GST_WARNING_OBJECT (element, "pad '%s' already exists", name);
    return FALSE;
  }
  *index = (guint)v;
  return TRUE;
}


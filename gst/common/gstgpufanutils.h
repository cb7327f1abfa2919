/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pad and event bookkeeping that gpufanout and gpufanin both do on their
 * own pads: naming request pads, forwarding an event that comes once per
 * lane only once. Not part of the protocol between them
 * (gstgpufanprotocol.h).
 */
#pragma once

#include <gst/gst.h>

#include <deque>
#include <functional>

G_BEGIN_DECLS

/* The plugin's glue category (registered by plugin.cpp). */
GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_debug);

G_END_DECLS

/* The index for a new request pad `<prefix><index>`: the one in @name when it
 * is given (FALSE, with a warning on @element, when @name is not of that form
 * or its index is @taken), else the lowest free one. */
gboolean gst_gpufan_request_pad_index (GstElement * element,
    const gchar * prefix, const gchar * name,
    const std::function<bool (guint)> & taken, guint * index);

/* Remembers the last event seqnums seen (bounded): an event that comes once
 * per lane is forwarded once. Not thread-safe: the owner locks. */
class GstGpuFanSeqnumMemory {
public:
  /* TRUE if @seqnum was seen before; remembers it otherwise. */
  bool Seen (guint32 seqnum);
  void Clear () { seqnums_.clear (); }

private:
  static constexpr size_t kRemembered = 64;
  std::deque<guint32> seqnums_;
};

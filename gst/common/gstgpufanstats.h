/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The `gpufan-stats` structure (see docs/elements.md): a Session's
 * statistics as either element's `stats` property and element message give
 * them.
 */
#pragma once

#include <gst/gst.h>

#include "gpufan/stats-view.h"

#define GST_GPUFAN_STATS_NAME "gpufan-stats"
/* @session's statistics, with the fan-out's per-lane fields (worker
 * thread, copies, host pool) that it set on the Session: the same from
 * either element. */
GstStructure * gst_gpufan_stats_to_structure (const gpufan::StatsView & session);
/* Why a stalled lane is stalled, for the stats and warnings (g_free). */
gchar * gst_gpufan_stall_reason (const gpufan::LaneStats & lane);
/* The `gpufan-stats` element message from @src (always the session's
 * gpufanout, see docs/elements.md): the structure with `final` first, TRUE
 * for the one at the end of the stream, FALSE for a stats-interval one. */
GstMessage * gst_gpufan_stats_message_new (GstObject * src,
    const gpufan::StatsView & session, gboolean is_final);

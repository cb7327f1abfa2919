/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gpufanout's metrics-port (see docs/elements.md, "Metrics"): a Session's
 * statistics in the OpenMetrics text format, served over HTTP on
 * 127.0.0.1:<port> while the element is PAUSED or PLAYING.
 */
#pragma once

#include <gst/gst.h>

#include <functional>
#include <string>

#include "gpufan/stats.h"

#define GST_GPUFAN_METRICS_CONTENT_TYPE \
  "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* @stats in the OpenMetrics text format, ending with "# EOF\n". Pure: no
 * clock, no I/O. */
std::string gst_gpufan_metrics_format (const gpufan::SessionStats & stats);

/* The whole HTTP response (status line, headers, body) to a request that
 * starts with @request (its first line is enough): GET /metrics gets
 * @stats_source's statistics, any other path 404, any other method 405. */
std::string gst_gpufan_metrics_respond (const std::string & request,
    const std::function<gpufan::SessionStats ()> & stats_source);

/* An HTTP server of one thread of its own (a GSocketService on its own
 * GMainContext): one connection at a time, at most a few KiB of each
 * request read, the statistics taken on its thread. */
typedef struct _GstGpuFanMetricsServer GstGpuFanMetricsServer;

/* Listens on 127.0.0.1:@port; nullptr with @error set when the port cannot
 * be bound. */
GstGpuFanMetricsServer * gst_gpufan_metrics_server_start (guint port,
    std::function<gpufan::SessionStats ()> stats_source, GError ** error);
/* Stops listening and joins the thread; nullptr is fine. */
void gst_gpufan_metrics_server_stop (GstGpuFanMetricsServer * server);

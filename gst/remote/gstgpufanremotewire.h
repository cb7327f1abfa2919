/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wire between gpufanremote and gpufan-lane-worker: GDP (gdppay,
 * gdpdepay) over SRT (srtsink, srtsrc), with what GDP and srtsink leave
 * out put back, the same on both ends:
 *   - gdppay sends EOS downstream and never onto the wire, and srtsink
 *     would stop at it (a chunk's drain is an EOS followed by a flush): an
 *     EOS travels as a custom serialized event (its fields kept) and is
 *     turned back into an EOS after gdpdepay;
 *   - srtsink drops buffers flagged HEADER once it has caps with a
 *     streamheader, and sends those only when a peer connects: gdppay's
 *     sticky events (a marker, a new segment) would vanish mid-stream. Its
 *     buffers go unflagged and its caps stay on our side.
 * Used by the plugin and by the worker program (which links GStreamer
 * only). */
#pragma once

#include <gst/gst.h>

#include <string>

/* Probes on @gdppay's pads: EOS in, as the custom event; no caps and no
 * HEADER flags out. */
void gst_gpufan_remote_wire_payloader (GstElement * gdppay);
/* A probe on @gdpdepay's src pad: the custom event back to an EOS. */
void gst_gpufan_remote_wire_depayloader (GstElement * gdpdepay);

/* Whether @host (an address or a name) is a loopback address: 127.0.0.0/8,
 * ::1 or "localhost". */
bool gst_gpufan_remote_host_is_loopback (const std::string & host);

/* Splits srt://HOST:PORT (no query); false with *error in a user's words. */
bool gst_gpufan_remote_parse_uri (const std::string & uri, std::string * host,
    guint * port, std::string * error);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wire between gpufanremote and gpufan-lane-worker: GDP packets (our
 * payloader, gstgpufanwirepay.h; gdpdepay) over SRT (srtsink, srtsrc), the
 * same on both ends:
 *   - an EOS travels as a custom serialized event (its fields kept) and is
 *     turned back into an EOS after gdpdepay: srtsink would stop at a real
 *     one, and a chunk's drain is an EOS followed by a flush;
 *   - GDP keeps 16 bits of an event's type, too few for the custom types:
 *     they are mended after gdpdepay;
 *   - SRT in live mode without TSBPD and without dropping late packets
 *     (GST_GPUFAN_REMOTE_SRT_QUERY): every packet, in order, as soon as it
 *     is there (TSBPD would hold each for the latency; file mode does not
 *     work with GStreamer 1.22's srtsink, which sends 0-byte pieces there).
 * Used by the plugin and by the worker program (which links GStreamer
 * only). */
#pragma once

#include <gst/gst.h>

#include <string>

/* SRT settings of both ends (a URI query without its '?'). */
#define GST_GPUFAN_REMOTE_SRT_QUERY "tsbpdmode=0&tlpktdrop=0"

/* A probe on @pay's sink pad (a gst_gpufan_wire_pay_new ()): EOS in, as
 * the custom event. */
void gst_gpufan_remote_wire_payloader (GstElement * pay);
/* A probe on @gdpdepay's src pad: the custom event back to an EOS. */
void gst_gpufan_remote_wire_depayloader (GstElement * gdpdepay);

/* Whether @host (an address or a name) is a loopback address: 127.0.0.0/8,
 * ::1 or "localhost". */
bool gst_gpufan_remote_host_is_loopback (const std::string & host);

/* Splits srt://HOST:PORT (no query); false with *error in a user's words. */
bool gst_gpufan_remote_parse_uri (const std::string & uri, std::string * host,
    guint * port, std::string * error);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's internals, shared by its source files:
 *   gstgpufanout.cpp             the element: request pads, states, properties
 *   gstgpufanout-dispatch.cpp    the sink pad: each buffer to a lane's queue
 *   gstgpufanout-dispatcher.h    the chain's strategy per mode (frame, chunk,
 *                                streams)
 *   gstgpufanout-settings.h      property ids, defaults, enums, Settings
 *   gstgpufanout-properties.cpp  the properties; the settings snapshot
 *   gstgpufanout-sinkpad.cpp     the sink_%u pad class
 *   gstgpufanout-lane.cpp        a lane's state machine, queue, start, flush
 *   gstgpufanout-lane-worker.cpp the lane's worker loop, markers, liveness
 *   gstgpufanout-lane-frames.cpp the frame item handler (tags, pushes, EOS)
 *   gstgpufanout-lane-failure.cpp results, failures, the health listener
 *   gstgpufanout-pad.cpp         the src pad class and its pad functions
 *   gstgpufanout-pairing.cpp     the probe that lets a gpufanin claim lanes
 *   gstgpufanout-placement.cpp   which device a lane runs on; staging copies
 *   gstgpufanout-allocation.cpp  the ALLOCATION answer over all lanes
 *   gstgpufanout-chunk.cpp       chunk mode: runs of frames to one lane, drained
 *   gstgpufanout-chunk-worker.cpp chunk mode at the lane's worker (its handler)
 *   gstgpufanout-chunk-streams.cpp chunk mode with several input streams
 *   gstgpufanout-replay.cpp      a failed lane's frames sent to the others
 *   gstgpufanout-stats.cpp       statistics messages (interval, final)
 *   gstgpufanout-streams.cpp     several input streams (sink_%u pads)
 *   gstgpufanout-enums.cpp       the policy and staging enums
 * Its headers, by concern: gstgpufanout-element.h (the element and pad
 * structs), -settings.h, -dispatcher.h, -lane.h, -chunk.h, -replay.h,
 * -streams.h. */
#pragma once

#include "gstgpufanout-element.h"

/* *INDENT-OFF* */
/* Locks, outermost first (a thread holding one may take only those below):
 *   1. priv->settings_lock   property values (priv->settings)
 *   2. priv->lanes_lock      the lane map and each lane's placement
 *   3. priv->chunk_move_lock chunk mode: moving chunks off a stalled lane
 *   4. Lane::lock            a lane's queue, state and condition variable;
 *      only a chunk move nests two (the stalled lane's first)
 *   5. a pad's object lock   pad properties (weight, device, task pool)
 *   6. Leaf locks, never held while taking another: Lane::staging_lock (the
 *      lane's host pool; ALLOCATION queries read it from any thread),
 *      priv->upstream_lock (upstream event seqnums), priv->replay_lock (the
 *      frames kept for replay), and the Session's own
 *      lock (the Session never calls back into us with it held).
 * The Session's one callback, its health listener (lane_note_health), runs
 * from the fan-in's TakeReady calls without the Session's lock and takes
 * lanes_lock, then a Lane::lock: no thread of ours makes those calls.
 * No lock of ours is held across a push, a peer query, a pad (de)activation
 * or a blocking Session call (DispatchItem, WaitSettled). In chunk mode the
 * chain function waits on a Lane::cond for room (chunk_enqueue), asking the
 * Session (a leaf lock) with that lane's lock held. */
/* *INDENT-ON* */

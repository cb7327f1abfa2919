/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's element: its private struct and pad structs, and the
 * functions of its sink pad, src pads, pairing, placement, allocation,
 * properties and statistics. Lock order: gstgpufanout-private.h. */
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpufan/cuda.h"
#include "gpufan/cut-point.h"
#include "gpufan/device.h"
#include "gpufan/mutex.h"
#include "gpufan/placement.h"
#include "gpufan/fanout-port.h"
#include "gpufan/staging.h"
#include "common/gstgpufangpumove.h"
#include "gstgpufanout-settings.h"
#include "gstgpufanout.h"
#include "gstgpufantaskpool.h"
#include "common/gstgpufanhostmemory.h"
#include "common/gstgpufanmetrics.h"
#include "common/gstgpufanprotocol.h"
#include "common/gstgpufanutils.h"

GST_DEBUG_CATEGORY_EXTERN (gst_gpufan_out_debug);

#include "gstgpufanout-chunk.h"
#include "gstgpufanout-lane.h"
#include "gstgpufanout-replay.h"
#include "gstgpufanout-streams.h"

namespace fanout {
class Dispatcher;
} // namespace fanout

struct GstGpuFanOutPrivate {
  /* holds policy, queue-size and max-in-flight (thread-safe) */
  std::shared_ptr<gpufan::FanOutPort> session = gpufan::FanOutPort::Create (
      gpufan::SessionConfig{ fanout::policy_from_enum (DEFAULT_POLICY),
          DEFAULT_QUEUE_SIZE, DEFAULT_MAX_IN_FLIGHT });

  /* Property values (gstgpufanout-settings.h), under settings_lock; the
   * streaming side's copy of them, taken at READY->PAUSED. */
  gpufan::Mutex settings_lock;
  fanout::Settings settings;
  fanout::StreamingSettings streaming;
  /* Settings documented as changeable while PLAYING and read where they
   * act (each buffer, a lane's failure or stall): atomics, so that a change
   * counts from the next buffer or failure without a lock there. */
  std::atomic<guint> stats_interval_ms{ DEFAULT_STATS_INTERVAL };
  std::atomic<gint> on_lane_error{ DEFAULT_ON_LANE_ERROR };
  std::atomic<gint> on_stall{ DEFAULT_ON_STALL };
  /* serves the statistics on metrics-port from READY->PAUSED to
   * PAUSED->READY (gstgpufanmetrics.h); state changes only */
  GstGpuFanMetricsServer * metrics_server = nullptr;
  /* The single sink pad's way to the lanes (gstgpufanout-dispatcher.h):
   * chosen from `streaming` at READY->PAUSED, when no buffer flows;
   * streaming thread only. */
  std::unique_ptr<fanout::Dispatcher> dispatcher;
  /* the stream's caps are in system memory (no caps features but
   * memory:SystemMemory): only then is staging or a host pool of use */
  std::atomic<bool> host_memory_caps{ true };
  /* the "No GPU" warning was posted since the last READY->NULL */
  std::atomic<bool> no_gpu_warned{ false };
  /* some lane's needs_probe is set: saves looking at every lane per buffer */
  std::atomic<bool> probe_pending{ true };
  /* While a lane is joining (its branch may not reach the fan-in yet), its
   * branch is probed again every so many dispatches, doubling up to
   * kMaxJoiningProbeInterval; a link resets it. Streaming thread only. */
  guint joining_probe_interval = 1;
  guint dispatches_since_joining_probe = 0;
  std::atomic<bool> reset_joining_probe{ false };

  gpufan::Mutex lanes_lock;
  std::map<guint, fanout::LanePtr> lanes;
  /* The device the next new lane gets instead of its placement
   * (request_lane_like; under lanes_lock). */
  std::optional<gpufan::Device> next_lane_device;

  /* Some lane's result changed, or a lane came or went: the chain function
   * combines the results again (combined_result is its cache, streaming
   * thread only). */
  std::atomic<bool> lane_results_changed{ true };
  GstFlowReturn combined_result = GST_FLOW_NOT_LINKED;

  /* Chunk mode: whoever moves chunks off a stalled lane (the stall
   * listener, the chain function) holds it, so that the one place where two
   * Lane::locks nest (the stalled lane's, then its target's) has one thread
   * at a time; and some stalled lane has chunk_moves_pending. */
  gpufan::Mutex chunk_move_lock;
  std::atomic<bool> chunk_moves_pending{ false };


  std::atomic<guint32> caps_epoch{ 0 };
  /* counts the input's segments (streaming thread only): chunk mode tells
   * the fan-in which chunks share one (see retime_chunk_item) */
  guint32 segment_epoch = 0;
  std::atomic<gint64> last_stats_post_ns{ 0 };
  std::atomic<bool> stats_posted{ false };
  std::atomic<bool> lane_error_posted{ false };

  /* What replay needs (gstgpufanout-replay.cpp), under replay_lock, a leaf
   * lock: per input stream, a reference to each awaited item dispatched
   * while replay is on, oldest first, until it has left the fan-in's
   * window, and the last seq its chain function decided about; and the
   * items a failed lane handed over before their reference was kept (the
   * chain function sends those again itself). */
  gpufan::Mutex replay_lock;
  std::map<guint32, fanout::ReplayStream> replay_streams;
  /* chunk mode: each chunk's items by seq (gstgpufanout-chunk-replay.cpp) */
  std::map<guint64, fanout::ChunkCopy> replay_chunks;
  std::vector<fanout::ReplayOrphan> replay_orphans;
  /* the Session's release listener is set (replay_keep, once) */
  std::atomic<bool> replay_listening{ false };
  /* a lane failed with replay this run: the chain function tells whether
   * it kept each item even while replay is off (a switch) */
  std::atomic<bool> replay_orphans_possible{ false };

  /* Several input streams (sink_%u pads, gstgpufanout-streams.cpp): under
   * streams_lock, a leaf lock except that the lanes' events are queued
   * with it held (lanes_lock, then each Lane::lock, below it). It also
   * serializes the streams' threads where they do what one streaming
   * thread does alone with one input (prepare_dispatch, reprobes). */
  gpufan::Mutex streams_lock;
  std::map<guint, std::unique_ptr<fanout::StreamInput>> inputs;
  /* What the lanes got of the streams: one stream-start, the caps all
   * streams share, the first segment; and whether they ended (every
   * stream did). */
  bool lanes_stream_started = false;
  GstCaps * lanes_caps = nullptr;
  bool lanes_segment_sent = false;
  std::atomic<bool> lanes_ended{ false };
  /* data came on the single `sink` pad (then sink_%u pads are refused at
   * their first data, and the other way round) */
  std::atomic<bool> main_input_used{ false };
  std::atomic<bool> stream_inputs_used{ false };

  /* Upstream events come once per lane (gpufanin forwards to all its sink
   * pads): forward each seqnum once. */
  gpufan::Mutex upstream_lock;
  GstGpuFanSeqnumMemory upstream_seqnums;
};

struct _GstGpuFanOut {
  GstElement parent;
  GstPad * sinkpad;
  GstGpuFanOutPrivate * priv;
};

/* A sink_%u pad: one input stream of several. */
struct _GstGpuFanOutSinkPad {
  GstPad parent;
  GstGpuFanOut * fanout; /* not reffed: the element outlives its pads */
  guint index;           /* sink_<index> */
  /* its frames' way to the lanes (owned; set when the element makes it) */
  fanout::Dispatcher * dispatcher;
  /* under the object lock */
  gdouble weight;
  guint max_in_flight;
  gboolean leaky;
};

struct _GstGpuFanOutPad {
  GstPad parent;
  GstGpuFanOut * fanout; /* not reffed: the element outlives its pads */
  guint lane;
  gdouble weight; /* under the object lock */
  gint device;    /* GPU ordinal, -1: from the element; under the object lock */
  /* Threads for the lane's task, bound to the device's CPUs (or nullptr:
   * GStreamer's default pool). Under the object lock: read when the task is
   * created, with the lane lock held. */
  GstGpuFanTaskPool * task_pool;
};

enum {
  PROP_PAD_0,
  PROP_PAD_WEIGHT,
  PROP_PAD_LANE,
  PROP_PAD_DEVICE,
};

enum {
  PROP_SINK_PAD_0,
  PROP_SINK_PAD_WEIGHT,
  PROP_SINK_PAD_MAX_IN_FLIGHT,
  PROP_SINK_PAD_LEAKY,
};

namespace fanout {

/* The Session's clock: what the lanes' times (Lane::timer) are taken on. */
inline gint64
session_now (GstGpuFanOut * self)
{
  return self->priv->session->clock ().NowNs ();
}

/* The sink pad: buffers and events into the lanes (gstgpufanout-dispatch.cpp) */
/* Before a dispatch: the lanes' combined result (not OK: no lane can take
 * it), and the pairing probes due. */
GstFlowReturn prepare_dispatch (GstGpuFanOut * self);
/* The GPU whose memory @obj's frame is in (for adaptive's choice); -1 for
 * an event, a frame in host memory, or caps in system memory. */
gint origin_gpu_of (GstGpuFanOut * self, GstMiniObject * obj);
/* A buffer's PTS, a GAP event's timestamp (gpufan::kNoTime: none). */
gint64 item_pts (GstMiniObject * obj);
/* Sets the sink pad functions. */
void install_sink_pad_functions (GstPad * pad);
/* The sink pad's query function (sink_%u pads use it too). */
gboolean sink_query (GstPad * pad, GstObject * parent, GstQuery * query);

/* The src pad: one per lane (gstgpufanout-pad.cpp) */
/* Sets the src pad functions of a new lane pad. */
void install_src_pad_functions (GstPad * pad);

/* The pairing probe: which gpufanin claims a lane (gstgpufanout-pairing.cpp) */
void request_probe (GstGpuFanOut * self, const LanePtr & lane);
void reprobe_joining_lanes (GstGpuFanOut * self);
/* FALSE once a claimed lane's branch cannot run on its GPU (posted). */
gboolean probe_lanes (GstGpuFanOut * self);
gboolean forward_pair_query_downstream (GstGpuFanOut * self, GstQuery * query);

/* Device placement and staging (gstgpufanout-placement.cpp) */
gboolean place_lane (GstGpuFanOut * self, const LanePtr & lane,
    std::string * error);
void unplace_lane (GstGpuFanOut * self, guint id);
void forget_placements (GstGpuFanOut * self);
void unplace_all_lanes (GstGpuFanOut * self);
gboolean place_all_lanes (GstGpuFanOut * self);
/* Binds the elements of the lane's branch (up to gpufanin) to the lane's
 * GPU (gstgpufanbinding.h): warnings posted; FALSE, with an ERROR posted,
 * when one is fixed to another GPU. @peer: the pad the lane's pad is being
 * linked to (from its link function). */
gboolean bind_lane_branch (GstGpuFanOut * self, const LanePtr & lane,
    GstPad * peer = nullptr);
void stage_item (const LanePtr & lane, QueuedItem & item);
gboolean answer_cuda_context_query (GstGpuFanOut * self, GstPad * pad,
    GstQuery * query);
/* An upstream element (a decoder) asks for a CUDA context: it gets the
 * lanes' context of its GPU, so that its frames reach the lanes on that GPU
 * in one context. FALSE when there is nothing to give (no CUDA element
 * upstream, no GPU lane for one that takes any GPU, no gstreamer-cuda). */
gboolean answer_upstream_cuda_context_query (GstGpuFanOut * self, GstPad * sink,
    GstQuery * query);
void set_device_setting (GstGpuFanOut * self, guint prop_id,
    const GValue * value);
/* A new src pad (a lane) on the device of lane @like, which failed (a GPU
 * excluded since: an eligible one, as devices=auto would place it), even
 * where `devices` lists fewer lanes; nullptr if it cannot be made. For
 * gpufanbin's rebuilt lanes. */
GstPad * request_lane_like (GstGpuFanOut * self, guint like);

/* Allocation aggregation (gstgpufanout-allocation.cpp) */
gboolean caps_in_host_memory (GstCaps * caps);
gboolean aggregate_allocation (GstGpuFanOut * self, GstQuery * query);

/* A new stream after the input's EOS went into the lanes: the lanes'
 * EOS is behind them (statistics are posted again at the next) and the
 * Session's input goes on (gstgpufanout-dispatch.cpp). */
void restart_input_after_eos (GstGpuFanOut * self);
/* Serialized event @event into every lane, at its place among the items
 * (gstgpufanout-dispatch.cpp). Takes @event. */
void enqueue_event_on_all_lanes_positioned (GstGpuFanOut * self,
    GstEvent * event);

/* Properties (gstgpufanout-properties.cpp) */
void install_properties (GObjectClass * gobject_class);
/* READY->PAUSED: the streaming side's copy of the settings, and the sink
 * pad's dispatcher for the mode they set. */
void take_settings_snapshot (GstGpuFanOut * self);

/* Statistics (gstgpufanout-stats.cpp) */
void maybe_post_interval_stats (GstGpuFanOut * self);
void on_lane_eos (GstGpuFanOut * self);

} // namespace fanout

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How an input's data reaches the lanes, one strategy per mode, chosen once:
 *   frame    each buffer on its own to the lane the Session picks, with
 *            replay's hooks (gstgpufanout-dispatch.cpp, -replay.cpp)
 *   chunk    runs of buffers whole to one lane (gstgpufanout-chunk.cpp)
 *   streams  a sink_%u pad's frames, sharing the lanes with the other
 *            streams (gstgpufanout-streams.cpp)
 * The single sink pad's is chosen at READY->PAUSED from the settings
 * snapshot (take_settings_snapshot), a sink_%u pad's when it is made. */
#pragma once

#include "gstgpufanout-private.h"

namespace fanout {

class Dispatcher {
public:
  explicit Dispatcher (GstGpuFanOut * self) : self_ (self) {}
  virtual ~Dispatcher () = default;
  Dispatcher (const Dispatcher &) = delete;
  Dispatcher & operator= (const Dispatcher &) = delete;

  /* A buffer (@is_buffer) or a GAP event, which stands for data, to a lane.
   * @max_wait_ns >= 0: a leaky stream's bound on the wait for a lane (then
   * GST_FLOW_CUSTOM_SUCCESS: dropped). Takes @obj. */
  virtual GstFlowReturn Chain (GstMiniObject * obj, bool is_buffer,
      gint64 pts, gint64 max_wait_ns = -1) = 0;
  /* The input is cut here (new caps, a segment, EOS): what is open goes to
   * its lane whole. */
  virtual void Cut () {}
  /* A flush or a stop dropped what was queued: what is open is forgotten. */
  virtual void Forget () {}

  /* Asks the Session for a lane (waiting for room): GST_FLOW_OK with *d and
   * *lane, or why not (an element error is posted where one is due).
   * @origin_gpu: the GPU whose memory the item is in (-1: host memory). */
  GstFlowReturn RequestLane (gint64 pts, gpufan::Dispatch * d, LanePtr * lane,
      gint origin_gpu = -1, gint64 max_wait_ns = -1);

protected:
  /* The streaming thread's state (the lanes' combined result, the pairing
   * probes) belongs to the one input's thread; several streams' threads
   * take turns at it (the streams strategy overrides these). */
  virtual GstFlowReturn PrepareDispatch () { return prepare_dispatch (self_); }
  virtual GstFlowReturn CombineLaneResults ()
  {
    return combine_lane_results (self_);
  }
  virtual void ReprobeJoiningLanes () { reprobe_joining_lanes (self_); }
  /* The Session's id of the input (gpufan::kMainStream: the sink pad). */
  virtual guint32 Stream () const { return gpufan::kMainStream; }

  GstGpuFanOut * const self_; /* not reffed: the element owns us */
};

/* Frame dispatch: each scheduled item goes on its own to one lane. */
class FrameDispatcher : public Dispatcher {
public:
  using Dispatcher::Dispatcher;
  GstFlowReturn Chain (GstMiniObject * obj, bool is_buffer, gint64 pts,
      gint64 max_wait_ns = -1) override;

protected:
  /* Into @lane's queue, as the Session dispatched it (@d); FALSE: the lane
   * refused it and @item is as it was. */
  virtual gboolean Enqueue (const LanePtr & lane, QueuedItem && item,
      const gpufan::Dispatch & /* d */)
  {
    return lane_enqueue (lane, std::move (item));
  }
};

std::unique_ptr<Dispatcher> make_frame_dispatcher (GstGpuFanOut * self);
/* gstgpufanout-chunk.cpp */
std::unique_ptr<Dispatcher> make_chunk_dispatcher (GstGpuFanOut * self);
/* gstgpufanout-streams.cpp: the frames of sink_%u pad's @stream */
std::unique_ptr<Dispatcher> make_stream_dispatcher (GstGpuFanOut * self,
    guint32 stream);

} // namespace fanout

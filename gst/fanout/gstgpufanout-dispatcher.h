/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How an input's data reaches the lanes, one strategy per mode, chosen once:
 *   frame    each buffer on its own to the lane the Session picks, with
 *            replay's hooks (gstgpufanout-dispatch.cpp, -replay.cpp)
 *   chunk    runs of buffers whole to one lane (gstgpufanout-chunk.cpp)
 *   streams  a sink_%u pad's frames or chunks, sharing the lanes with the
 *            other streams (gstgpufanout-sinkpad.cpp,
 *            gstgpufanout-chunk-streams.cpp)
 * The single sink pad's is chosen at READY->PAUSED from the settings
 * snapshot (take_settings_snapshot), a sink_%u pad's when it is made. */
#pragma once

#include "gstgpufanout-private.h"

#include <utility>

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

/* Chunk dispatch (gstgpufanout-chunk.cpp): runs of an input's buffers
 * whole to one lane; the open chunk is @cursor_ (the stall listener and the
 * lanes' workers see its lane's flags, gstgpufanout-chunk-move.cpp). @pad:
 * the input's pad, whose caps say where a chunk may be cut. */
class ChunkDispatcher : public Dispatcher {
public:
  ChunkDispatcher (GstGpuFanOut * self, GstPad * pad)
      : Dispatcher (self), pad_ (pad)
  {
  }
  /* @obj into the open chunk, opening one where a chunk ends */
  GstFlowReturn Chain (GstMiniObject * obj, bool is_buffer, gint64 pts,
      gint64 max_wait_ns = -1) override;
  void Cut () override { chunk_close (self_, cursor_); }
  void Forget () override { chunk_forget (self_, cursor_); }

protected:
  /* A chunk's first item, before it is queued: what its lane needs besides
   * the buffer (several streams: the stream's caps and segment). */
  virtual void PrepareFirst (QueuedItem &) {}

  GstPad * const pad_; /* not reffed: it owns us, or its element does */
  ChunkCursor cursor_;
};

/* Several streams' threads take turns at what one streaming thread does
 * alone with one input (the lanes' combined result, the pairing probes),
 * under streams_lock; @Base: the mode's dispatcher. */
template <class Base> class StreamTurns : public Base {
public:
  template <class... Args>
  StreamTurns (guint32 stream, Args &&... args)
      : Base (std::forward<Args> (args)...), stream_ (stream)
  {
  }

protected:
  GstFlowReturn PrepareDispatch () override
  {
    std::lock_guard<gpufan::Mutex> lk (this->self_->priv->streams_lock);
    return prepare_dispatch (this->self_);
  }
  GstFlowReturn CombineLaneResults () override
  {
    std::lock_guard<gpufan::Mutex> lk (this->self_->priv->streams_lock);
    return combine_lane_results (this->self_);
  }
  void ReprobeJoiningLanes () override
  {
    std::lock_guard<gpufan::Mutex> lk (this->self_->priv->streams_lock);
    reprobe_joining_lanes (this->self_);
  }
  guint32 Stream () const override { return stream_; }

  const guint32 stream_;
};

std::unique_ptr<Dispatcher> make_frame_dispatcher (GstGpuFanOut * self);
/* gstgpufanout-chunk.cpp: the single sink pad's chunks */
std::unique_ptr<Dispatcher> make_chunk_dispatcher (GstGpuFanOut * self);
/* The way of sink_%u pad @pad's stream @stream in the element's mode
 * (gstgpufanout-sinkpad.cpp; chunk mode's: gstgpufanout-chunk-streams.cpp) */
std::unique_ptr<Dispatcher> make_stream_dispatcher (GstGpuFanOut * self,
    GstPad * pad, guint32 stream);
std::unique_ptr<Dispatcher> make_stream_chunk_dispatcher (GstGpuFanOut * self,
    GstPad * pad, guint32 stream);

} // namespace fanout

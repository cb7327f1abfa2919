/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gpufanin's item handlers: what differs per mode (frame, chunk, several
 * streams) at the sink pads and the output, so that the core files
 * (gstgpufanin-sink.cpp, gstgpufanin-output.cpp) carry no mode conditional.
 * Each mode's handler lives in that mode's file: gstgpufanin-frame.cpp,
 * gstgpufanin-chunk.cpp, gstgpufanin-streams.cpp.
 *
 * A fan-in starts with the frame handler and changes it when it learns of
 * another mode (gst_gpufan_in_use_handler), never back: the first
 * chunk-start (chunk), a src_%u request or a session with streams
 * (streams). The
 * handlers hold no state (that is the pads' and the element's): one
 * indirect call per item, no lock of their own.
 */
#pragma once

#include <gst/gst.h>

#include <memory>
#include <optional>

#include "gpufan/fanin-port.h"
#include "gstgpufanin.h"

namespace gpufanin {

struct FanInItem;
struct PadState;

/* An item a lane delivered, taken at its sink pad
 * (gst_gpufan_in_take_item): where it goes, and the lane's kOutput time,
 * counted from its taking until this goes. */
struct TakenItem {
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  std::shared_ptr<gpufan::LaneTimer> timer;
  FanInItem * item = nullptr;
  /* chunk mode: the item joined this chunk's output (it leaves with it) */
  std::optional<guint64> chunk_seq;
  /* chunk mode: an output that had left already from a failed lane, freed
   * with this (outside the element's lock) */
  gpufan::PayloadPtr dropped;
  gint64 output_start = 0;

  TakenItem () = default;
  TakenItem (const TakenItem &) = delete;
  TakenItem & operator= (const TakenItem &) = delete;
  ~TakenItem ()
  {
    if (timer)
      timer->Add (gpufan::LaneTime::kOutput, output_start,
          session->clock ().NowNs ());
  }
};

class ItemHandler {
public:
  virtual ~ItemHandler () = default;
  virtual const char * Name () const = 0; /* for the log */
  /* A handler replaces only one of a lower rank: frame 0, streams 1, chunk
   * 2 (chunk mode; with several streams it routes each chunk to its
   * stream's src_k itself). */
  virtual int Rank () const = 0;

  /* Sink: a buffer or a GAP event came out of @pad's lane (takes @obj).
   * Returns what the lane's push gets back. */
  virtual GstFlowReturn Arrive (GstGpuFanIn * self, GstPad * pad,
      GstMiniObject * obj) const = 0;
  /* Sink, under GstGpuFanInPrivate::lock: @taken's item was just made for
   * @state's lane; the mode may keep it (chunk mode: into the open chunk). */
  virtual void TakeUnlocked (PadState &, TakenItem &) const {}
  /* Sink: an event only this mode knows (before the generic handling).
   * TRUE: consumed. */
  virtual bool HandleEvent (GstGpuFanIn *, GstPad *, GstEvent *) const
  {
    return false;
  }
  /* Sink, under lock: a serialized query from @state's lane need not wait
   * for what the lane delivered to leave. */
  virtual bool QueryPassesUnlocked (const PadState &, GstQuery *) const
  {
    return false;
  }

  /* Output: only the src task pushes downstream, never a lane's thread. */
  virtual bool OutputFromTask (GstGpuFanIn *) const { return false; }
  /* Output, under output_lock: @released goes downstream. FALSE: the output
   * stopped (*pause set; the task pauses), the batch's rest is dropped. */
  virtual bool PushReleased (GstGpuFanIn * self, gpufan::FanInPort & session,
      gpufan::Released & released, bool * pause) const = 0;
  /* Output, under output_lock: a batch went out. */
  virtual void AfterBatch (GstGpuFanIn *,
      const std::shared_ptr<gpufan::FanInPort> &, bool *) const
  {
  }
};

const ItemHandler & frame_handler ();  /* gstgpufanin-frame.cpp */
const ItemHandler & chunk_handler ();  /* gstgpufanin-chunk.cpp */
const ItemHandler & streams_handler (); /* gstgpufanin-streams.cpp */

} // namespace gpufanin

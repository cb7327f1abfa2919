/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gpufanin's output of one input stream: a src_%u pad with its own
 * streaming thread (the pad's task) and a queue of what the window released
 * for it. The fan-in's src task takes each batch from the window and hands
 * a stream's items to that stream's queue without waiting; each stream's
 * task pushes them. So a stream whose downstream blocks (a sink that
 * prerolls, a slow one) holds only its own thread.
 *
 * The queue's bound is the stream's admission: an item it holds keeps its
 * stream slot (gpufan::Released::holds_stream_slot) until the task sent or
 * dropped it, and gpufanout admits no more of that stream past its bound
 * (Session::StreamBlockedUnlocked). The other streams and the lanes go on.
 */
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "gpufan/fanin-port.h"
#include "gpufan/mutex.h"
#include "gstgpufanin.h"

namespace gpufanin {

/* A released item on its way out of its stream's pad. It gives its stream
 * slot back when it goes, sent or not. */
class QueuedRelease {
public:
  QueuedRelease (gpufan::Released && released,
      std::shared_ptr<gpufan::FanInPort> session)
      : released_ (std::move (released)), session_ (std::move (session))
  {
    released.holds_stream_slot = false;
  }
  /* The end of the stream (gst_gpufan_in_end_streams_unlocked): EOS if none went. */
  static QueuedRelease End ()
  {
    QueuedRelease end{ gpufan::Released (), nullptr };
    end.end_ = true;
    return end;
  }
  QueuedRelease (QueuedRelease && other) noexcept
      : released_ (std::move (other.released_)),
        session_ (std::move (other.session_)), end_ (other.end_)
  {
    other.released_.holds_stream_slot = false;
  }
  QueuedRelease (const QueuedRelease &) = delete;
  QueuedRelease & operator= (const QueuedRelease &) = delete;
  QueuedRelease & operator= (QueuedRelease &&) = delete;
  ~QueuedRelease ()
  {
    if (session_ && released_.holds_stream_slot)
      session_->StreamOutputDone (released_.stream);
  }

  gpufan::Released & released () { return released_; }
  guint64 session_id () const { return session_ ? session_->id () : 0; }
  bool end () const { return end_; }
  /* a stream flush's end: it survives the flush it ends */
  bool IsFlushStop () const;

private:
  gpufan::Released released_;
  std::shared_ptr<gpufan::FanInPort> session_;
  bool end_ = false;
};

/* One input stream's output. The map of them is under
 * GstGpuFanInPrivate::lock; the queue under queue_lock; what downstream has
 * seen is the task's alone (and the state changes', while it is stopped). */
struct StreamOutput {
  GstGpuFanIn * element = nullptr; /* no reference: it outlives the task */
  GstPad * pad = nullptr;          /* a reference */
  guint index = 0;                 /* src_<index> */
  guint32 stream = 0;              /* the Session's stream id */

  gpufan::Mutex queue_lock;
  gpufan::CondVar queue_cond;
  std::deque<QueuedRelease> queue;
  bool stopping = true; /* under queue_lock: the pad is not active */

  /* between the stream's FLUSH_START and FLUSH_STOP: its items are dropped */
  std::atomic<bool> flushing{ false };
  /* What downstream of it has seen. */
  bool stream_start_sent = false;
  GstEvent * caps_event = nullptr; /* the lanes' caps event last sent */
  GstCaps * caps = nullptr;
  /* the stream's segment, sent before its next frame (not before caps) */
  GstEvent * segment = nullptr;
  bool segment_sent = false;
  /* sticky events (tags...) that came before the first caps */
  std::vector<GstEvent *> held;
  std::atomic<bool> eos_sent{ false }; /* read by the last EOS's check */
  bool warned_not_linked = false;

  StreamOutput () = default;
  StreamOutput (const StreamOutput &) = delete;
  StreamOutput & operator= (const StreamOutput &) = delete;
  ~StreamOutput ()
  {
    Restart ();
    gst_clear_event (&caps_event);
    gst_clear_caps (&caps);
    if (pad)
      gst_object_unref (pad);
  }
  /* a flush's end or a new start: the stream starts over (caps stay) */
  void Restart ()
  {
    gst_clear_event (&segment);
    segment_sent = false;
    for (GstEvent * e : held)
      gst_event_unref (e);
    held.clear ();
    eos_sent = false;
  }
};

using StreamOutputPtr = std::shared_ptr<StreamOutput>;

} // namespace gpufanin

/* gstgpufanin-stream-output.cpp */
/* The src_%u pad's activation: starts or stops its task (its queue is
 * dropped when it stops). */
gboolean gst_gpufan_in_stream_output_activate (GstPad * pad,
    GstObject * parent, GstPadMode mode, gboolean active);
/* Hands @item to @output's task; dropped (its slot given back) when the pad
 * is not active. Never waits. */
void gst_gpufan_in_stream_output_enqueue (gpufanin::StreamOutput & output,
    gpufanin::QueuedRelease && item);
/* The stream's flush began: what its queue holds is dropped, but a
 * FLUSH_STOP (or the end) that is already there. */
void gst_gpufan_in_stream_output_flush (gpufanin::StreamOutput & output);

/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gpufanin's Output: the output side's one flow result, its src task, and
 * the waits that look at that result (gstgpufanin-output.cpp pushes).
 */
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "gpufan/mutex.h"
#include "gpufan/fanin-port.h"

namespace gpufanin {

/* The output's flow state, kept as GstQueue keeps its srcresult: one flow
 * result, changed only by the transitions below (each wakes the waits it
 * ends) and looked at by every wait when it wakes.
 *   OK        running;
 *   FLUSHING  the src pad inactive or a flush in progress (or downstream
 *             returned FLUSHING);
 *   EOS       our EOS went out (or downstream returned EOS);
 *   other     downstream's error or NOT_LINKED: stopped until the next
 *             flush or start.
 * A result downstream returned never replaces our own flush, and
 * downstream's EOS lets the window drain on (the fan-out's admission must
 * not wait on a window nobody empties) with our EOS still to go out: the
 * result remembers whether downstream set it.
 *
 * Changed under GstGpuFanInPrivate::lock (the `...Unlocked` methods expect
 * it held); Result () may be read without it (a lane's chain returns it for
 * every buffer, as queue's chain returns srcresult). */
class Output {
public:
  Output (gpufan::CondVar & cond,
      const std::shared_ptr<gpufan::FanInPort> & session)
      : cond_ (cond), session_ (session)
  {
  }
  Output (const Output &) = delete;
  Output & operator= (const Output &) = delete;

  void SetPad (GstPad * srcpad) { pad_ = srcpad; }

  /* The one flow result: what a lane's push gets back. */
  GstFlowReturn Result () const
  {
    return result_.load (std::memory_order_acquire);
  }
  /* Our flush (or an inactive src pad), not downstream's FLUSHING. */
  bool FlushingUnlocked () const
  {
    return Result () == GST_FLOW_FLUSHING && !from_downstream_;
  }
  bool EosSentUnlocked () const
  {
    return Result () == GST_FLOW_EOS && !from_downstream_;
  }
  /* No output now: flushing, our EOS sent, or stopped by a flow error. */
  bool HaltedUnlocked () const
  {
    const GstFlowReturn r = Result ();
    return r != GST_FLOW_OK && !(r == GST_FLOW_EOS && from_downstream_);
  }

  /* The transitions, in one place. */
  /* Activation or a flush's end: OK. */
  void StartUnlocked () { Set (GST_FLOW_OK, false); }
  /* Deactivation or FLUSH_START: FLUSHING. TRUE when this starts it (one
   * FLUSH_START goes downstream). */
  bool FlushUnlocked ()
  {
    const bool first = !FlushingUnlocked ();
    Set (GST_FLOW_FLUSHING, false);
    return first;
  }
  /* Our EOS went downstream (a flush that began meanwhile stays). */
  void MarkEosSentUnlocked ()
  {
    if (!FlushingUnlocked ())
      Set (GST_FLOW_EOS, false);
  }
  /* A push downstream returned @ret (not OK). */
  void PushReturnedUnlocked (GstFlowReturn ret)
  {
    if (Result () == GST_FLOW_OK || from_downstream_)
      Set (ret, true);
  }

  /* Something the waits look at changed: wakes them (the src task's
   * WaitOutput included). */
  void WakeUnlocked ()
  {
    cond_.notify_all ();
    if (session_)
      session_->WakeOutput ();
  }
  /* One wait on the fan-in's condition, then the check every wait ends
   * with (as GST_QUEUE_WAIT_DEL_CHECK): FALSE once the result is not OK. */
  bool WaitUnlocked (std::unique_lock<gpufan::Mutex> & lk)
  {
    cond_.wait (lk);
    return Result () == GST_FLOW_OK;
  }

  /* The src pad's task. Called with neither output_lock nor lock held
   * (they take the pad's stream lock). */
  gboolean StartTask (GstTaskFunction loop, gpointer data)
  {
    return gst_pad_start_task (pad_, loop, data, nullptr);
  }
  void PauseTask () { gst_pad_pause_task (pad_); }
  gboolean StopTask () { return gst_pad_stop_task (pad_); }

private:
  void Set (GstFlowReturn ret, bool from_downstream)
  {
    from_downstream_ = from_downstream;
    result_.store (ret, std::memory_order_release);
    WakeUnlocked ();
  }

  gpufan::CondVar & cond_;
  const std::shared_ptr<gpufan::FanInPort> & session_;
  GstPad * pad_ = nullptr;
  /* inactive until the src pad is activated */
  std::atomic<GstFlowReturn> result_{ GST_FLOW_FLUSHING };
  bool from_downstream_ = false;
};

} // namespace gpufanin

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: the end of the stream. When it ends (every lane's EOS, or
 * everything accounted for and the lanes' EOS overdue), and the one EOS it
 * sends with the statistics before it. See docs/ordering.md, "When the
 * stream ends". */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <string>
#include <vector>

#include "common/gstgpufanstats.h"

bool
gst_gpufan_in_all_pads_eos_unlocked (GstGpuFanInPrivate * priv)
{
  if (priv->pads.empty ())
    return false;
  for (auto & kv : priv->pads)
    if (!kv.second.eos)
      return false;
  return true;
}

/* Every gpufan-stats message comes from the gpufanout (the element present
 * with or without a fan-in, whose `stats-interval` posts the periodic
 * ones): the final one too, although only we know when the window is
 * drained. */
void
gst_gpufan_in_post_stats (GstGpuFanIn * self, const gpufan::StatsView & session)
{
  GstElement * fanout = GST_ELEMENT (g_weak_ref_get (&self->priv->fanout));
  GstElement * src = fanout ? fanout : GST_ELEMENT (self);
  GST_DEBUG_OBJECT (self,
      "posting the statistics in the name of %" GST_PTR_FORMAT, src);
  gst_element_post_message (src,
      gst_gpufan_stats_message_new (GST_OBJECT (src), session, TRUE));
  gst_clear_object (&fanout);
}

/* A lane's new stream-start: its EOS is gone; after our EOS went out (the
 * fan-out's streams all ended, then one started again), the output runs
 * again and a new stream-start goes out before what comes. TRUE when the
 * caller is to start the src task (without the lock). */
bool
gst_gpufan_in_restart_after_eos (GstGpuFanIn * self, GstPad * pad)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::lock_guard<gpufan::Mutex> lk (priv->lock);
  auto it = priv->pads.find (pad);
  if (it == priv->pads.end () || !it->second.eos)
    return false;
  it->second.eos = false;
  if (!priv->output.EosSentUnlocked () || !GST_PAD_IS_ACTIVE (self->srcpad))
    return false;
  GST_DEBUG_OBJECT (pad, "a new stream after our EOS: the output restarts");
  priv->output.StartUnlocked ();
  gst_gpufan_in_restart_output_unlocked (self);
  gst_clear_event (&priv->out_stream_start);
  priv->streams_stats_posted = false;
  return true;
}

/* Whether the stream ends now: the rule is the Session's (FanInPort::
 * DecideEndOfStream, see docs/ordering.md, "When the stream ends"); here,
 * which pads have their EOS, and the names of those whose EOS never came.
 * TRUE to end now, @missing naming them; else *deadline_ns (or kNoTime) is
 * when to look again unless woken first. */
bool
gst_gpufan_in_stream_ends_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, std::string * missing,
    gint64 * deadline_ns)
{
  GstGpuFanInPrivate * priv = self->priv;
  *deadline_ns = gpufan::kNoTime;
  bool all_eos;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->output.FlushingUnlocked () || priv->output.EosSentUnlocked ())
      return false;
    all_eos = gst_gpufan_in_all_pads_eos_unlocked (priv);
  }
  /* the common answer, without collecting the pads */
  if (!session->MayEndStream (all_eos))
    return false;

  std::vector<gpufan::EosInput> inputs;
  std::vector<std::string> pad_names;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    for (auto & kv : priv->pads) {
      inputs.push_back (gpufan::EosInput{ kv.second.eos, kv.second.paired,
              kv.second.lane });
      pad_names.push_back (GST_OBJECT_NAME (kv.first));
    }
  }
  const gpufan::EndOfStream end = session->DecideEndOfStream (inputs);
  if (!end.ends) {
    *deadline_ns = end.recheck_ns;
    return false;
  }

  std::string names;
  for (const gpufan::MissingInput & m : end.missing) {
    const char *pad = pad_names[m.input].c_str ();
    const guint lane = inputs[m.input].lane;
    gchar * text;
    if (m.why == gpufan::MissingEos::kStalled) {
      gpufan::LaneStats stall;
      stall.stall_kind = m.stall_kind;
      stall.stalled_seq = m.stalled_seq;
      stall.stalled_ns = m.stalled_ns;
      gchar * why = gst_gpufan_stall_reason (stall);
      text = g_strdup_printf ("%s (lane %u, stalled: %s)", pad, lane, why);
      g_free (why);
    } else if (m.why == gpufan::MissingEos::kNotInTime) {
      text = g_strdup_printf ("%s (lane %u, no EOS within stall-timeout)",
          pad, lane);
    } else {
      text = g_strdup_printf ("%s (never paired with a lane)", pad);
    }
    names += (names.empty () ? "" : ", ") + std::string (text);
    g_free (text);
  }
  *missing = names;
  return true;
}

/* Every lane ended (or, @missing not empty, every item is accounted for
 * and those lanes' EOS did not come in time) and the window is drained:
 * statistics, then one EOS. */
void
gst_gpufan_in_finish_stream (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session,
    const std::string & missing)
{
  GstGpuFanInPrivate * priv = self->priv;

  if (!missing.empty ())
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Ending the stream without the EOS of %s", missing.c_str ()),
        ("gpufanout's input ended and every item is accounted for "
         "(delivered, proven dropped or given up); a branch that swallows "
         "EOS or stalled is not waited for longer than stall-timeout"));

  /* a stream that never carried data still gets its stream-start first */
  if (!priv->out_stream_start) {
    FanInItem sticky;
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      for (auto & kv : priv->pads) {
        if (kv.second.sticky && kv.second.sticky->stream_start) {
          sticky.SetSticky (kv.second.sticky);
          break;
        }
      }
    }
    sticky.is_attachment = true;
    gst_gpufan_in_push_sticky (self, &sticky);
  }

  if (session) {
    /* with several streams, once: a stream output that sends the last
     * stream's EOS now may be posting them (post_stats_before_last_eos) */
    std::lock_guard<gpufan::Mutex> st (priv->stats_lock);
    bool streams;
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      streams = !priv->stream_outputs.empty ();
    }
    if (!priv->streams_stats_posted) {
      priv->streams_stats_posted = streams;
      gst_gpufan_in_post_stats (self, *session);
    }
  }
  GST_DEBUG_OBJECT (self, "all lanes ended, pushing EOS");
  GstEvent * eos = gst_event_new_eos ();
  {
    /* keep upstream's seqnum (it follows a seek's) */
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->eos_seqnum != GST_SEQNUM_INVALID)
      gst_event_set_seqnum (eos, priv->eos_seqnum);
  }
  gst_pad_push_event (self->srcpad, eos);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (!gst_gpufan_in_all_pads_eos_unlocked (priv)) {
      /* a lane started again meanwhile (gst_gpufan_in_restart_after_eos
       * saw no EOS of ours yet): the output goes on, and the src_%u pads
       * end at the next end */
      gst_clear_event (&priv->out_stream_start);
      priv->streams_stats_posted = false;
      return;
    }
    gst_gpufan_in_end_streams_unlocked (self);
    priv->output.MarkEosSentUnlocked ();
  }
  priv->output.PauseTask ();
  /* a lane that started again after our EOS went out may have started the
   * task before this pause: it runs again */
  bool restarted;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    restarted = !priv->output.HaltedUnlocked ();
  }
  if (restarted)
    priv->output.StartTask (gst_gpufan_in_src_loop, self);
}

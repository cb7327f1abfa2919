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

/* Whether the stream ends now (see docs/ordering.md, "When the stream
 * ends"): when every sink pad has EOS and the window is empty; or when the
 * fan-out's input ended and every item is accounted for, as soon as every
 * lane that is not stalled has returned EOS and at the latest stall-timeout
 * later (a branch may swallow EOS; a stalled lane was waited for already).
 * TRUE to end now, @missing naming the lanes whose EOS never came; else
 * *deadline_ns (or kNoTime) is when to look again unless woken first. */
bool
gst_gpufan_in_stream_ends_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session, std::string * missing,
    gint64 * deadline_ns)
{
  GstGpuFanInPrivate * priv = self->priv;
  struct Waiting {
    std::string pad;
    bool paired;
    guint lane;
  };
  *deadline_ns = gpufan::kNoTime;
  bool all_eos;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->output.FlushingUnlocked () || priv->output.EosSentUnlocked ())
      return false;
    all_eos = gst_gpufan_in_all_pads_eos_unlocked (priv);
  }
  if (!session->WindowEmpty ())
    return false;
  if (all_eos)
    return true;
  const gint64 since = session->AccountedForSinceNs ();
  if (since == gpufan::kNoTime)
    return false;

  /* Only now, once the input ended: which lanes are still without EOS. */
  std::vector<Waiting> waiting;
  bool no_pads;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    no_pads = priv->pads.empty ();
    for (auto & kv : priv->pads)
      if (!kv.second.eos)
        waiting.push_back (Waiting{ GST_OBJECT_NAME (kv.first),
            kv.second.paired, kv.second.lane });
  }
  if (waiting.empty ())
    return !no_pads; /* the last pad got EOS meanwhile */

  const gpufan::SessionStats stats = session->Stats ();
  auto lane_stats = [&stats] (guint id) -> const gpufan::LaneStats * {
    for (const auto & l : stats.lanes)
      if (l.lane == id)
        return &l;
    return nullptr;
  };
  bool wait_more = false;
  std::string names;
  for (const Waiting & w : waiting) {
    const gpufan::LaneStats * l = w.paired ? lane_stats (w.lane) : nullptr;
    /* a lane taken out of the stream sends nothing more, EOS included */
    if (l && l->state == gpufan::LaneHealth::kFailed)
      continue;
    const bool stalled = l && l->state == gpufan::LaneHealth::kStalled;
    wait_more |= !stalled;
    gchar * text;
    if (stalled) {
      gchar * why = gst_gpufan_stall_reason (*l);
      text = g_strdup_printf ("%s (lane %u, stalled: %s)", w.pad.c_str (),
          w.lane, why);
      g_free (why);
    } else if (w.paired) {
      text = g_strdup_printf ("%s (lane %u, no EOS within stall-timeout)",
          w.pad.c_str (), w.lane);
    } else {
      text = g_strdup_printf ("%s (never paired with a lane)", w.pad.c_str ());
    }
    names += (names.empty () ? "" : ", ") + std::string (text);
    g_free (text);
  }
  const gint64 deadline = since + session->stall_timeout_ns ();
  if (wait_more && session->clock ().NowNs () < deadline) {
    *deadline_ns = deadline;
    return false;
  }
  *missing = names;
  return true;
}

/* Every lane ended (or, @missing not empty, every item is accounted for
 * and those lanes' EOS did not come in time) and the window is drained:
 * statistics, then one EOS. */
void
gst_gpufan_in_finish_stream (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::Session> & session,
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

  if (session && !priv->streams_stats_posted) {
    gst_element_post_message (GST_ELEMENT (self),
        gst_gpufan_stats_message_new (GST_OBJECT (self), *session));
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
  gst_gpufan_in_end_streams (self);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    priv->output.MarkEosSentUnlocked ();
  }
  priv->output.PauseTask ();
}

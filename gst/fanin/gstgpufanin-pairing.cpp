/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: pairing. A sink pad finds the gpufanout lane that feeds it
 * through its branch (GstGpuFanPair queries, either way), and a pair query
 * of an outer pair crosses ours. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <string>
#include <vector>

/* A new session: each src_k pad needs a stream k (gpufanout's sink_k).
 * One without would never get a frame, and its sink would hold the
 * preroll forever: an error naming it. */
static void
check_stream_outputs (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, const gchar * fanout)
{
  std::vector<guint> missing;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    for (auto & kv : self->priv->stream_outputs)
      if (!session->HasStream (kv.first))
        missing.push_back (kv.second->index);
  }
  for (guint index : missing) {
    GST_ELEMENT_ERROR (self, CORE, PAD,
        ("%s:src_%u has no stream: gpufanout '%s' has no sink_%u (stream k "
         "enters on its sink_k and leaves on src_k); request and feed %s's "
         "sink_%u, or release %s:src_%u",
            GST_OBJECT_NAME (self), index, fanout, index, fanout, index,
            GST_OBJECT_NAME (self), index),
        ("its downstream would never get a frame, nor preroll"));
    return; /* one is enough */
  }
}

/* Pairs @pad with lane @lane of @session, whose gpufanout is the one that
 * @query names. FALSE if this fan-in already belongs to another fan-out
 * (@conflict then says which two). */
static gboolean
pair_pad (GstGpuFanIn * self, GstPad * pad,
    const std::shared_ptr<gpufan::FanInPort> & session, guint lane,
    GstQuery * query, std::string * conflict = nullptr)
{
  GstGpuFanInPrivate * priv = self->priv;
  bool new_session = false;
  g_autofree gchar * fanout = gst_gpufan_pair_query_get_fanout (query);
  g_autoptr (GstElement) fanout_element
      = gst_gpufan_pair_query_get_fanout_element (query);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end ())
      return FALSE;
    if (priv->session && priv->session != session) {
      gchar * text = g_strdup_printf ("%s:%s is fed by gpufanout '%s', but "
                                      "the other sink pads by gpufanout '%s'",
          GST_OBJECT_NAME (self), GST_OBJECT_NAME (pad), fanout,
          priv->fanout_name.c_str ());
      GST_WARNING_OBJECT (pad, "%s", text);
      if (conflict)
        *conflict = text;
      g_free (text);
      return FALSE;
    }
    new_session = !priv->session;
    priv->session = session;
    priv->fanout_name = fanout;
    /* the statistics go out in its name (gst_gpufan_in_post_stats) */
    g_weak_ref_set (&priv->fanout, fanout_element);
    it->second.session = session;
    it->second.lane = lane;
    it->second.timer = session->LaneTimerFor (lane);
    it->second.paired = true;
    /* stall-timeout is ours: it goes down to the Session here (and when the
     * property changes), once per pairing; gpufanout never reads it, it asks
     * the Session when its markers and retries are due. */
    session->SetStallTimeout ((gint64)priv->stall_timeout.load ());
    session->ClaimLane (lane);
    priv->cond.notify_all ();
  }
  /* outside our lock: the listener takes it */
  if (new_session) {
    /* its streams leave by their src_%u pads (or are dropped without) */
    if (session->HasStreams ())
      gst_gpufan_in_use_handler (self, gpufanin::streams_handler ());
    gst_gpufan_in_listen_stream_flushes (self, session, true);
    check_stream_outputs (self, session, fanout);
  }
  GST_DEBUG_OBJECT (pad, "paired with lane %u of session %" G_GUINT64_FORMAT,
      lane, session->id ());
  return TRUE;
}

/* Asks upstream, through the branch, which fan-out lane feeds @pad. FALSE
 * if none does, or (@conflict set) if one that is not ours does. */
gboolean
gst_gpufan_in_ensure_paired (GstGpuFanIn * self, GstPad * pad,
    std::string * conflict)
{
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    auto it = self->priv->pads.find (pad);
    if (it != self->priv->pads.end () && it->second.paired)
      return TRUE;
  }

  GstQuery * query = gst_gpufan_pair_query_new (nullptr, 0, nullptr);
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  gboolean ok = gst_pad_peer_query (pad, query)
      && gst_gpufan_pair_query_parse (query, &session, &lane);
  if (ok)
    ok = pair_pad (self, pad, session, lane, query, conflict);
  gst_query_unref (query);
  return ok;
}

/* A gpufanout probes the branch of its lane, which ends at @pad (or an outer
 * fan-out's probe crosses our pair on its way downstream). */
gboolean
gst_gpufan_in_answer_pair_query (GstGpuFanIn * self, GstPad * pad,
    GstQuery * query)
{
  guint depth = gst_gpufan_pair_query_get_depth (query);
  if (depth > 0) {
    /* an outer fan-out's probe crossing our pair: on downstream */
    gst_gpufan_pair_query_set_depth (query, depth - 1);
    return gst_pad_peer_query (self->srcpad, query);
  }
  /* a gpufanout probes its lane's branch */
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  if (!gst_gpufan_pair_query_parse (query, &session, &lane))
    return FALSE;
  if (!pair_pad (self, pad, session, lane, query))
    return FALSE;
  gst_gpufan_pair_query_set_claimed (query);
  return TRUE;
}

/* An outer fan-in asks upstream: cross our pair through one branch. */
gboolean
gst_gpufan_in_cross_pair_query (GstGpuFanIn * self, GstQuery * query)
{
  gst_gpufan_pair_query_set_depth (query,
      gst_gpufan_pair_query_get_depth (query) + 1);
  GstPad * sinkpad = nullptr;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    if (!self->priv->pads.empty ())
      sinkpad = GST_PAD (gst_object_ref (self->priv->pads.begin ()->first));
  }
  if (!sinkpad)
    return FALSE;
  gboolean res = gst_pad_peer_query (sinkpad, query);
  gst_object_unref (sinkpad);
  return res;
}

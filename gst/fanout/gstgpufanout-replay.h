/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's replay: a failed lane's frames sent to the other lanes
 * (gstgpufanout-replay.cpp). */
#pragma once

#include <gst/gst.h>

#include <deque>
#include <vector>

#include "gpufan/fanout-port.h"
#include "gstgpufanout-lane.h"

namespace fanout {

/* An item a failed lane handed over before the chain function kept it:
 * the chain function sends it on (or gives it up) once it decides. */
struct ReplayOrphan {
  guint lane = 0; /* the lane that failed */
  gpufan::ReplayItem item;
};

/* What the fan-out keeps of a dispatched item to send it again. */
struct ReplayCopy {
  guint64 seq = 0;
  GstMiniObject * obj = nullptr; /* a reference */
  ItemKind kind = ItemKind::kBuffer;
  guint32 caps_epoch = 0;
  gint64 pts = -1;
};

/* What replay keeps of one input stream (the sink pad's, or a sink_%u
 * pad's): one chain thread dispatches the stream's items and decides
 * whether it keeps each, in seq order, while other streams' threads do the
 * same at once. */
struct ReplayStream {
  std::deque<ReplayCopy> copies; /* ascending seq */
  /* the latest seq the chain function kept or went without keeping, plus
   * one (0: none yet); only the item after it may be undecided */
  guint64 decided_through = 0;
};

/* What chunk mode keeps of a chunk to send it again whole: references to
 * its items as they were queued, its end once it is closed. */
struct ChunkCopy {
  std::vector<QueuedItem> parts;
  bool ended = false;
};

/* Replay (gstgpufanout-replay.cpp) */
/* on-lane-error=replay or on-stall=replay, outside chunk mode */
bool replay_on (GstGpuFanOut * self);
/* The chain function of @stream keeps a reference to scheduled item @seq
 * (a buffer or GAP, awaited) while replay is on, or says it did not;
 * either way it settles the item if its lane failed meanwhile (an
 * orphan). */
void replay_keep (GstGpuFanOut * self, guint32 stream, guint64 seq,
    GstMiniObject * obj, ItemKind kind, guint32 caps_epoch, gint64 pts);
void replay_not_kept (GstGpuFanOut * self, guint32 stream, guint64 seq);
/* Frame dispatch's hooks: the Session dispatched @item (@d) of @stream,
 * about to be queued, kept or not as above; whether the lane refused it
 * because it failed and replay handed the item over (it goes again
 * without us). */
void replay_note_dispatched (GstGpuFanOut * self, const gpufan::Dispatch & d,
    const QueuedItem & item, gint64 pts, guint32 stream);
bool replay_took_over (GstGpuFanOut * self, const gpufan::Dispatch & d);
/* Items left gpufanin: every item below @released_through, and each
 * stream's items below its own mark; their references go (the Session's
 * release listener). */
void replay_release (GstGpuFanOut * self, guint64 released_through);
/* Forgets every kept item (a flush, a new start). */
void replay_forget (GstGpuFanOut * self);
/* Lane @id failed: its items go to the other lanes. Returns how many did
 * (@lost: how many could not). */
guint replay_lane (GstGpuFanOut * self, guint id, guint * lost);

/* Chunk mode's replay (gstgpufanout-chunk-replay.cpp) */
/* Sets the Session's release listener (once), before the first kept item. */
void replay_listen (GstGpuFanOut * self);
/* Keeps a reference to chunk item @item (a buffer, a GAP, or its end) as it
 * is queued, while replay is on (any lock held: replay_lock is a leaf). */
void chunk_replay_keep (GstGpuFanOut * self, const QueuedItem & item);
/* Lane @lane failed: each chunk it held goes again whole, to the lane the
 * Session picks, in its place (with chunk_move_lock not held). Returns the
 * frames sent again (@lost: those given up). */
guint chunk_replay_lane (GstGpuFanOut * self, const LanePtr & lane,
    guint * lost);
/* @lane's queue ends at a chunk boundary again: the chunks held for it go
 * in (with the lane lock held). */
void chunk_replay_place_held_unlocked (const LanePtr & lane);
/* The kept chunks below @through (of @stream's marks: replay_release). */
void chunk_replay_release_unlocked (GstGpuFanOut * self,
    const std::vector<std::pair<guint32, guint64>> & marks, guint64 through,
    std::vector<GstMiniObject *> * gone);

} // namespace fanout

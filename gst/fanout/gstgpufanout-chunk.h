/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's chunk mode: runs of frames to one lane, cut at keyframes or
 * by count (gstgpufanout-chunk.cpp, -chunk-move.cpp, -cut.cpp). */
#pragma once

#include <gst/gst.h>

#include <vector>

#include "gpufan/cut-point.h"
#include "gstgpufanout-lane.h"

namespace fanout {

/* What a clean cut is in keyframes mode (gstgpufanout-cut.cpp): for
 * H.264/H.265 in access units, an IDR found by scanning the buffer
 * (nal_length_size 0: start codes; else length prefixes of that size);
 * kOther: a buffer without DELTA_UNIT. */
struct CutRule {
  gpufan::VideoCodec codec = gpufan::VideoCodec::kOther;
  guint nal_length_size = 0;
};

/* The chunk an input is filling (its streaming thread's own: the single
 * sink pad's, or a sink_%u pad's; reset by FLUSH_STOP and READY->PAUSED,
 * when no buffer flows). */
struct ChunkCursor {
  LanePtr lane; /* null: no chunk open */
  guint64 seq = 0;
  guint frames = 0;
  /* keyframes mode: the rest of a chunk whose lane stalled is dropped up
   * to the next keyframe (nothing decodes without it) */
  bool skip_to_keyframe = false;
  /* its lane stalled before it began, and no other lane took it */
  bool move_failed = false;
  /* keyframes mode: what a clean cut is for the input's caps cut_caps
   * (gstgpufanout-cut.cpp), and whether the "no clean cut" warning was
   * posted for them */
  CutRule cut;
  GstCaps * cut_caps = nullptr;
  bool no_cut_warned = false;

  ChunkCursor () = default;
  ChunkCursor (const ChunkCursor &) = delete;
  ChunkCursor & operator= (const ChunkCursor &) = delete;
  ~ChunkCursor () { gst_clear_caps (&cut_caps); }
};

/* Chunk mode (gstgpufanout-chunk.cpp) */
bool chunk_mode_on (GstGpuFanOut * self);
/* Where keyframes mode may cut (gstgpufanout-cut.cpp): H.264/H.265 in
 * access units at IDR pictures only (found by scanning the buffer), other
 * caps at buffers without DELTA_UNIT. */
CutRule cut_rule_from_caps (GstCaps * caps);
bool is_clean_cut (const CutRule & rule, GstBuffer * buffer);
/* Ends @cursor's open chunk (a caps or segment change, EOS): its lane
 * drains. */
void chunk_close (GstGpuFanOut * self, ChunkCursor & cursor);
/* Forgets @cursor's open chunk (a flush dropped it). */
void chunk_forget (GstGpuFanOut * self, ChunkCursor & cursor);
/* The stall listener in chunk mode: marks the lane stalled, and its chunks
 * that have not begun go to other lanes whole. */
void chunk_move_off_stalled (GstGpuFanOut * self, const LanePtr & lane);
/* A lane that failed: its whole chunks that have not begun go to other
 * lanes (those that only a lane with the open chunk could take are lost). */
void chunk_move_off_failed (GstGpuFanOut * self, const LanePtr & lane);
/* The chain function: moves left to it (its open chunk was in the way);
 * its open chunk @seq, not begun on stalled lane @from, to another lane
 * (which it returns, null when none takes it); whether @lane has its open
 * chunk. */
void chunk_run_pending_moves (GstGpuFanOut * self);
LanePtr chunk_move_open (GstGpuFanOut * self, const LanePtr & from,
    guint64 seq);
void chunk_set_open (GstGpuFanOut * self, const LanePtr & lane, bool open,
    guint64 seq);
/* Queues the open chunk's @end on @lane, or on the lane the chunk moved to
 * (then @lane becomes that one): the chunk is closed. */
void chunk_queue_end (GstGpuFanOut * self, LanePtr & lane, QueuedItem && end);
/* The worker is not to begin the chunk at its queue's front: it may move
 * (call with the lane lock held). */
bool chunk_begin_held_unlocked (GstGpuFanOut * self, const LanePtr & lane);
/* Several input streams (gstgpufanout-chunk-streams.cpp): before chunk
 * @first's start, its stream's caps and segment where the lane's branch
 * has others; a flush of @stream takes its closed chunks that have not
 * begun out of @lane's queue (with the lane lock held): their items into
 * @taken, their seqs (one per chunk, for Session::WithdrawItem) into
 * @seqs. */
void chunk_send_stream_events (const LanePtr & lane, const QueuedItem & first);
void chunk_withdraw_stream_unlocked (const LanePtr & lane, guint32 stream,
    std::vector<QueuedItem> * taken, std::vector<guint64> * seqs);
/* The chunk item handler's part: a kChunkBuffer or kChunkEnd item. */
void chunk_push_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item, GstFlowReturn result, guint link_generation);

} // namespace fanout

// SPDX-License-Identifier: LGPL-2.1-or-later
// The fan-in's port onto a Session (gpufan/session.h): it claims lanes, turns
// what comes out of the branches into arrivals, takes what may leave in input
// order, waits for output, and decides when the stream ends. The fan-in sees
// the Session only through it (and the read-only StatsView it extends).
//
// The fan-out makes it with the Session (FanOutPort::fanin_port) and the
// pairing hands it over: always the same port for one Session, so that a
// fan-in tells its sessions apart by it. Every method forwards inline to the
// Session (no virtual call, no lock of its own); thread-safety, blocking and
// lock order are the Session's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gpufan/lane-time.h"
#include "gpufan/payload.h"
#include "gpufan/session-types.h"
#include "gpufan/session.h"
#include "gpufan/stats-view.h"

namespace gpufan {

class FanInPort : public StatsView {
 public:
  explicit FanInPort(std::shared_ptr<Session> core)
      : StatsView(std::move(core)) {}

  // --- settings the fan-in owns ---
  // stall-timeout (> 0): how long the window waits for a head item, and for
  // the lanes' EOS once every item is accounted for. gpufanin's property: it
  // hands it over when it pairs and when the property changes; the fan-out
  // never reads it (its marker and retry deadlines come from the Session).
  void SetStallTimeout(int64_t ns) { core().SetStallTimeout(ns); }
  int64_t stall_timeout_ns() const { return core().stall_timeout_ns(); }

  // --- lanes and streams ---
  // A fan-in waits for the lane's items from now on.
  void ClaimLane(uint32_t lane) { core().ClaimLane(lane); }
  // The fan-in let go of the lane (its pad was released, or the pipeline
  // stopped): its outstanding items count as dropped and later ones are not
  // awaited until the lane is claimed again.
  void UnclaimLane(uint32_t lane) { core().UnclaimLane(lane); }
  // The timer of `lane`, made with the lane (AddLane) and kept by it: the
  // threads that time the lane take it once. For a lane the Session does
  // not know, a timer of its own that nothing reads.
  std::shared_ptr<LaneTimer> LaneTimerFor(uint32_t lane) {
    return core().LaneTimerFor(lane);
  }
  // The stream was added (a dispatch of it, or the fan-out's AddStream) and
  // not removed.
  bool HasStream(uint32_t stream) const { return core().HasStream(stream); }
  // Pushes a stream's flush on its output (the fan-out's FlushStream).
  // Setting another (or none) waits for a call in progress.
  void SetStreamFlushListener(
      std::function<void(uint32_t stream, bool start)> listener) {
    core().SetStreamFlushListener(std::move(listener));
  }

  // --- what comes out of the branches ---
  // An item came out of lane `lane`'s branch. With `seq` known (the meta
  // survived) it is matched directly; otherwise by `pts_ns` among the lane's
  // outstanding items, else the lane's oldest (each lane is FIFO). Earlier
  // outstanding items of the same lane are declared dropped.
  // `wake_output` false: the caller takes what may leave (TakeReady) itself,
  // so WaitOutput is not woken (the generation does not move) for this
  // arrival; a matched item still wakes DispatchItem.
  Arrival Arrive(uint32_t lane, std::optional<uint64_t> seq, int64_t pts_ns,
                 PayloadPtr payload, bool wake_output = true) {
    return core().Arrive(lane, seq, pts_ns, std::move(payload), wake_output);
  }
  // Arrive(..., false) and TakeReady() under one lock, for a caller that
  // pushes the output itself; into `*batch`, whose items are replaced
  // (destroyed first, outside the lock): a caller that keeps one batch
  // reuses its storage. So does ProveLaneAndTakeReady.
  void ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                          int64_t pts_ns, PayloadPtr payload, Arrival *arrival,
                          ReadyBatch *batch) {
    core().ArriveAndTakeReady(lane, seq, pts_ns, std::move(payload), arrival,
                              batch);
  }
  // A marker the lane worker pushed behind item `seq` came out of the
  // lane's branch: every item of the lane up to `seq` that has not come back
  // never will (the branch keeps serialized events in order with buffers).
  // Shows the lane alive (a stalled lane is scheduled again).
  void ProveLane(uint32_t lane, uint64_t seq) { core().ProveLane(lane, seq); }
  // ProveLane() and TakeReady() under one lock (see ArriveAndTakeReady).
  void ProveLaneAndTakeReady(uint32_t lane, uint64_t seq, ReadyBatch *batch) {
    core().ProveLaneAndTakeReady(lane, seq, batch);
  }
  // Attaches a payload (an event) to leave right before item `seq`.
  void AttachBefore(uint64_t seq, PayloadPtr payload) {
    core().AttachBefore(seq, std::move(payload));
  }
  // The lane ended (EOS): its outstanding items are gone; with
  // `before_seq` (the EOS's EventPosition), only those dispatched before it.
  void LaneEnded(uint32_t lane,
                 std::optional<uint64_t> before_seq = std::nullopt) {
    core().LaneEnded(lane, before_seq);
  }
  // Serialized events: where the fan-out placed the event `event_key`
  // (its seqnum) in the item sequence.
  std::optional<uint64_t> EventPosition(uint32_t event_key) const {
    return core().EventPosition(event_key);
  }
  // True while something that came back on `lane` waits in the window (a
  // serialized query on that lane must not overtake it).
  bool HoldsArrivedFrom(uint32_t lane) const {
    return core().HoldsArrivedFrom(lane);
  }

  // --- chunk mode ---
  // Chunk mode: the fan-in got the flush that reset the lane's branch after
  // a chunk; the fan-out counts them to see whether its reset got through
  // (a branch element that drops flushes leaves the pads behind it at EOS).
  void NoteLaneReset(uint32_t lane) { core().NoteLaneReset(lane); }
  // The fan-in: chunk `seq` of `lane` ended without its drain, at an EOS
  // the branch made itself (a queue does so after an error downstream of
  // it): the chunk is given up, counted failed, and settled.
  void EndChunkByBranch(uint32_t lane, uint64_t seq) {
    core().EndChunkByBranch(lane, seq);
  }
  // An output of item `seq` came back from `lane`. Counts as progress and
  // says where the item stands (Session::ChunkState).
  using ChunkState = Session::ChunkState;
  ChunkState ChunkOutput(uint32_t lane, uint64_t seq) {
    return core().ChunkOutput(lane, seq);
  }
  // The fan-in sends `outputs` outputs of head chunk `seq` downstream
  // before the chunk ended (what a lane failure does not count lost). False,
  // and they are late, when the item is no longer pending on `lane`.
  bool NoteChunkStreamed(uint32_t lane, uint64_t seq, size_t outputs) {
    return core().NoteChunkStreamed(lane, seq, outputs);
  }
  // Chunk `seq`, sent again to `lane` after a lane failure (replay): how
  // many of its outputs had already left from the lanes it failed on. The
  // branch makes the same outputs for the same chunk (it starts each chunk
  // from a reset), so the fan-in drops that many of the new lane's first.
  uint32_t ChunkOutputsSent(uint32_t lane, uint64_t seq) const {
    return core().ChunkOutputsSent(lane, seq);
  }
  // The window's head while it is pending (nothing before it is left to
  // release but what is attached to it): chunk mode sends a head chunk's
  // output as it comes.
  std::optional<uint64_t> PendingHeadSeq() const {
    return core().PendingHeadSeq();
  }
  // True while item `seq` has its slot in the window.
  bool IsOpen(uint64_t seq) const { return core().IsOpen(seq); }
  // The input stream of item `seq` while it has its slot (kMainStream
  // otherwise): where the head chunk's output goes with several streams.
  uint32_t ItemStream(uint64_t seq) const { return core().ItemStream(seq); }

  // --- the output ---
  // Releases what may leave now, in order, applying the stall timeout to a
  // pending head, into a batch the caller keeps. Never blocks.
  void TakeReady(ReadyBatch *batch) { core().TakeReady(batch); }
  // Blocks until the generation moves past `generation` or the stall
  // deadline of a head pending during the wait passes, whichever comes
  // first; the second form also ends after `max_wait_ns`. The generation
  // moves for an arrival the caller is to take, a drop, a stall, the end
  // of the input, SetFlushing (either way), Reset, WakeOutput, and a new
  // pending head that expires before the wait would end (a dispatch into an
  // empty window, or a stalled lane's item, which is given up as soon as it
  // heads the window). Flushing alone does not end it. A head's deadline
  // holds the wait to it even once that head has left (nothing announces
  // that; a later head's deadline is no earlier), until a TakeReady at or
  // after it. Deadlines bound the wait only with a real-time clock.
  void WaitOutput(uint64_t generation) { core().WaitOutput(generation); }
  void WaitOutput(uint64_t generation, int64_t max_wait_ns) {
    core().WaitOutput(generation, max_wait_ns);
  }
  void WakeOutput() { core().WakeOutput(); }
  // True when nothing awaited is in the window.
  bool WindowEmpty() const { return core().WindowEmpty(); }
  // The fan-in's output failed (downstream returned a fatal flow): the
  // lanes' pushes will return that error too, and it is not theirs.
  void NoteOutputFailed() { core().NoteOutputFailed(); }
  // The output of a stream sent or dropped an item that held a slot there
  // (Released::holds_stream_slot): see Session::StreamOutputDone.
  void StreamOutputDone(uint32_t stream) { core().StreamOutputDone(stream); }
  // The fan-in moved a frame in GPU memory to its output device by `path`.
  void CountOutputGpuFrame(GpuCopyPath path, uint64_t bytes = 0,
                           int64_t ns = 0) {
    core().CountOutputGpuFrame(path, bytes, ns);
  }
  // What ordering adds to the pipeline's latency: the longest time an item
  // recently spent between its dispatch and its arrival at the fan-in (an
  // item leaves at the latest when every earlier one arrived, and earlier
  // ones were dispatched earlier). At most stall-timeout. 0 before anything
  // came back.
  int64_t AddedLatencyNs() const { return core().AddedLatencyNs(); }
  // The fan-in answered a latency query with `ns`.
  void MarkLatencyReported(int64_t ns) { core().MarkLatencyReported(ns); }

  // --- the end of the stream (docs/ordering.md, "When the stream ends") ---
  // Whether DecideEndOfStream could end the stream now: the window is empty,
  // and every input ended (`all_inputs_ended`) or the fan-out's input ended
  // and every item is accounted for. Cheap: the fan-in asks it after each
  // batch and collects its inputs only when it says yes.
  bool MayEndStream(bool all_inputs_ended) const {
    return core().MayEndStream(all_inputs_ended);
  }
  // The stream ends when every input has its EOS and the window is empty;
  // or, once the fan-out's input ended and every item is accounted for, as
  // soon as every input whose lane is neither stalled nor failed has its
  // EOS, and at the latest stall-timeout later (a branch may swallow EOS; a
  // stalled lane was waited for already). Never without inputs.
  EndOfStream DecideEndOfStream(const std::vector<EosInput>& inputs) const {
    return core().DecideEndOfStream(inputs);
  }
};

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// The fan-out's port onto a Session (gpufan/session.h): admission (numbering
// items and picking their lane), the lanes and what their workers report,
// input streams, chunks and replay, and the deadlines of a stalled lane's
// liveness markers and of a last-resort chunk's retry. The fan-out sees the
// Session only through it (and the read-only StatsView it extends); it makes
// the Session, and hands its fan-in's port over at pairing (fanin_port).
//
// Every method forwards inline to the Session (no virtual call, no lock of its
// own); thread-safety, blocking and lock order are the Session's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpufan/clock.h"
#include "gpufan/device.h"
#include "gpufan/fanin-port.h"
#include "gpufan/lane-time.h"
#include "gpufan/mutex.h"
#include "gpufan/payload.h"
#include "gpufan/session-types.h"
#include "gpufan/session.h"
#include "gpufan/stats-view.h"

namespace gpufan {

class FanOutPort : public StatsView {
 public:
  // A new Session, seen from its fan-out.
  static std::shared_ptr<FanOutPort> Create(
      const SessionConfig& config = {}, std::shared_ptr<Clock> clock = nullptr) {
    return std::make_shared<FanOutPort>(
        Session::Create(config, std::move(clock)));
  }
  explicit FanOutPort(std::shared_ptr<Session> core)
      : StatsView(core), fanin_(std::make_shared<FanInPort>(std::move(core))) {}

  // What the pairing hands each gpufanin that pairs with one of its lanes
  // (the pair query): the one fan-in port of this Session. Settings the
  // fan-in owns (stall-timeout) go down through it, not through the fan-out.
  const std::shared_ptr<FanInPort>& fanin_port() const { return fanin_; }

  // --- settings the fan-out owns (its properties) ---
  void SetPolicy(Policy policy) { core().SetPolicy(policy); }
  void SetLaneQueueSize(uint32_t size) { core().SetLaneQueueSize(size); }
  void SetMaxInFlight(uint32_t limit) { core().SetMaxInFlight(limit); }
  // on-stall=replay (SessionConfig::stall_fails_lane).
  void SetStallFailsLane(bool fails) { core().SetStallFailsLane(fails); }
  void SetChunkMode(bool chunks) { core().SetChunkMode(chunks); }

  // --- lanes (lane ids are the fan-out's src pad indices) ---
  void AddLane(uint32_t lane, const Device& device, double weight = 1.0) {
    core().AddLane(lane, device, weight);
  }
  // Forgets the lane; its outstanding items are dropped.
  void RemoveLane(uint32_t lane) { core().RemoveLane(lane); }
  void SetLaneWeight(uint32_t lane, double weight) {
    core().SetLaneWeight(lane, weight);
  }
  // The device the lane runs on changed (placement happens after AddLane).
  void SetLaneDevice(uint32_t lane, const Device& device) {
    core().SetLaneDevice(lane, device);
  }
  // What the lane's statistics show of the fan-out's side of it (LaneStats::
  // worker_thread, host_pool...); kept until the lane is removed.
  void SetLaneInfo(uint32_t lane, LaneInfo info) {
    core().SetLaneInfo(lane, std::move(info));
  }
  // Only LaneInfo::worker_thread changes (the lane's thread started and was
  // bound, or not); the host pool stays.
  void SetLaneWorkerThread(uint32_t lane, std::string worker_thread) {
    core().SetLaneWorkerThread(lane, std::move(worker_thread));
  }
  // The lane's worker copied a frame into its host pool (`copied`), or found
  // it had to and could not.
  void CountStaging(uint32_t lane, bool copied) {
    core().CountStaging(lane, copied);
  }
  // A frame in GPU memory reached `lane` by `path`, moving `bytes` in `ns`;
  // a copy's time is the lane's latest started item's, kept out of its
  // service time.
  void CountGpuFrame(uint32_t lane, GpuCopyPath path, uint64_t bytes = 0,
                     int64_t ns = 0) {
    core().CountGpuFrame(lane, path, bytes, ns);
  }
  // Ineligible lanes get no new items (unlinked, failed, ended, flushing).
  void SetLaneEligible(uint32_t lane, bool eligible) {
    core().SetLaneEligible(lane, eligible);
  }
  bool IsLaneClaimed(uint32_t lane) const { return core().IsLaneClaimed(lane); }
  // The pipeline stopped: the lane's items are no longer awaited.
  void UnclaimLane(uint32_t lane) { core().UnclaimLane(lane); }
  // The lane is stalled: an item of it was the window's head for
  // stall-timeout without coming back (see LaneHealth::kStalled).
  bool IsLaneStalled(uint32_t lane) const { return core().IsLaneStalled(lane); }
  // The fan-out took the lane out of the stream because its branch failed
  // (true), or starts it again (false). A failed lane's outstanding items are
  // given up at once; it gets no items (LaneHealth::kFailed) and a fan-in
  // stops waiting for its EOS. A flush (Reset) keeps it failed. Returns the
  // frames given up that a fan-in awaited (a chunk counts its frames less
  // the outputs that left already, as if the branch made one per frame).
  uint64_t SetLaneFailed(uint32_t lane, bool failed) {
    return core().SetLaneFailed(lane, failed);
  }
  bool IsLaneFailed(uint32_t lane) const { return core().IsLaneFailed(lane); }
  // Why no lane can take an item, for an error message; empty when the
  // reason is only that no lane is linked and active.
  std::string WhyNoLane() const { return core().WhyNoLane(); }
  // The chunk resets of the lane's branch the fan-in saw.
  uint64_t LaneResets(uint32_t lane) const { return core().LaneResets(lane); }
  // The timer of `lane`, made with the lane (AddLane) and kept by it: the
  // threads that time the lane take it once. For a lane the Session does
  // not know, a timer of its own that nothing reads.
  std::shared_ptr<LaneTimer> LaneTimerFor(uint32_t lane) {
    return core().LaneTimerFor(lane);
  }

  // --- admission and the lane workers (see Session's lifecycle) ---
  // Waits (flush-aware) until the in-flight limit and a lane's queue allow one
  // more item, then picks the lane and records the item. `pts_ns` (or kNoTime)
  // identifies the item on its lane if the branch loses the sequence number.
  // `origin_gpu`: the GPU whose memory the item is in (-1: host memory, or
  // not known); kAdaptive then counts each lane's learned time to copy it
  // to that lane's GPU (CountGpuFrame teaches it).
  //
  // `stream`: the input stream it belongs to (AddStream; kMainStream for a
  // fan-out with one input). Streams share the lanes fairly: while several
  // wait, the next item to be admitted is the one of the stream with the
  // least weighted service so far (start-time fair queueing over
  // AddStream's weights); a stream that was idle starts level with the
  // others, so its items are not queued behind another stream's backlog.
  // A stream of weight 0 is a background stream: admitted only while no
  // stream of weight above 0 that could go waits.
  // `max_wait_ns` >= 0: gives up (kTimedOut) after waiting that long (with
  // an injected clock, when an event finds it has passed).
  Dispatch DispatchItem(int64_t pts_ns, int origin_gpu = -1,
                        uint32_t stream = kMainStream,
                        int64_t max_wait_ns = -1) {
    return core().DispatchItem(pts_ns, origin_gpu, stream, max_wait_ns);
  }
  // The lane worker takes the item out of its queue and starts pushing it.
  // False when the item is no longer awaited or tracked (its lane stalled and
  // it was given up, or a flush forgot it): the worker drops it unpushed.
  // `woken`: the item went into the empty queue of a worker that was asleep
  // waiting for it; its dispatch-to-start time is then a sample of the
  // lane's wake-up (LaneStats::wake_ns, used by kAdaptive).
  bool MarkStarted(uint32_t lane, uint64_t seq, bool woken = false) {
    return core().MarkStarted(lane, seq, woken);
  }
  // Item `seq`, dispatched to `lane`, never reached the lane's queue (the
  // lane stopped or stalled before it could take it): it is dropped and
  // leaves the lane's queued count.
  void WithdrawItem(uint32_t lane, uint64_t seq) {
    core().WithdrawItem(lane, seq);
  }
  // The push into the branch returned. Completes unawaited items. True when
  // the worker should push a marker behind the item (ProveLane): it is
  // awaited and has not come back yet, or the lane is stalled and a marker
  // that comes back shows it alive again.
  bool OnPushed(uint32_t lane, uint64_t seq, PushOutcome outcome) {
    return core().OnPushed(lane, seq, outcome);
  }
  // OnPushed(lane, pushed_seq, outcome) and then MarkStarted(lane, seq) under
  // one lock: a worker that finds its next item queued reports its last push
  // as it starts the next one; returns MarkStarted's answer. *marker is
  // OnPushed's: then the next item is not started (false is returned), the
  // worker pushes the marker behind the pushed item and calls MarkStarted.
  bool MarkStartedAfterPush(uint32_t lane, uint64_t pushed_seq,
                            PushOutcome outcome, uint64_t seq, bool *marker) {
    return core().MarkStartedAfterPush(lane, pushed_seq, outcome, seq, marker);
  }
  // Called each time a lane stalls, without the Session's lock, from the
  // thread whose call found the stall (TakeReady and the *AndTakeReady
  // calls): the fan-out's idle lane worker has no other way to learn that it
  // should start sending liveness markers. Setting another listener (or
  // none) waits for a call in progress; the old one is not called after.
  // The listener must not call back into the Session's stalling calls.
  void SetStallListener(std::function<void(uint32_t lane)> listener) {
    core().SetStallListener(std::move(listener));
  }
  // Called, as the stall listener and from the same calls, once the input
  // ended and every item has left the window (AccountedForSinceNs is set):
  // a lane that holds its EOS back for replay may let it go.
  void SetDrainListener(std::function<void()> listener) {
    core().SetDrainListener(std::move(listener));
  }
  // The fan-out's input ended (EOS went into every lane): once every item
  // is accounted for, the fan-in need not wait longer than stall-timeout for
  // the lanes' own EOS (AccountedForSinceNs).
  void EndInput() { core().EndInput(); }
  // A new stream after EndInput (its lanes get a stream-start again): the
  // input goes on, and the fan-in waits for the lanes' next EOS.
  void RestartInput() { core().RestartInput(); }
  // Serialized events: the fan-out records where in the item sequence an event
  // (identified by its seqnum) happened, the fan-in places it there.
  uint64_t MarkEventPosition(uint32_t event_key) {
    return core().MarkEventPosition(event_key);
  }
  // The seq the next dispatched item gets: a lane that starts now has
  // passed every event placed before it.
  uint64_t NextSeq() const { return core().NextSeq(); }
  // While flushing, DispatchItem returns kFlushing and waiters wake up.
  void SetFlushing(bool flushing) { core().SetFlushing(flushing); }
  // Forgets every item in flight and in the window (after a flush). Learned
  // service times and counters are kept; sequence numbers keep increasing.
  void Reset() { core().Reset(); }
  // Writes a trace of the session to `path` from now on (trace-event JSON,
  // see TraceWriter) until StopTrace or the next StartTrace. False with
  // *error set when the file cannot be made.
  bool StartTrace(const std::string& path, std::string *error) {
    return core().StartTrace(path, error);
  }
  void StopTrace() { core().StopTrace(); }

  // --- a stalled lane's deadlines (on the Session's clock) ---
  // stall-timeout is the fan-in's setting: the fan-out asks when something
  // is due, and never reads it.
  //
  // The idle worker of a lane the fan-out holds stalled (the stall
  // listener told it), each time it wakes. The first marker is due
  // stall-timeout after the stall (each new one), each next one
  // stall-timeout after the check that found the last one due, never
  // before: kWait until *due_ns;
  // kSend a marker now (a claimed lane; an unclaimed one only waits again);
  // kAnswered once a check at the due time finds that the lane answered
  // meanwhile (the fan-out stops holding it stalled).
  LivenessMarker CheckLivenessMarker(uint32_t lane, int64_t *due_ns) {
    return core().CheckLivenessMarker(lane, due_ns);
  }
  // A chunk's first buffer that waits for room on its stalled lane, which
  // the Session picked as the last resort (Dispatch::last_resort), asks for
  // another lane again at this time: stall-timeout from now.
  int64_t LastResortRetryDueNs() const { return core().LastResortRetryDueNs(); }
  // Waits on the caller's `cv` (its `lock` held) until notified or until
  // `due_ns` on the Session's clock; kTimeout once that time came. With an
  // injected clock only a notification ends the wait. Takes no Session lock.
  std::cv_status WaitUntilDue(CondVar& cv, std::unique_lock<Mutex>& lock,
                              int64_t due_ns) const {
    return core().WaitUntilDue(cv, lock, due_ns);
  }

  // --- input streams: one fan-out over several inputs ---
  // Streams share the lanes; each stream's items leave the window in that
  // stream's order, held back by no other stream (ReorderWindow). Ids are
  // the caller's (a fan-out's sink_%u index + 1); kMainStream is not one.
  // DispatchItem adds a stream it does not know, with weight 1.
  void AddStream(uint32_t stream, double weight = 1.0) {
    core().AddStream(stream, weight);
  }
  // Forgets the stream's share and statistics; its items in flight still
  // leave the window in their order.
  void RemoveStream(uint32_t stream) { core().RemoveStream(stream); }
  void SetStreamWeight(uint32_t stream, double weight) {
    core().SetStreamWeight(stream, weight);
  }
  // At most `limit` of the stream's items in flight (0: no bound of its own).
  void SetStreamMaxInFlight(uint32_t stream, uint32_t limit) {
    core().SetStreamMaxInFlight(stream, limit);
  }
  // `payload` (an event of the stream) leaves after every item of the
  // stream dispatched so far, before any later one.
  void AttachStreamEvent(uint32_t stream, PayloadPtr payload) {
    core().AttachStreamEvent(stream, std::move(payload));
  }
  // A flush of one stream: while it lasts, DispatchItem for it returns
  // kFlushing (a waiting one wakes); its end forgets the stream's items in
  // the window (their slots leave empty: counted, not waited for). The
  // flush listener is told both, after unlocking, unless `tell_listener`
  // is false (the stream's pad is being (de)activated: no flush to pass on).
  void FlushStream(uint32_t stream, bool start, bool tell_listener = true) {
    core().FlushStream(stream, start, tell_listener);
  }
  // The fan-out dropped one of the stream's frames before dispatch (leaky).
  void CountLeakyDrop(uint32_t stream) { core().CountLeakyDrop(stream); }

  // --- chunk mode: one item stands for a run of frames ---
  // Item `seq` of `lane` made progress (its lane took a frame of it, or
  // returned an output): if it heads the window, its stall clock starts
  // again. A chunk is given up after stall-timeout without progress, not
  // stall-timeout after it became the head.
  void NoteProgress(uint32_t lane, uint64_t seq) {
    core().NoteProgress(lane, seq);
  }
  // Progress as NoteProgress, by one more frame that went to its lane: the
  // chunk stands for that many frames (what SetLaneFailed counts lost).
  void NoteChunkFrame(uint32_t lane, uint64_t seq) {
    core().NoteChunkFrame(lane, seq);
  }
  // Chunk mode with several input streams (items of a stream other than
  // kMainStream): a chunk's dispatch makes its lane *filling* (no room for
  // another chunk) until its chain function closed it or gave it up here
  // (or WithdrawItem, a move or Reset). A chunk moved off its lane before it
  // began (MoveUnstarted) fills its new lane. A lane filled by another seq
  // is left as it is.
  void EndChunkFill(uint32_t lane, uint64_t seq) {
    core().EndChunkFill(lane, seq);
  }
  // The item stood for `units` units of work (frames) where `nominal` is
  // the usual: its service time is learned as if it had been nominal, so
  // that the policies weigh a long chunk as long. `nominal` is gpufanout's
  // chunk-frames, handed down with each chunk: the Session keeps no copy
  // that another element could read.
  void SetItemUnits(uint32_t lane, uint64_t seq, uint32_t units,
                    uint32_t nominal) {
    core().SetItemUnits(lane, seq, units, nominal);
  }
  // Blocks until item `seq` of `lane` is settled (it came back, was proven
  // dropped, given up or forgotten), the session flushes, or the lane is
  // removed or ineligible (SetLaneEligible). True when it was settled.
  bool WaitSettled(uint32_t lane, uint64_t seq) {
    return core().WaitSettled(lane, seq);
  }
  // The lane worker, once chunk `seq` settled: whether EndChunkByBranch
  // ended it (its branch failed).
  bool ChunkEndedByBranch(uint32_t lane, uint64_t seq) const {
    return core().ChunkEndedByBranch(lane, seq);
  }

  // --- replay: a failed lane's items go to other lanes ---
  // Nothing a failed lane returns is accepted (kLate): its items' copies
  // come from the lanes they were sent to again. A lane keeps its FIFO
  // proof (an arrival or a marker proves the items pushed before it
  // dropped) for the items dispatched to it; a replayed item is queued
  // ahead of them (the window waits for it), so only its own arrival, the
  // marker right behind it (which proves nothing else), its lane's end or
  // the stall timeout settle it.
  //
  // Takes `lane` out of the stream (as SetLaneFailed(lane, true)) and hands
  // over what it held: each awaited item it has not returned stays pending
  // in the window and is returned, oldest first, for the fan-out to send
  // again (Redispatch or GiveUpReplay, each exactly once). Items nobody
  // awaits are dropped. The item inside the lane's push, if it had been
  // sent again already, failed two lanes: it is given up (counted failed),
  // so that one bad frame cannot take every lane out. A pending head among
  // them gets a fresh stall timeout.
  std::vector<ReplayItem> FailLaneForReplay(uint32_t lane) {
    return core().FailLaneForReplay(lane);
  }
  // Sends pending item `seq`, which `from_lane` holds (the failed lane, or
  // the lane a previous Redispatch of it chose and that could not queue
  // it), again: picks, among `allowed` lanes that take items, the one
  // expected to finish it soonest (its outstanding items times its learned
  // service time), records it there past the lane's queue bound, and moves
  // its window slot to it. kNoLanes: no allowed lane takes items; kGone: it
  // is no longer awaited, or no longer `from_lane`'s (another thread sent
  // it on).
  Dispatch Redispatch(uint64_t seq, uint32_t from_lane, int64_t pts_ns,
                      const std::vector<uint32_t>& allowed) {
    return core().Redispatch(seq, from_lane, pts_ns, allowed);
  }
  // The fan-out cannot send item `seq` again (no lane left, or it no longer
  // holds the frame): the item is dropped, counted on `lane` (the lane that
  // failed).
  void GiveUpReplay(uint32_t lane, uint64_t seq) {
    core().GiveUpReplay(lane, seq);
  }
  // Moves pending item `seq`, which stalled lane `from_lane` holds and has
  // not started (MarkStarted), to the `allowed` lane expected to finish it
  // soonest, as Redispatch does (queued out of its new lane's order; counted
  // handed over and replayed). kGone: it started, arrived, was given up, or
  // is not `from_lane`'s; kNoLanes: no allowed lane takes items.
  Dispatch MoveUnstarted(uint64_t seq, uint32_t from_lane,
                         const std::vector<uint32_t>& allowed) {
    return core().MoveUnstarted(seq, from_lane, allowed);
  }
  // Every item below this seq has left the window (the fan-out may forget
  // what it kept to replay them).
  uint64_t ReleasedThrough() const { return core().ReleasedThrough(); }
  // Every item of input stream `stream` below this seq has left the window
  // (ReleasedThrough() or later: with several streams, a stream's items
  // leave while another stream's earlier item is pending).
  uint64_t StreamReleasedThrough(uint32_t stream) const {
    return core().StreamReleasedThrough(stream);
  }
  // Called, as the stall listener and from the same calls, with
  // ReleasedThrough() after items left the window. Costs the output nothing
  // while none is set.
  void SetReleaseListener(std::function<void(uint64_t)> listener) {
    core().SetReleaseListener(std::move(listener));
  }

 private:
  const std::shared_ptr<FanInPort> fanin_;
};

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// A Session ties one fan-out to its fan-in: it numbers items, picks their lane
// (Scheduler), tracks what is in flight where, learns service times from
// completions, and releases items in input order (ReorderWindow).
//
// Thread-safety: every public method is thread-safe (one internal mutex).
// Stats() reads the lanes' host pools (LaneInfo) under it: lock order
// Session, then HostPool.
// The blocking methods return early on SetFlushing(true): DispatchItem
// (kFlushing, also while flushing), WaitSettled, and WaitOutput, which also
// returns on SetFlushing(false). Callers must not hold a lock of their own that
// another Session caller may need while they block here. Payloads the session
// gives up (late arrivals, Reset) are destroyed under its lock: a Payload
// destructor must not call back into the Session.
//
// Lifecycle of an item (`Dispatch` is the struct DispatchItem returns):
//
//   who                call                result
//   fan-out sink pad   DispatchItem()      a seq and a lane; the item waits
//                                          in that lane's queue
//   lane worker        MarkStarted()       it left the queue; the worker
//                                          pushes it into the branch
//   lane worker        OnPushed()          the push returned; an item no
//                                          fan-in waits for completes here
//                                          (or MarkStartedAfterPush(), with
//                                          the next item's MarkStarted)
//   fan-in sink pad    Arrive()            it came out of the branch: it
//                                          completes and waits in the window
//   fan-in output      TakeReady()         it leaves, in input order
//
// ArriveAndTakeReady() does the last two under one lock. An item that never
// arrives leaves the window empty-handed: dropped (or failed) when its push
// did not deliver it (OnPushed); dropped when a later item of its lane
// arrives, or when its lane ends (LaneEnded), is unclaimed or removed; timed
// out when it has headed the window for the stall timeout.
//
// A lane is *claimed* once a fan-in has paired with it (ClaimLane); only items
// dispatched to a claimed lane are awaited by the reorder window.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpufan/clock.h"
#include "gpufan/device.h"
#include "gpufan/lane-time.h"
#include "gpufan/mutex.h"
#include "gpufan/payload.h"
#include "gpufan/prelude.h"
#include "gpufan/reorder-window.h"
#include "gpufan/scheduler.h"
#include "gpufan/service-time.h"
#include "gpufan/stats.h"

namespace gpufan {

constexpr int64_t kNoTime = -1;

struct SessionConfig {
  Policy policy = Policy::kAdaptive;
  uint32_t lane_queue_size =
      4;  // items queued per lane before it counts as full
  // (a lane of microseconds queues more: Scheduler::LaneQueueLimit)
  // 0: automatic, the sum over lanes of (the deepest queue limit the lane has
  // had + 2), which is lanes * (lane_queue_size + 2) for lanes of
  // milliseconds; with kAdaptive, plus, for
  // lanes of different speeds, the items the faster lanes complete while the
  // slowest works on one (at most as much again; it grows as the speeds are
  // learned and shrinks only when a lane is removed). When the limit is reached
  // while the window waits for a head whose lane is idle (its branch may have
  // dropped it), that lane still gets items, up to lane_queue_size + 1
  // outstanding and as many in flight beyond the limit: only a later item on
  // a FIFO lane proves the drop.
  uint32_t max_in_flight = 0;
  int64_t stall_timeout_ns =
      2'000'000'000;  // fan-in's bounded wait for a head item
  // on-stall=replay: a lane whose head waited stall-timeout fails (its items
  // are sent again, see FailLaneForReplay) instead of losing that item.
  bool stall_fails_lane = false;
  // Chunk mode: an item is a chunk of the frames NoteChunkFrame counts
  // (SetLaneFailed counts those lost). The fan-out moves a stalled lane's
  // items that have not started to other lanes (MoveUnstarted): such an
  // item is not given up as soon as it heads the window (a stalled lane's
  // items otherwise are: they wait behind the one given up), but waits
  // stall-timeout like any head.
  bool chunks = false;
};

// An item a failed lane held, to be sent again (FailLaneForReplay).
struct ReplayItem {
  uint64_t seq = 0;
  int64_t pts_ns = kNoTime;
};

enum class DispatchStatus {
  kOk,
  kFlushing,  // SetFlushing(true) while waiting
  kNoLanes,   // no eligible lane
  kGone,      // Redispatch: the item is no longer awaited (it arrived or was
              // given up meanwhile)
  kTimedOut,  // DispatchItem's max_wait_ns passed first (the item is not
              // recorded)
};

struct Dispatch {
  DispatchStatus status = DispatchStatus::kNoLanes;
  uint32_t lane = kNoLane;
  uint64_t seq = 0;
  bool awaited = false;  // a fan-in waits for this item (the lane is claimed)
  // Some eligible lane is joining (a fan-in claimed other lanes, not this
  // one yet): the fan-out should probe its branch again.
  bool lanes_joining = false;
  // The lane was stalled when it was picked: no other lane could take the
  // item (a stalled lane is the policies' last resort).
  bool last_resort = false;
  // Its place among the items dispatched to `lane` since the lane was added
  // or the session Reset (0, 1, 2...): several threads that dispatch (one
  // per input stream) must hand their items to the lane in this order, or
  // the lane would not be FIFO by seq.
  uint64_t lane_order = 0;
};

enum class PushOutcome {
  kDelivered,  // the branch took it
  kDropped,    // flushing / not linked: not delivered, not an error
  kFailed,     // the branch returned an error
};

enum class ArrivalStatus {
  kAccepted,   // stored in the window (or matched an unawaited item)
  kLate,       // its slot had been given up: drop it
  kUnmatched,  // no outstanding item matches: it is attached to the next
               // release
};

struct Arrival {
  ArrivalStatus status = ArrivalStatus::kAccepted;
  uint64_t seq = 0;
};

struct ReadyBatch {
  std::vector<Released> items;  // in output order
  uint64_t generation = 0;      // pass to WaitOutput
  // AddedLatencyNs() grew past what was last reported (MarkLatencyReported):
  // the fan-in should tell the pipeline (once until the next report).
  bool latency_grew = false;
};

// The implementation is one file per concern: session.cpp (configuration,
// lanes, flushing, notifications), session-admission.cpp (fan-out side),
// session-lane-state.cpp (lane states, stalls, proofs), session-arrival.cpp
// (fan-in side), session-release.cpp (output in order) and session-stats.cpp.
class GPUFAN_API Session : public std::enable_shared_from_this<Session> {
 public:
  static std::shared_ptr<Session> Create(
      const SessionConfig& config = {}, std::shared_ptr<Clock> clock = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }  // unique in this process
  const Clock& clock() const { return *clock_; }

  // --- configuration ---
  void SetPolicy(Policy policy);
  Policy policy() const;
  void SetLaneQueueSize(uint32_t size);  // >= 1
  uint32_t lane_queue_size() const;
  void SetMaxInFlight(uint32_t limit);  // 0: automatic
  uint32_t max_in_flight() const;       // as set (0: automatic)
  uint32_t EffectiveMaxInFlight() const;
  void SetStallTimeout(int64_t ns);  // > 0
  int64_t stall_timeout_ns() const;

  // --- lanes (lane ids are the fan-out's src pad indices) ---
  void AddLane(uint32_t lane, const Device& device, double weight = 1.0);
  // Forgets the lane; its outstanding items are dropped.
  void RemoveLane(uint32_t lane);
  bool HasLane(uint32_t lane) const;
  void SetLaneWeight(uint32_t lane, double weight);
  // The device the lane runs on changed (placement happens after AddLane).
  void SetLaneDevice(uint32_t lane, const Device& device);
  // What the lane's statistics show of the fan-out's side of it (LaneStats::
  // worker_thread, host_pool...); kept until the lane is removed.
  void SetLaneInfo(uint32_t lane, LaneInfo info);
  // Only LaneInfo::worker_thread changes (the lane's thread started and was
  // bound, or not); the host pool stays.
  void SetLaneWorkerThread(uint32_t lane, std::string worker_thread);
  // The lane's worker copied a frame into its host pool (`copied`), or found
  // it had to and could not.
  void CountStaging(uint32_t lane, bool copied);
  // A frame in GPU memory reached `lane` by `path`, moving `bytes` in `ns`;
  // a copy's time is the lane's latest started item's, kept out of its
  // service time.
  void CountGpuFrame(uint32_t lane, GpuCopyPath path, uint64_t bytes = 0,
                     int64_t ns = 0);
  // The fan-in moved a frame in GPU memory to its output device by `path`.
  void CountOutputGpuFrame(GpuCopyPath path, uint64_t bytes = 0,
                           int64_t ns = 0);
  // Ineligible lanes get no new items (unlinked, failed, ended, flushing).
  void SetLaneEligible(uint32_t lane, bool eligible);
  // A fan-in waits for the lane's items from now on.
  void ClaimLane(uint32_t lane);
  bool IsLaneClaimed(uint32_t lane) const;
  // The fan-in let go of the lane (its pad was released, or the pipeline
  // stopped): its outstanding items count as dropped and later ones are not
  // awaited until the lane is claimed again.
  void UnclaimLane(uint32_t lane);
  // The lane is stalled: an item of it was the window's head for
  // stall-timeout without coming back (see LaneHealth::kStalled).
  bool IsLaneStalled(uint32_t lane) const;
  // Why no lane can take an item, for an error message; empty when the
  // reason is only that no lane is linked and active.
  std::string WhyNoLane() const;

  // --- fan-out side ---
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
  // `max_wait_ns` >= 0: gives up (kTimedOut) after waiting that long (with
  // an injected clock, when an event finds it has passed).
  Dispatch DispatchItem(int64_t pts_ns, int origin_gpu = -1,
                        uint32_t stream = kMainStream,
                        int64_t max_wait_ns = -1);
  // Like DispatchItem but never waits: std::nullopt when it would have to.
  std::optional<Dispatch> TryDispatchItem(int64_t pts_ns, int origin_gpu = -1);
  // The lane worker takes the item out of its queue and starts pushing it.
  // False when the item is no longer awaited or tracked (its lane stalled and
  // it was given up, or a flush forgot it): the worker drops it unpushed.
  // `woken`: the item went into the empty queue of a worker that was asleep
  // waiting for it; its dispatch-to-start time is then a sample of the
  // lane's wake-up (LaneStats::wake_ns, used by kAdaptive).
  bool MarkStarted(uint32_t lane, uint64_t seq, bool woken = false);
  // Item `seq`, dispatched to `lane`, never reached the lane's queue (the
  // lane stopped or stalled before it could take it): it is dropped and
  // leaves the lane's queued count.
  void WithdrawItem(uint32_t lane, uint64_t seq);
  // The push into the branch returned. Completes unawaited items. True when
  // the worker should push a marker behind the item (ProveLane): it is
  // awaited and has not come back yet, or the lane is stalled and a marker
  // that comes back shows it alive again.
  bool OnPushed(uint32_t lane, uint64_t seq, PushOutcome outcome);
  // OnPushed(lane, pushed_seq, outcome) and then MarkStarted(lane, seq) under
  // one lock: a worker that finds its next item queued reports its last push
  // as it starts the next one; returns MarkStarted's answer. *marker is
  // OnPushed's: then the next item is not started (false is returned), the
  // worker pushes the marker behind the pushed item and calls MarkStarted.
  bool MarkStartedAfterPush(uint32_t lane, uint64_t pushed_seq,
                            PushOutcome outcome, uint64_t seq, bool *marker);
  // Called each time a lane stalls, without the Session's lock, from the
  // thread whose call found the stall (TakeReady and the *AndTakeReady
  // calls): the fan-out's idle lane worker has no other way to learn that it
  // should start sending liveness markers. Setting another listener (or
  // none) waits for a call in progress; the old one is not called after.
  // The listener must not call back into the Session's stalling calls.
  void SetStallListener(std::function<void(uint32_t lane)> listener);
  // Called, as the stall listener and from the same calls, once the input
  // ended and every item has left the window (AccountedForSinceNs is set):
  // a lane that holds its EOS back for replay may let it go.
  void SetDrainListener(std::function<void()> listener);
  // The fan-out's input ended (EOS went into every lane): once every item
  // is accounted for, the fan-in need not wait longer than stall-timeout for
  // the lanes' own EOS (AccountedForSinceNs).
  void EndInput();
  bool input_ended() const;
  // Serialized events: the fan-out records where in the item sequence an event
  // (identified by its seqnum) happened, the fan-in places it there.
  uint64_t MarkEventPosition(uint32_t event_key);
  std::optional<uint64_t> EventPosition(uint32_t event_key) const;

  // --- input streams: one fan-out over several inputs ---
  // Streams share the lanes; each stream's items leave the window in that
  // stream's order, held back by no other stream (ReorderWindow). Ids are
  // the caller's (a fan-out's sink_%u index + 1); kMainStream is not one.
  // DispatchItem adds a stream it does not know, with weight 1.
  void AddStream(uint32_t stream, double weight = 1.0);
  // Forgets the stream's share and statistics; its items in flight still
  // leave the window in their order.
  void RemoveStream(uint32_t stream);
  void SetStreamWeight(uint32_t stream, double weight);  // > 0
  // At most `limit` of the stream's items in flight (0: no bound of its own).
  void SetStreamMaxInFlight(uint32_t stream, uint32_t limit);
  // `payload` (an event of the stream) leaves after every item of the
  // stream dispatched so far, before any later one.
  void AttachStreamEvent(uint32_t stream, PayloadPtr payload);
  // A flush of one stream: while it lasts, DispatchItem for it returns
  // kFlushing (a waiting one wakes); its end forgets the stream's items in
  // the window (their slots leave empty: counted, not waited for). The
  // flush listener is told both, after unlocking, unless `tell_listener`
  // is false (the stream's pad is being (de)activated: no flush to pass on).
  void FlushStream(uint32_t stream, bool start, bool tell_listener = true);
  // The fan-in's: pushes the flush on the stream's output. Setting another
  // (or none) waits for a call in progress.
  void SetStreamFlushListener(
      std::function<void(uint32_t stream, bool start)> listener);
  // The fan-out dropped one of the stream's frames before dispatch (leaky).
  void CountLeakyDrop(uint32_t stream);
  bool HasStreams() const;
  // The stream was added (AddStream, or a dispatch of it) and not removed.
  bool HasStream(uint32_t stream) const;

  // --- chunk mode: one item stands for a run of frames ---
  // Item `seq` of `lane` made progress (its lane took a frame of it, or
  // returned an output): if it heads the window, its stall clock starts
  // again. A chunk is given up after stall-timeout without progress, not
  // stall-timeout after it became the head.
  void NoteProgress(uint32_t lane, uint64_t seq);
  // Progress as NoteProgress, by one more frame that went to its lane: the
  // chunk stands for that many frames (what SetLaneFailed counts lost).
  void NoteChunkFrame(uint32_t lane, uint64_t seq);
  // The item stood for `units` units of work (frames) where `nominal` is
  // the usual: its service time is learned as if it had been nominal, so
  // that the policies weigh a long chunk as long.
  void SetItemUnits(uint32_t lane, uint64_t seq, uint32_t units,
                    uint32_t nominal);
  // Blocks until item `seq` of `lane` is settled (it came back, was proven
  // dropped, given up or forgotten), the session flushes, or the lane is
  // removed or ineligible (SetLaneEligible). True when it was settled.
  bool WaitSettled(uint32_t lane, uint64_t seq);
  // The fan-in: chunk `seq` of `lane` ended without its drain, at an EOS
  // the branch made itself (a queue does so after an error downstream of
  // it): the chunk is given up, counted failed, and settled.
  void EndChunkByBranch(uint32_t lane, uint64_t seq);
  // The lane worker, once chunk `seq` settled: whether EndChunkByBranch
  // ended it (its branch failed).
  bool ChunkEndedByBranch(uint32_t lane, uint64_t seq) const;

  // --- fan-in side ---
  // An item came out of lane `lane`'s branch. With `seq` known (the meta
  // survived) it is matched directly; otherwise by `pts_ns` among the lane's
  // outstanding items, else the lane's oldest (each lane is FIFO). Earlier
  // outstanding items of the same lane are declared dropped.
  // `wake_output` false: the caller takes what may leave (TakeReady) itself,
  // so WaitOutput is not woken (the generation does not move) for this
  // arrival; a matched item still wakes DispatchItem.
  Arrival Arrive(uint32_t lane, std::optional<uint64_t> seq, int64_t pts_ns,
                 PayloadPtr payload, bool wake_output = true);
  // Arrive(..., false) and TakeReady() under one lock, for a caller that
  // pushes the output itself.
  ReadyBatch ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                                int64_t pts_ns, PayloadPtr payload,
                                Arrival *arrival);
  // The same into `*batch`, whose items are replaced (destroyed first,
  // outside the lock): a caller that keeps one batch reuses its storage. So
  // do the other *TakeReady(ReadyBatch *) overloads.
  void ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                          int64_t pts_ns, PayloadPtr payload, Arrival *arrival,
                          ReadyBatch *batch);
  // A marker the lane worker pushed behind item `seq` came out of the
  // lane's branch: every item of the lane up to `seq` that has not come back
  // never will (the branch keeps serialized events in order with buffers).
  // Shows the lane alive (a stalled lane is scheduled again).
  void ProveLane(uint32_t lane, uint64_t seq);
  // ProveLane() and TakeReady() under one lock (see ArriveAndTakeReady).
  ReadyBatch ProveLaneAndTakeReady(uint32_t lane, uint64_t seq);
  void ProveLaneAndTakeReady(uint32_t lane, uint64_t seq, ReadyBatch *batch);
  // Attaches a payload (an event) to leave right before item `seq`.
  void AttachBefore(uint64_t seq, PayloadPtr payload);
  // The lane ended (EOS): its outstanding items are gone.
  void LaneEnded(uint32_t lane);
  // Chunk mode: the fan-in got the flush that reset the lane's branch after
  // a chunk; the fan-out counts them to see whether its reset got through
  // (a branch element that drops flushes leaves the pads behind it at EOS).
  void NoteLaneReset(uint32_t lane);
  uint64_t LaneResets(uint32_t lane) const;
  // The fan-out took the lane out of the stream because its branch failed
  // (true), or starts it again (false). A failed lane's outstanding items are
  // given up at once; it gets no items (LaneHealth::kFailed) and a fan-in
  // stops waiting for its EOS. A flush (Reset) keeps it failed. Returns the
  // frames given up that a fan-in awaited (a chunk counts its frames less
  // the outputs that left already, as if the branch made one per frame).
  uint64_t SetLaneFailed(uint32_t lane, bool failed);
  bool IsLaneFailed(uint32_t lane) const;
  // The fan-in's output failed (downstream returned a fatal flow): the
  // lanes' pushes will return that error too, and it is not theirs.
  void NoteOutputFailed();
  bool output_failed() const;

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
  std::vector<ReplayItem> FailLaneForReplay(uint32_t lane);
  // Sends pending item `seq`, which `from_lane` holds (the failed lane, or
  // the lane a previous Redispatch of it chose and that could not queue
  // it), again: picks, among `allowed` lanes that take items, the one
  // expected to finish it soonest (its outstanding items times its learned
  // service time), records it there past the lane's queue bound, and moves
  // its window slot to it. kNoLanes: no allowed lane takes items; kGone: it
  // is no longer awaited, or no longer `from_lane`'s (another thread sent
  // it on).
  Dispatch Redispatch(uint64_t seq, uint32_t from_lane, int64_t pts_ns,
                      const std::vector<uint32_t>& allowed);
  // The fan-out cannot send item `seq` again (no lane left, or it no longer
  // holds the frame): the item is dropped, counted on `lane` (the lane that
  // failed).
  void GiveUpReplay(uint32_t lane, uint64_t seq);
  void SetStallFailsLane(bool fails);
  bool stall_fails_lane() const;
  // Moves pending item `seq`, which stalled lane `from_lane` holds and has
  // not started (MarkStarted), to the `allowed` lane expected to finish it
  // soonest, as Redispatch does (queued out of its new lane's order; counted
  // handed over and replayed). kGone: it started, arrived, was given up, or
  // is not `from_lane`'s; kNoLanes: no allowed lane takes items.
  Dispatch MoveUnstarted(uint64_t seq, uint32_t from_lane,
                         const std::vector<uint32_t>& allowed);
  void SetChunkMode(bool chunks);  // SessionConfig::chunks
  // Every item below this seq has left the window (the fan-out may forget
  // what it kept to replay them).
  uint64_t ReleasedThrough() const;
  // Called, as the stall listener and from the same calls, with
  // ReleasedThrough() after items left the window. Costs the output nothing
  // while none is set.
  void SetReleaseListener(std::function<void(uint64_t)> listener);
  // The seq the next dispatched item gets: a lane that starts now has
  // passed every event placed before it.
  uint64_t NextSeq() const;

  // Releases what may leave now, in order, applying the stall timeout to a
  // pending head. Never blocks.
  ReadyBatch TakeReady();
  // The same into a batch the caller keeps (its vector's capacity is reused).
  void TakeReady(ReadyBatch *batch);
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
  void WaitOutput(uint64_t generation);
  void WaitOutput(uint64_t generation, int64_t max_wait_ns);
  void WakeOutput();
  // True when nothing awaited is in the window.
  bool WindowEmpty() const;
  // The window's head while it is pending (nothing before it is left to
  // release but what is attached to it): chunk mode sends a head chunk's
  // output as it comes.
  std::optional<uint64_t> PendingHeadSeq() const;
  // Chunk mode: an output of item `seq` came back from `lane`. Counts as
  // progress (NoteProgress) and says where the item stands.
  enum class ChunkState {
    kHead,     // it heads the window: its output may leave now
    kWaiting,  // it waits for earlier items
    kGone,     // given up or forgotten: its output is late
  };
  ChunkState ChunkOutput(uint32_t lane, uint64_t seq);
  // The fan-in sends `outputs` outputs of head chunk `seq` downstream
  // before the chunk ended (what SetLaneFailed does not count lost). False,
  // and they are late, when the item is no longer pending on `lane`.
  bool NoteChunkStreamed(uint32_t lane, uint64_t seq, size_t outputs);
  // True while item `seq` has its slot in the window.
  bool IsOpen(uint64_t seq) const;
  // Since when every item is accounted for (delivered, proven dropped or
  // given up) after the input ended; kNoTime while that is not so.
  int64_t AccountedForSinceNs() const;
  // What ordering adds to the pipeline's latency: the longest time an item
  // recently spent between its dispatch and its arrival at the fan-in (an
  // item leaves at the latest when every earlier one arrived, and earlier
  // ones were dispatched earlier). At most stall-timeout. 0 before anything
  // came back.
  int64_t AddedLatencyNs() const;
  // The fan-in answered a latency query with `ns`.
  void MarkLatencyReported(int64_t ns);
  // True while something that came back on `lane` waits in the window (a
  // serialized query on that lane must not overtake it).
  bool HoldsArrivedFrom(uint32_t lane) const;

  // --- flushing ---
  // While flushing, DispatchItem returns kFlushing and waiters wake up.
  void SetFlushing(bool flushing);
  bool flushing() const;
  // Forgets every item in flight and in the window (after a flush). Learned
  // service times and counters are kept; sequence numbers keep increasing.
  void Reset();

  SessionStats Stats() const;

  // --- where the lanes' time goes (gpufan/lane-time.h) ---
  // The timer of `lane`, made with the lane (AddLane) and kept by it: the
  // threads that time the lane take it once. For a lane the Session does
  // not know, a timer of its own that nothing reads.
  std::shared_ptr<LaneTimer> LaneTimerFor(uint32_t lane);
  // Writes a trace of the session to `path` from now on (trace-event JSON,
  // see TraceWriter) until StopTrace or the next StartTrace. False with
  // *error set when the file cannot be made.
  bool StartTrace(const std::string &path, std::string *error);
  void StopTrace();

 private:
  struct Outstanding {
    uint64_t seq = 0;
    int64_t pts_ns = kNoTime;
    int64_t dispatched_ns = 0;
    int64_t started_ns = kNoTime;
    bool awaited = false;
    // Its service time counts this much (SetItemUnits).
    double work_scale = 1.0;
    // Chunk mode: the frames that went to its lane (NoteChunkFrame), and
    // its outputs that left before it ended (NoteChunkStreamed).
    uint32_t frames = 0;
    uint32_t outputs = 0;
    // Time its lane spent copying it to the lane's GPU (CountGpuFrame): not
    // service time, since adaptive counts it apart (LaneLoad::transfer_ns,
    // queued_transfer_ns).
    int64_t copy_ns = 0;
    // It is in another GPU's memory than its lane's: it will be copied.
    bool needs_copy = false;
    // Sent again after its first lane failed (Redispatch): it sits in the
    // FIFO by seq, but was queued ahead of the lane's own items.
    bool replayed = false;
    uint32_t stream = kMainStream;
  };
  // An input stream (AddStream).
  struct Stream {
    double weight = 1.0;
    // Start-time fair queueing: the stream's virtual time (1 / weight per
    // admitted item); one that starts waiting after being idle is raised to
    // virtual_now_, so idleness earns no burst.
    double vtime = 0.0;
    uint32_t waiting = 0;  // threads in DispatchItem for it
    uint32_t in_flight = 0;
    uint32_t max_in_flight = 0;
    bool flushing = false;
    // RemoveStream came while a thread waited for it: the last one to leave
    // DispatchItem forgets it.
    bool removed = false;
    int64_t first_dispatch_ns = kNoTime;
    StreamStats counters;  // the counting fields only
  };
  struct Lane {
    Device device;
    double weight = 1.0;
    bool eligible = true;
    bool claimed = false;
    // The worker is inside the push of item `pushing_seq`.
    bool in_push = false;
    uint64_t pushing_seq = 0;
    // Stalled (LaneHealth::kStalled): why and since when.
    // NoteLaneReset's count
    uint64_t resets = 0;
    bool stalled = false;
    // Taken out of the stream by the fan-out (SetLaneFailed).
    bool failed = false;
    // Chunk mode: the latest chunk its branch ended without the drain
    // (EndChunkByBranch); seqs are never reused.
    std::optional<uint64_t> ended_by_branch;
    StallKind stall_kind = StallKind::kNone;
    uint64_t stalled_seq = 0;
    int64_t stalled_ns = kNoTime;
    std::deque<Outstanding> outstanding;  // FIFO, oldest first: ascending seq
    // Replayed items a marker was asked for (OnPushed) that has not come
    // back: their marker proves only them (the fan-out queues a replayed
    // item ahead of the lane's own items). Bounded (kReplayMarkersKept).
    std::deque<uint64_t> replay_markers;
    // (pts, seq) of recent stall expiries: recognized without their meta.
    std::deque<std::pair<int64_t, uint64_t>> expired;
    uint32_t queued = 0;
    uint64_t next_order = 0;  // Dispatch::lane_order of the next item
    int64_t last_completion_ns = kNoTime;
    ServiceTimeEstimator service;
    // Dispatch to start of the items that woke the lane's sleeping worker.
    ServiceTimeEstimator wake;
    // Copies of items in another GPU's memory to the lane's GPU
    // (CountGpuFrame).
    ServiceTimeEstimator transfer;
    // The deepest queue limit the lane has had (Scheduler::LaneQueueLimit):
    // the automatic in-flight bound sums these, so that it never shrinks
    // while the lanes exist (see UpdateSpreadAllowanceUnlocked).
    uint32_t queue_limit_peak = 0;
    LaneStats counters;      // the counting fields only
    std::shared_ptr<LaneTimer> timer;  // LaneTimerFor; made by AddLane
    bool described = false;  // SetLaneInfo was called
    LaneInfo info;
  };

  Session(const SessionConfig& config, std::shared_ptr<Clock> clock);

  // Helpers that expect mutex_ held.
  Arrival ArriveUnlocked(uint32_t lane, std::optional<uint64_t> seq,
                         int64_t pts_ns, PayloadPtr payload, bool wake_output);
  // Appends to batch->items (empty: see StartBatch).
  void TakeReadyUnlocked(ReadyBatch *batch);
  // TakeReadyUnlocked, then unlocks and sends the admission notification
  // that defer_admit_notify_ held back.
  void TakeReadyAndUnlock(std::unique_lock<Mutex>& lock, ReadyBatch *batch);
  // Ends what defer_admit_notify_ began: unlocks, then sends the admission
  // notification it held back.
  void UnlockAndNotifyAdmit(std::unique_lock<Mutex>& lock);
  // Empties a caller's batch for reuse, keeping its storage; the payloads
  // left in it are destroyed here, before the caller locks.
  static void StartBatch(ReadyBatch *batch);
  std::optional<Dispatch> TryDispatchUnlocked(int64_t pts_ns, int origin_gpu,
                                              bool *no_lanes,
                                              uint32_t stream = kMainStream);
  // Whether `stream` may be admitted now: its own bound has room and no
  // other waiting stream is ahead of it in fair order. Always for
  // kMainStream.
  bool StreamMayDispatchUnlocked(uint32_t stream) const;
  Stream& StreamUnlocked(uint32_t stream);
  // The stream's share of an admission (RecordDispatchUnlocked).
  void CountStreamDispatchUnlocked(Outstanding& item, int64_t now_ns);
  // Item `released` of a stream left the window (counted once per item).
  void CountStreamReleaseUnlocked(const Released& released);
  void StreamStatsUnlocked(SessionStats *stats, int64_t now_ns) const;
  // An item in GPU `origin_gpu`'s memory (-1: host) must be copied to
  // `lane`'s GPU first.
  bool NeedsCopyUnlocked(const Lane& lane, int origin_gpu) const;
  std::optional<uint32_t> ProbeLaneUnlocked();
  // How long an admission wait may last before the adaptive policy's answer
  // can change without an event; std::nullopt: only an event can change it.
  std::optional<std::chrono::nanoseconds> AdaptiveRethinkUnlocked();
  // The earliest moment in (now, until] at which the policy, asked with the
  // loads of the last TryDispatchUnlocked, stops answering kWait; `until`
  // when it does not before.
  int64_t PolicyTurnsUnlocked(int64_t now, int64_t until);
  Dispatch RecordDispatchUnlocked(uint32_t lane, int64_t pts_ns, int64_t now_ns,
                                  uint32_t stream = kMainStream);
  // Which lanes the scheduler may pick now (LaneHealth, tiers: see .cpp).
  void SchedulableUnlocked(std::vector<bool> *schedulable, bool *joining);
  static LaneHealth StateOfUnlocked(const Lane& lane, bool any_claimed);
  bool AnyClaimedUnlocked() const;
  void ProveLaneUnlocked(uint32_t lane, uint64_t seq);
  void HeardFromUnlocked(Lane& lane);
  void StallLaneUnlocked(Lane& lane, uint64_t head_seq, int64_t now_ns);
  // Counts the stall and records how and on what item (StallKind); both a
  // stall and on-stall=replay's failure do.
  void RecordStallUnlocked(Lane& lane, uint64_t head_seq, int64_t now_ns);
  void RecordSojournUnlocked(int64_t ns);
  int64_t AddedLatencyUnlocked() const;
  void CheckLatencyUnlocked(ReadyBatch *batch);
  void UpdateAccountedUnlocked(int64_t now_ns);
  uint32_t EffectiveMaxInFlightUnlocked() const;
  bool OnPushedUnlocked(Lane& lane, uint64_t seq, PushOutcome outcome);
  // Returns whether the item is tracked.
  bool MarkStartedUnlocked(Lane& lane, uint64_t seq, bool woken);
  // Items @lane's queue holds (Scheduler::LaneQueueLimit).
  uint32_t LaneQueueLimitUnlocked(const Lane& lane) const;
  void UpdateSpreadAllowanceUnlocked();
  // NoteProgress's work; true when `seq` of `lane` heads the window.
  bool NoteProgressUnlocked(uint32_t lane, uint64_t seq);
  Lane *FindLaneUnlocked(uint32_t lane);
  void CompleteUnlocked(Lane& lane, const Outstanding& item, int64_t now_ns);
  void DecrementInFlightUnlocked(uint32_t stream = kMainStream);
  void DropOutstandingUnlocked(Lane& lane, const Outstanding& item,
                               bool failed);
  // Every outstanding item of `lane` is dropped; with `push_failed`, the one
  // inside the lane's push counts as failed instead.
  void DropAllOutstandingUnlocked(Lane& lane, bool push_failed = false);
  static std::deque<Outstanding>::iterator FindOutstandingUnlocked(
      Lane& lane, uint64_t seq);
  // Settles the first `count` items of lane.outstanding by FIFO order:
  // `taken` (the item that arrived) leaves, the others were pushed before it
  // and are dropped, except replayed ones (queued out of the lane's order):
  // only `proven` (the item a marker followed) is dropped of those.
  void SettleFrontUnlocked(Lane& lane, size_t count,
                           std::optional<uint64_t> proven,
                           std::optional<uint64_t> taken);
  // kNoLane when none of `allowed` takes items.
  uint32_t PickReplayLaneUnlocked(const std::vector<uint32_t>& allowed);
  // Records pending item `seq` on the allowed lane PickReplayLaneUnlocked
  // chooses, out of that lane's FIFO order, and moves its window slot there.
  Dispatch ReassignUnlocked(uint64_t seq, int64_t pts_ns,
                            const std::vector<uint32_t>& allowed);
  bool ExpireStalledHeadUnlocked(int64_t now_ns);
  void NotifyAllUnlocked();
  void NotifyAdmitUnlocked();
  // True (and from then on notified) if a waiter has to be woken: the caller
  // notifies admit_cv_, after unlocking.
  bool ClaimAdmitNotifyUnlocked();
  void NotifyOutputUnlocked();
  // An item may have been settled: wakes WaitSettled.
  void NotifySettledUnlocked() {
    if (settle_waiters_ > 0)
      settle_cv_.notify_all();
  }
  // When the pending head expires: stall-timeout after it became the head,
  // at once for a stalled lane's (unless it has not started and the
  // fan-out moves it: SessionConfig::chunks). Requires HeadPending().
  int64_t HeadDueUnlocked() const;
  // A head became pending: a waiting output that would sleep past its
  // deadline is woken (the generation moves).
  void AnnounceHeadUnlocked();
  void WaitOutputUnlocked(std::unique_lock<Mutex>& lock, uint64_t generation,
                          std::optional<int64_t> max_wait_ns);

  const uint64_t id_;
  const std::shared_ptr<Clock> clock_;
  // Open while tracing (StartTrace); the lanes' timers share it.
  const std::shared_ptr<TraceWriter> trace_ = std::make_shared<TraceWriter>();
  // Only a real-time clock's deadlines map onto real-time waits; an injected
  // clock moves by itself.
  const bool real_time_clock_;

  mutable Mutex mutex_;
  // Lanes stalled under mutex_, announced to the listener after unlocking;
  // listener_mutex_ is held while it runs (see SetStallListener).
  std::vector<uint32_t> stalls_to_announce_;
  Mutex listener_mutex_;
  std::function<void(uint32_t)> stall_listener_;
  std::function<void()> drain_listener_;
  std::function<void(uint64_t)> release_listener_;
  // Called without listener_mutex_ (it takes the fan-in's output lock,
  // which a thread in Announce may hold); calls in progress are counted so
  // that SetStreamFlushListener can wait for them.
  std::function<void(uint32_t, bool)> stream_flush_listener_;
  uint32_t stream_flush_calls_ = 0;  // under listener_mutex_
  CondVar stream_flush_cv_;
  std::atomic<bool> release_listener_set_{false};  // read without the lock
  bool drain_to_announce_ = false;                 // see SetDrainListener
  // After unlocking: the stalled lanes, the drain, and (when items left)
  // how far the window released.
  void Announce(std::vector<uint32_t> lanes, bool drained,
                std::optional<uint64_t> released_through);
  CondVar admit_cv_;   // fan-out waits for room
  CondVar output_cv_;  // fan-in waits for releasable items
  CondVar settle_cv_;  // a lane worker waits for its item (WaitSettled)
  uint32_t settle_waiters_ = 0;
  // Threads waiting on each, and whether they were notified since they last
  // woke (see NotifyAdmitUnlocked).
  uint32_t admit_waiters_ = 0;
  uint32_t output_waiters_ = 0;
  // The earliest stall deadline of a head pending while the output waited
  // (kNoTime: none). The output's waits end there even if that head left
  // meanwhile: announcing each head's departure would cost a wake-up per
  // item, and a later head expires no earlier unless its lane is stalled
  // (AnnounceHeadUnlocked wakes the output for that one). A TakeReady at or
  // after it clears it.
  int64_t output_due_ns_ = kNoTime;
  bool admit_notified_ = false;
  bool output_notified_ = false;
  // While set, NotifyAdmitUnlocked leaves the notification to the caller
  // (admit_notify_deferred_), who sends it after unlocking.
  bool defer_admit_notify_ = false;
  bool admit_notify_deferred_ = false;
  SessionConfig config_;
  Scheduler scheduler_;
  // A copy of scheduler_ asked "what if it were later" (PolicyTurnsUnlocked),
  // so that the real one's cursors do not move; and whether the last
  // TryDispatchUnlocked waited on the policy's answer (loads_, choice_room_).
  Scheduler what_if_scheduler_;
  bool waited_on_policy_ = false;
  uint32_t choice_room_ = 0;
  std::vector<LaneLoad> loads_;  // reused by every dispatch
  std::vector<int> lane_ranks_;  // reused by SchedulableUnlocked
  std::vector<bool> schedulable_;
  std::map<uint32_t, Lane> lanes_;
  std::map<uint32_t, Stream> streams_;
  double virtual_now_ = 0.0;  // the start tag of the last admitted item
  // Items of a stream dispatched to a lane no fan-in had claimed, by seq
  // (bounded): when one comes back, its stream places it in the window.
  std::deque<std::pair<uint64_t, uint32_t>> unawaited_streams_;
  ReorderWindow window_;
  uint64_t next_seq_ = 0;
  uint32_t in_flight_ = 0;
  // Added to the automatic in-flight limit for lanes of different speeds
  // (UpdateSpreadAllowanceUnlocked), at most the limit's base.
  uint32_t spread_allowance_ = 0;
  uint64_t generation_ = 0;
  bool flushing_ = false;
  bool input_ended_ = false;
  bool output_failed_ = false;            // NoteOutputFailed; cleared by Reset
  int64_t accounted_since_ns_ = kNoTime;  // see AccountedForSinceNs
  // Dispatch-to-arrival times (AddedLatencyNs): the largest of the current
  // and of the previous run of kSojournRun arrivals.
  int64_t sojourn_max_ = 0;
  int64_t sojourn_max_prev_ = 0;
  uint32_t sojourn_count_ = 0;
  int64_t latency_reported_ns_ = 0;
  bool latency_announced_ = false;
  int64_t first_dispatch_ns_ = kNoTime;
  uint64_t dispatched_ = 0;
  uint64_t released_ = 0;
  uint64_t unmatched_ = 0;
  GpuFrameCounts output_gpu_;  // CountOutputGpuFrame
  std::deque<std::pair<uint32_t, uint64_t>> event_positions_;  // bounded
};

}  // namespace gpufan

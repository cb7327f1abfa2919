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
#include <condition_variable>
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
#include "gpufan/session-types.h"
#include "gpufan/stats.h"

namespace gpufan {

// The core of a Session. The fan-out and the fan-in each see it through their
// port (gpufan/fanout-port.h, gpufan/fanin-port.h), which documents each call
// the element makes; both extend a read-only view (gpufan/stats-view.h). The
// core declares every call once, grouped by port, for the ports and for the
// library's tests. The implementation is one file per concern: session.cpp
// (configuration, lanes, flushing, notifications), session-admission.cpp
// (fan-out side), session-lane-state.cpp (lane states, stalls, proofs),
// session-liveness.cpp (a stalled lane's marker and retry deadlines),
// session-arrival.cpp (fan-in side), session-release.cpp (output in order),
// session-end.cpp (the end-of-stream decision) and session-stats.cpp.
class GPUFAN_API Session : public std::enable_shared_from_this<Session> {
 public:
  static std::shared_ptr<Session> Create(
      const SessionConfig& config = {}, std::shared_ptr<Clock> clock = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }  // unique in this process
  const Clock& clock() const { return *clock_; }

  // --- configuration (SessionConfig; each element sets its own) ---
  void SetPolicy(Policy policy);
  Policy policy() const;
  void SetLaneQueueSize(uint32_t size);  // >= 1
  uint32_t lane_queue_size() const;
  void SetMaxInFlight(uint32_t limit);  // 0: automatic
  uint32_t max_in_flight() const;       // as set (0: automatic)
  uint32_t EffectiveMaxInFlight() const;
  void SetStallTimeout(int64_t ns);  // > 0
  int64_t stall_timeout_ns() const;
  void SetStallFailsLane(bool fails);
  bool stall_fails_lane() const;
  void SetChunkMode(bool chunks);  // SessionConfig::chunks

  // --- the fan-out's calls (gpufan/fanout-port.h documents them) ---
  void AddLane(uint32_t lane, const Device& device, double weight = 1.0);
  void RemoveLane(uint32_t lane);
  void SetLaneWeight(uint32_t lane, double weight);
  void SetLaneDevice(uint32_t lane, const Device& device);
  void SetLaneInfo(uint32_t lane, LaneInfo info);
  void SetLaneWorkerThread(uint32_t lane, std::string worker_thread);
  void CountStaging(uint32_t lane, bool copied);
  void CountGpuFrame(uint32_t lane, GpuCopyPath path, uint64_t bytes = 0,
                     int64_t ns = 0);
  void SetLaneEligible(uint32_t lane, bool eligible);
  bool IsLaneClaimed(uint32_t lane) const;
  void UnclaimLane(uint32_t lane);
  bool IsLaneStalled(uint32_t lane) const;
  uint64_t SetLaneFailed(uint32_t lane, bool failed);
  bool IsLaneFailed(uint32_t lane) const;
  std::string WhyNoLane() const;
  uint64_t LaneResets(uint32_t lane) const;
  std::shared_ptr<LaneTimer> LaneTimerFor(uint32_t lane);
  Dispatch DispatchItem(int64_t pts_ns, int origin_gpu = -1,
                        uint32_t stream = kMainStream,
                        int64_t max_wait_ns = -1);
  bool MarkStarted(uint32_t lane, uint64_t seq, bool woken = false);
  void WithdrawItem(uint32_t lane, uint64_t seq);
  bool OnPushed(uint32_t lane, uint64_t seq, PushOutcome outcome);
  bool MarkStartedAfterPush(uint32_t lane, uint64_t pushed_seq,
                            PushOutcome outcome, uint64_t seq, bool *marker);
  void SetStallListener(std::function<void(uint32_t lane)> listener);
  void SetDrainListener(std::function<void()> listener);
  void EndInput();
  void RestartInput();
  uint64_t MarkEventPosition(uint32_t event_key);
  uint64_t NextSeq() const;
  void SetFlushing(bool flushing);
  void Reset();
  bool StartTrace(const std::string &path, std::string *error);
  void StopTrace();
  void AddStream(uint32_t stream, double weight = 1.0);
  void RemoveStream(uint32_t stream);
  void SetStreamWeight(uint32_t stream, double weight);  // > 0
  void SetStreamMaxInFlight(uint32_t stream, uint32_t limit);
  void AttachStreamEvent(uint32_t stream, PayloadPtr payload);
  void FlushStream(uint32_t stream, bool start, bool tell_listener = true);
  void CountLeakyDrop(uint32_t stream);
  // The fan-in's output of `stream` sent (or dropped) an item whose
  // Released::holds_stream_slot was set: the stream may admit one more.
  void StreamOutputDone(uint32_t stream);
  void NoteProgress(uint32_t lane, uint64_t seq);
  void NoteChunkFrame(uint32_t lane, uint64_t seq);
  void EndChunkFill(uint32_t lane, uint64_t seq);
  void SetItemUnits(uint32_t lane, uint64_t seq, uint32_t units,
                    uint32_t nominal);
  bool WaitSettled(uint32_t lane, uint64_t seq);
  bool ChunkEndedByBranch(uint32_t lane, uint64_t seq) const;
  std::vector<ReplayItem> FailLaneForReplay(uint32_t lane);
  Dispatch Redispatch(uint64_t seq, uint32_t from_lane, int64_t pts_ns,
                      const std::vector<uint32_t>& allowed);
  void GiveUpReplay(uint32_t lane, uint64_t seq);
  Dispatch MoveUnstarted(uint64_t seq, uint32_t from_lane,
                         const std::vector<uint32_t>& allowed);
  uint64_t ReleasedThrough() const;
  uint64_t StreamReleasedThrough(uint32_t stream) const;
  void SetReleaseListener(std::function<void(uint64_t)> listener);
  // Calls no element makes (tests, tools).
  bool HasLane(uint32_t lane) const;
  // Like DispatchItem but never waits: std::nullopt when it would have to.
  std::optional<Dispatch> TryDispatchItem(int64_t pts_ns, int origin_gpu = -1);
  // A stalled lane's liveness markers: due stall-timeout after each stall,
  // then stall-timeout after each marker (or check that found one due).
  LivenessMarker CheckLivenessMarker(uint32_t lane, int64_t *due_ns);
  int64_t LastResortRetryDueNs() const;
  // Takes no Session lock: the caller holds its own (`lock`).
  std::cv_status WaitUntilDue(CondVar& cv, std::unique_lock<Mutex>& lock,
                              int64_t due_ns) const;

  // --- the fan-in's calls (gpufan/fanin-port.h documents them; it makes
  // UnclaimLane and LaneTimerFor too) ---
  void ClaimLane(uint32_t lane);
  bool HasStream(uint32_t stream) const;
  void SetStreamFlushListener(
      std::function<void(uint32_t stream, bool start)> listener);
  Arrival Arrive(uint32_t lane, std::optional<uint64_t> seq, int64_t pts_ns,
                 PayloadPtr payload, bool wake_output = true);
  // The forms that return a new batch (tests; the fan-in reuses one).
  ReadyBatch ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                                int64_t pts_ns, PayloadPtr payload,
                                Arrival *arrival);
  void ArriveAndTakeReady(uint32_t lane, std::optional<uint64_t> seq,
                          int64_t pts_ns, PayloadPtr payload, Arrival *arrival,
                          ReadyBatch *batch);
  void ProveLane(uint32_t lane, uint64_t seq);
  ReadyBatch ProveLaneAndTakeReady(uint32_t lane, uint64_t seq);
  void ProveLaneAndTakeReady(uint32_t lane, uint64_t seq, ReadyBatch *batch);
  void AttachBefore(uint64_t seq, PayloadPtr payload);
  void LaneEnded(uint32_t lane,
                 std::optional<uint64_t> before_seq = std::nullopt);
  std::optional<uint64_t> EventPosition(uint32_t event_key) const;
  bool HoldsArrivedFrom(uint32_t lane) const;
  void NoteLaneReset(uint32_t lane);
  void EndChunkByBranch(uint32_t lane, uint64_t seq);
  enum class ChunkState {
    kHead,     // it heads the window: its output may leave now
    kWaiting,  // it waits for earlier items
    kGone,     // given up or forgotten: its output is late
  };
  ChunkState ChunkOutput(uint32_t lane, uint64_t seq);
  bool NoteChunkStreamed(uint32_t lane, uint64_t seq, size_t outputs);
  std::optional<uint64_t> PendingHeadSeq() const;
  uint32_t ItemStream(uint64_t seq) const;
  bool IsOpen(uint64_t seq) const;
  ReadyBatch TakeReady();
  void TakeReady(ReadyBatch *batch);
  void WaitOutput(uint64_t generation);
  void WaitOutput(uint64_t generation, int64_t max_wait_ns);
  void WakeOutput();
  bool WindowEmpty() const;
  void NoteOutputFailed();
  void CountOutputGpuFrame(GpuCopyPath path, uint64_t bytes = 0,
                           int64_t ns = 0);
  int64_t AddedLatencyNs() const;
  void MarkLatencyReported(int64_t ns);
  bool MayEndStream(bool all_inputs_ended) const;
  EndOfStream DecideEndOfStream(const std::vector<EosInput>& inputs) const;

  // --- read-only (gpufan/stats-view.h) ---
  SessionStats Stats() const;
  bool flushing() const;
  bool input_ended() const;
  bool HasStreams() const;
  bool output_failed() const;
  int64_t AccountedForSinceNs() const;

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
  // A buffer without our meta held back (Lane::unmarked).
  struct Unmarked {
    int64_t pts_ns = kNoTime;
    // Items from this seq on were dispatched after it came back: not its.
    uint64_t limit_seq = 0;
    PayloadPtr payload;
  };
  // An input stream (AddStream).
  struct Stream {
    double weight = 1.0;  // 0: background (StreamMayDispatchUnlocked)
    // Start-time fair queueing: the stream's virtual time (1 / weight per
    // admitted item); one that starts waiting after being idle is raised to
    // virtual_now_, so idleness earns no burst.
    double vtime = 0.0;
    uint32_t waiting = 0;  // threads in DispatchItem for it
    uint32_t in_flight = 0;
    // Released from the window, not yet sent out of the stream's own output
    // (Released::holds_stream_slot): a stream whose downstream blocks keeps
    // these, and they bound its admission as if in flight.
    uint32_t at_output = 0;
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
    // Chunk mode with several input streams: the chunk a stream's chain
    // function is still filling on this lane (set at its dispatch,
    // EndChunkFill). The lane takes no other chunk meanwhile: their buffers
    // would interleave in its queue.
    std::optional<uint64_t> filling;
    StallKind stall_kind = StallKind::kNone;
    uint64_t stalled_seq = 0;
    int64_t stalled_ns = kNoTime;
    // When the fan-out's idle worker is to send its next liveness marker, or
    // look whether the lane answered (CheckLivenessMarker); set when the lane
    // stalls, kNoTime once a check found it answered.
    int64_t marker_due_ns = kNoTime;
    std::deque<Outstanding> outstanding;  // FIFO, oldest first: ascending seq
    // Replayed items a marker was asked for (OnPushed) that has not come
    // back: their marker proves only them (the fan-out queues a replayed
    // item ahead of the lane's own items). Bounded (kReplayMarkersKept).
    std::deque<uint64_t> replay_markers;
    // (pts, seq) of recent stall expiries: recognized without their meta.
    std::deque<std::pair<int64_t, uint64_t>> expired;
    // Buffers without our meta whose PTS several streams' outstanding items
    // share, in arrival order: held until the lane's later arrivals (or its
    // end) tell which item each was (session-unmarked.cpp). Bounded by the
    // lane's outstanding items.
    std::deque<Unmarked> unmarked;
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
  // `match` (an item of `lane.outstanding`) came back with `payload`: it
  // completes, the lane's items before it are settled (FIFO), and it takes
  // its place in the window.
  Arrival TakeMatchUnlocked(Lane& lane,
                            std::deque<Outstanding>::iterator match,
                            PayloadPtr payload, bool wake_output);
  // Meta-less matching (session-unmarked.cpp). Whether a buffer without our
  // meta must wait in lane.unmarked: others wait there, or items of several
  // streams share its PTS.
  bool MustHoldUnmarkedUnlocked(const Lane& lane, int64_t pts_ns) const;
  // Matches the held buffers that the lane's arrivals have made certain, in
  // order; with `final` (the lane ends or has pushed all it had, a marker
  // proved its items so far, or a buffer with our meta came),
  // the ones still ambiguous are dropped (unmatched_), never given to
  // another stream's item.
  void ResolveUnmarkedUnlocked(Lane& lane, bool final);
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
  // Item `released` of a stream left the window (counted once per item);
  // one with a payload now holds a slot at the stream's output.
  void CountStreamReleaseUnlocked(Released& released, int64_t now_ns);
  // A stream's admission bound is reached (its own bound counts the items at
  // its output; without one, those alone are bounded by the session's).
  bool StreamBlockedUnlocked(const Stream& s) const;
  void StreamStatsUnlocked(SessionStats *stats, int64_t now_ns) const;
  // An item in GPU `origin_gpu`'s memory (-1: host) must be copied to
  // `lane`'s GPU first.
  // Chunk mode, several streams: lanes being filled leave schedulable_;
  // false when none is left.
  bool SkipFillingUnlocked();
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

// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared helpers for the element tests: log policing, indexed test buffers,
// thread-safe recorders, a bus log, and the test pads that stand in for
// upstream, for branches and for downstream.
//
// Every wait here is bounded; tests assert order, counts, events, flow returns
// and messages, never timings. kSettle is only used to observe that something
// does NOT happen, which can pass by luck on a slow machine but never fails by
// luck.
#pragma once

#include <gst/gst.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../lane-counts.h"

namespace gpufan_test {

using Duration = std::chrono::milliseconds;

// Positive waits: far above what a working element needs on a busy 2-core box.
inline constexpr Duration kWait{10000};
// Negative checks ("nothing more arrives"): how long we look.
inline constexpr Duration kSettle{200};
// Whole-pipeline runs (thousands of buffers on a busy 2-core box).
inline constexpr Duration kLongWait{90000};
// A gpufanin stall-timeout that no test can reach: the property's maximum
// (1 h), beyond any watchdog. Every fan-in that is not there to test the
// timeout uses it, so that no slow moment can make a healthy lane's item
// time out; the stall tests shorten it only once no healthy item is pending.
inline constexpr GstClockTime kNoStallTimeout = 3600 * GST_SECOND;
// PTS step of the indexed test buffers: index i has PTS i * kFrame.
inline constexpr GstClockTime kFrame = GST_MSECOND;
// Caps used by the pad-level rigs.
inline constexpr const char *kTestCaps =
    "video/x-raw,format=GRAY8,width=4,height=4,framerate=1000/1";

// ---------------------------------------------------------------- logging ---

// Installs the g_log handlers (default + GStreamer/GLib domains): any WARNING
// or CRITICAL that no ExpectLog in scope matches fails the running test.
void InstallLogHandlers();
// Called after RUN_ALL_TESTS: logs that arrive later only set flags.
void MarkTestsDone();
// The leaks tracer said "Leaks detected" (at gst_deinit()).
bool LeaksReported();
// A warning/critical arrived after the tests were done (other than leaks).
bool UnexpectedLogAfterTests();
// Arms a per-test watchdog that aborts the binary (naming the test) when a
// test runs longer than GPUFAN_TEST_WATCHDOG_S seconds (default 120): the
// last resort against a wait that has no way out.
void InstallWatchdog();

// While alive, warnings/criticals whose message contains `substring` are
// counted instead of failing the test.
bool MatchExpectedLogLocked(const std::string& message);
class ExpectLog {
 public:
  explicit ExpectLog(std::string substring);
  ~ExpectLog();
  ExpectLog(const ExpectLog&) = delete;
  ExpectLog& operator=(const ExpectLog&) = delete;
  int hits() const;

 private:
  friend bool MatchExpectedLogLocked(const std::string& message);
  std::string substring_;
  std::atomic<int> hits_{0};
};

// ---------------------------------------------------------------- buffers ---

// A buffer of `size` bytes whose first 8 bytes hold `index` (little endian),
// PTS = index * kFrame, duration kFrame, offset = index.
GstBuffer *MakeIndexedBuffer(uint64_t index, gsize size = 16);
// Writes `index` into a writable buffer's first 8 bytes (little endian) and
// sets PTS = index frames, DURATION = one frame.
void WriteIndex(GstBuffer *buffer, uint64_t index);
// The index written by MakeIndexedBuffer / IndexStamper, or -1.
int64_t DataIndex(GstBuffer *buffer);
// PTS / kFrame, or -1 when the PTS is not set.
int64_t PtsIndex(GstClockTime pts);
// Number of metas on a buffer.
guint CountMetas(GstBuffer *buffer);
// An H.264 byte-stream buffer holds a NAL unit of `type` (5: an IDR slice,
// 7: a sequence parameter set).
bool HasH264Nal(GstBuffer *buffer, int type);
// The md5 of a raw video buffer's visible pixels, row by row whatever the
// strides of its pool, read with the current caps of `pad`; "(unmapped)"
// when it cannot be read.
std::string VisibleMd5(GstPad *pad, GstBuffer *buffer);
// Whether the registry has element factory `name` (tests that need an
// optional plugin skip without it).
bool HasFactory(const char *name);
// A new buffer with a deep copy of `buffer`'s memory, flags and timestamps
// but none of its metas (what a branch that makes new buffers does).
GstBuffer *CopyWithoutMetas(GstBuffer *buffer);

// got == first, first+1, ..., first+count-1
::testing::AssertionResult IsSequence(const std::vector<int64_t>& got,
                                      int64_t first, size_t count);
::testing::AssertionResult IsStrictlyIncreasing(
    const std::vector<int64_t>& got);

// ---------------------------------------------------------------- records ---

// One buffer or event seen by a test pad or probe.
struct Entry {
  bool is_buffer = false;
  int64_t index = -1;         // buffer: DataIndex; GAP event: PTS index
  int64_t pts_index = -1;     // buffer: PtsIndex(PTS)
  guint n_metas = 0;          // buffer: CountMetas
  GstEvent *event = nullptr;  // event: a ref owned by the RecordLog

  GstEventType type() const {
    return event ? GST_EVENT_TYPE(event) : GST_EVENT_UNKNOWN;
  }
};

// Thread-safe, append-only (until Clear) list of entries with bounded waits.
// Buffers are not kept (upstream pools must not run dry), events are.
class RecordLog {
 public:
  RecordLog() = default;
  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  void AddBuffer(GstBuffer *buffer);  // does not take ownership
  void AddEvent(GstEvent *event);     // takes a ref of its own

  // Waits until pred(entries) holds; pred runs under the log's lock.
  bool WaitFor(const std::function<bool(const std::vector<Entry>&)>& pred,
               Duration timeout = kWait) const;
  bool WaitBuffers(size_t n, Duration timeout = kWait) const;
  bool WaitEvents(GstEventType type, size_t n = 1,
                  Duration timeout = kWait) const;

  size_t Buffers() const;
  size_t Events(GstEventType type) const;
  std::vector<int64_t> BufferIndices() const;     // DataIndex of each buffer
  std::vector<int64_t> BufferPtsIndices() const;  // PtsIndex of each buffer
  // Buffers and GAP events in arrival order, by PTS index.
  std::vector<int64_t> DataItemPtsIndices() const;
  // Copies of the entries; their events stay valid until Clear() or the
  // log's destruction.
  std::vector<Entry> Snapshot() const;
  // "stream-start caps segment 0 1 gap(2) eos" (for failure messages).
  std::string Summary(size_t max_items = 80) const;
  void Clear();

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cond_;
  std::vector<Entry> entries_;
};

// ------------------------------------------------------------------- bus ---

// Records every message posted on a pipeline's bus (a sync handler), so no
// message is lost to a filtered pop.
class BusLog {
 public:
  explicit BusLog(GstElement *pipeline);
  ~BusLog();
  BusLog(const BusLog&) = delete;
  BusLog& operator=(const BusLog&) = delete;

  // The first recorded message (oldest first) for which pred holds, waiting
  // up to `timeout`. Borrowed: valid while the BusLog lives.
  GstMessage *WaitFor(const std::function<bool(GstMessage *)>& pred,
                      Duration timeout = kWait);
  GstMessage *WaitForType(GstMessageType types, Duration timeout = kWait);
  // Waits until at least n recorded messages satisfy pred.
  bool WaitForCount(const std::function<bool(GstMessage *)>& pred, size_t n,
                    Duration timeout = kWait);
  std::vector<GstMessage *> Matching(
      const std::function<bool(GstMessage *)>& pred);
  size_t Count(const std::function<bool(GstMessage *)>& pred);
  size_t CountType(GstMessageType types);
  // All ERROR and WARNING messages as text, for failure messages.
  std::string ErrorsText();

  static bool IsElementMessage(GstMessage *msg, const char *structure_name);
  // Error message + debug string of an ERROR/WARNING message.
  static std::string ErrorText(GstMessage *msg);

 private:
  static GstBusSyncReply OnMessage(GstBus *bus, GstMessage *msg, gpointer self);

  GstBus *bus_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cond_;
  std::vector<GstMessage *> messages_;
};

// ------------------------------------------------------------------ state ---

// Sets the state and, when the change is async, waits for it (bounded).
bool SetStateAndWait(GstElement *element, GstState state,
                     Duration timeout = kWait);

// Re-checks `pred` every few milliseconds until it holds (true) or `timeout`
// has passed (false): for what nothing notifies (statistics, counters).
bool PollUntil(const std::function<bool()>& pred, Duration timeout = kWait);

// ------------------------------------------------------------------- pads ---

// Upstream stand-in: a src pad whose pushes run on a thread of its own, so a
// push that blocks fails the test after a timeout instead of hanging it.
class Source {
 public:
  Source();
  ~Source();  // drains queued jobs (the element under test must be NULL by now)
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  GstPad *pad() const { return pad_; }
  bool LinkTo(GstPad *sink);

  // Runs fn on the source thread; false (with a test failure naming `what`)
  // if it does not return within timeout. After one timeout the source is
  // "stuck": later Runs are still queued, but are not waited for.
  bool Run(std::function<void()> fn, Duration timeout = kWait,
           const char *what = "push");
  std::optional<GstFlowReturn> Push(GstBuffer *buffer,
                                    Duration timeout = kWait);
  std::optional<GstFlowReturn> PushIndex(uint64_t index) {
    return Push(MakeIndexedBuffer(index));
  }
  // The event's return value; false also when it timed out.
  bool PushEvent(GstEvent *event, Duration timeout = kWait);
  // stream-start, caps, a TIME segment.
  bool Start(const char *caps = kTestCaps);
  bool PushSegment();
  // Sends `query` (transfer full) to the peer from the source thread, like
  // an upstream element. Returns it answered (transfer full; *answered is the
  // peer's result), or nullptr when the peer did not return in time.
  GstQuery *PeerQuery(GstQuery *query, bool *answered,
                      Duration timeout = kWait);

  // Queues pushes without waiting for them; AsyncResults() gives their flow
  // returns in order so far.
  void PushIndicesAsync(uint64_t first, uint64_t count, bool eos_after);
  std::vector<GstFlowReturn> AsyncResults() const;
  bool WaitAsyncResults(size_t n, Duration timeout = kWait) const;

 private:
  void Loop();

  GstPad *pad_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::condition_variable cond_;
  std::deque<std::function<void()>> jobs_;
  std::vector<GstFlowReturn> async_results_;
  bool stop_ = false;
  bool stuck_ = false;
  std::thread thread_;
};

// Downstream stand-in: a sink pad that records what it gets and answers
// with a configurable flow; can block in chain (flush-aware) and answer
// allocation queries.
class PadCollector {
 public:
  explicit PadCollector(const char *name = "collector");
  ~PadCollector();
  PadCollector(const PadCollector&) = delete;
  PadCollector& operator=(const PadCollector&) = delete;

  GstPad *pad() const { return pad_; }
  RecordLog& log() { return log_; }
  const RecordLog& log() const { return log_; }

  void SetFlow(GstFlowReturn flow);
  // While blocked, chain waits (after recording the buffer) until Unblock(),
  // a FLUSH_START or the collector's destruction.
  void Block();
  void Unblock();
  size_t BlockedInChain() const;
  // Answer allocation queries with one pool entry and these metas.
  void SetAllocationAnswer(guint size, guint min_buffers, guint max_buffers,
                           std::vector<GType> metas);

 private:
  static GstFlowReturn Chain(GstPad *pad, GstObject *parent, GstBuffer *buffer);
  static gboolean Event(GstPad *pad, GstObject *parent, GstEvent *event);
  static gboolean Query(GstPad *pad, GstObject *parent, GstQuery *query);

  GstPad *pad_ = nullptr;
  RecordLog log_;
  mutable std::mutex mutex_;
  std::condition_variable cond_;
  GstFlowReturn flow_ = GST_FLOW_OK;
  bool blocked_ = false;
  bool flushing_ = false;
  size_t blocked_in_chain_ = 0;
  bool answer_allocation_ = false;
  guint alloc_size_ = 0, alloc_min_ = 0, alloc_max_ = 0;
  std::vector<GType> alloc_metas_;
};

// A branch stand-in between a fan-out lane and a fan-in pad: a sink pad and
// a src pad. Passthrough forwards at once (from the lane's thread); hold
// keeps buffers and serialized events until the test releases them (from the
// test's thread), so the test decides in which order lanes return. Queries
// always pass straight through (the pairing query included). Flush events
// pass at once, or are captured for the test to forward.
class Branch {
 public:
  enum class Mode { kPassthrough, kHold };

  explicit Branch(const char *name, Mode mode = Mode::kPassthrough);
  ~Branch();  // drops whatever is still held
  Branch(const Branch&) = delete;
  Branch& operator=(const Branch&) = delete;

  GstPad *sink() const { return sink_; }
  GstPad *src() const { return src_; }
  // What arrived from the lane (after the transform), in order.
  RecordLog& seen() { return seen_; }

  void SetMode(Mode mode);
  void CaptureFlush(bool capture);
  // Applied to each arriving buffer; may return nullptr to drop it.
  void SetTransform(std::function<GstBuffer *(GstBuffer *)> transform);
  // Replaces the caps of every CAPS event passing through.
  void SetCapsOverride(const char *caps);
  size_t Dropped() const;  // buffers the transform dropped

  size_t Held() const;
  bool WaitHeldEvent(GstEventType type, Duration timeout = kWait) const;
  bool WaitHeldBuffers(size_t n, Duration timeout = kWait) const;
  // Pushes held items downstream from the calling thread.
  size_t ReleaseAll();
  size_t ReleaseUntil(
      GstEventType type);  // everything before the first such event
  std::vector<GstFlowReturn> ReleaseResults() const;

  bool WaitCapturedFlush(GstEventType type, Duration timeout = kWait) const;
  // Forwards the oldest captured flush event of `type`.
  bool ForwardCapturedFlush(GstEventType type);

 private:
  static GstFlowReturn Chain(GstPad *pad, GstObject *parent, GstBuffer *buffer);
  static gboolean SinkEvent(GstPad *pad, GstObject *parent, GstEvent *event);
  static gboolean SinkQuery(GstPad *pad, GstObject *parent, GstQuery *query);
  static gboolean SrcEvent(GstPad *pad, GstObject *parent, GstEvent *event);
  static gboolean SrcQuery(GstPad *pad, GstObject *parent, GstQuery *query);
  bool ReleaseOne(bool stop_at_event, GstEventType type);
  void DropHeldLocked();

  GstPad *sink_ = nullptr;
  GstPad *src_ = nullptr;
  RecordLog seen_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cond_;
  Mode mode_;
  bool capture_flush_ = false;
  std::function<GstBuffer *(GstBuffer *)> transform_;
  GstCaps *caps_override_ = nullptr;
  size_t dropped_ = 0;
  std::deque<GstMiniObject *> held_;
  std::deque<GstEvent *> captured_flush_;
  std::vector<GstFlowReturn> release_results_;
};

// ----------------------------------------------------------------- probes ---

// Records buffers and downstream events passing a pad (pipeline tests).
class ProbeRecorder {
 public:
  explicit ProbeRecorder(
      GstPad *pad);  // takes a ref of the pad; nullptr: records nothing
  ~ProbeRecorder();
  ProbeRecorder(const ProbeRecorder&) = delete;
  ProbeRecorder& operator=(const ProbeRecorder&) = delete;
  RecordLog& log() { return log_; }

 private:
  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer self);
  GstPad *pad_;
  gulong id_;
  RecordLog log_;
};

// Writes a running index into the first 8 bytes of every buffer passing a
// pad and sets its PTS to index * kFrame (pipeline tests).
class IndexStamper {
 public:
  explicit IndexStamper(GstPad *pad);
  ~IndexStamper();
  IndexStamper(const IndexStamper&) = delete;
  IndexStamper& operator=(const IndexStamper&) = delete;
  void Reset() { next_ = 0; }
  uint64_t count() const { return next_; }

 private:
  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer self);
  GstPad *pad_;
  gulong id_;
  std::atomic<uint64_t> next_{0};
};

// Frame-level fault injection into a lane: a probe on the src pad of one of
// its elements makes the lane fail from frame `at` on (the frame number as
// IndexStamper sets the PTS). kError: an ERROR message from the element and
// GST_FLOW_ERROR, as `identity error-after` does; kSilentError:
// GST_FLOW_ERROR alone; kBlock: the push never returns until Release() (or
// the destructor: declare it after the pipeline, or Release() before
// stopping it, so that the pads can deactivate). With `only`, frame `at`
// alone fails (a bad frame rather than a bad lane).
class LaneFault {
 public:
  enum class Kind { kError, kSilentError, kBlock };
  LaneFault(GstElement *element, Kind kind, int64_t at, bool only = false);
  ~LaneFault();
  LaneFault(const LaneFault&) = delete;
  LaneFault& operator=(const LaneFault&) = delete;
  // Unblocks a kBlock fault; later frames pass.
  void Release();
  // The frame the fault struck (-1: none yet).
  int64_t struck() const;

 private:
  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer self);
  GstElement *element_;
  GstPad *pad_;
  gulong id_;
  const Kind kind_;
  const int64_t at_;
  const bool only_;
  mutable std::mutex mutex_;
  std::condition_variable cond_;
  int64_t struck_ = -1;
  bool released_ = false;
};

// ------------------------------------------------------------------ stats ---

// The `stats` property (a copy; free with gst_structure_free), or nullptr.
GstStructure *GetStats(GstElement *element);
// Checks the documented fields and types of a gpufan-stats structure.
::testing::AssertionResult HasStatsShape(const GstStructure *stats,
                                         guint n_lanes);
guint StatsLaneCount(const GstStructure *stats);
const GstStructure *StatsLane(const GstStructure *stats, guint i);
// The `lanes` entry whose `lane` field is `id`, or nullptr.
const GstStructure *StatsLaneById(const GstStructure *stats, guint id);

// Scenario 2 (docs/testing.md): request pads `<prefix>%u` get the lowest
// free index (a released one is reused), an explicit
// `<prefix><explicit_index>` is honoured, and the next automatic one is the
// lowest free again.
void CheckRequestPadNaming(const char *factory, const char *prefix,
                           guint explicit_index);

// The generic state test: NULL/READY/PAUSED/PLAYING cycles of a lone element,
// with no request pads and with two (named by `pad_template`).
void CycleStatesWithAndWithoutPads(const char *factory,
                                   const char *pad_template);
guint64 StatsU64(const GstStructure *s, const char *field);
guint64 SumLanesU64(const GstStructure *stats, const char *field);

using gpufan_counts::LaneCounts;

// Expects one lane entry of a gpufan-stats structure (StatsLane,
// StatsLaneById) to have the counts named in `expected`:
//   ExpectLaneCounts(StatsLaneById(s, 1), {.dropped = 3, .timed_out = 0});
// A failure, at the caller's line, names the lane and each field that
// differs (as the structure spells it), expected and actual; a null lane is
// a failure too.
void ExpectLaneCounts(const GstStructure *lane, const LaneCounts& expected,
                      const char *file = __builtin_FILE(),
                      int line = __builtin_LINE());

}  // namespace gpufan_test

// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gst-test-util.h"

#include <gst/video/video.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace gpufan_test {

// ---------------------------------------------------------------- logging ---

namespace {

std::mutex g_log_mutex;
std::vector<ExpectLog *> g_expectations;  // guarded by g_log_mutex
std::atomic<bool> g_tests_done{false};
std::atomic<bool> g_leaks{false};
std::atomic<bool> g_late_unexpected{false};

const char *LevelName(GLogLevelFlags level) {
  if (level & G_LOG_LEVEL_ERROR)
    return "ERROR";
  if (level & G_LOG_LEVEL_CRITICAL)
    return "CRITICAL";
  if (level & G_LOG_LEVEL_WARNING)
    return "WARNING";
  return "LOG";
}

void LogHandler(const gchar *domain, GLogLevelFlags level, const gchar *message,
                gpointer) {
  constexpr int kProblems =
      G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING;
  if (!(level & kProblems)) {
    g_log_default_handler(domain, level, message, nullptr);
    return;
  }
  const std::string text = message ? message : "";
  const char *dom = domain ? domain : "(no domain)";
  std::fprintf(stderr, "%s-%s **: %s\n", dom, LevelName(level), text.c_str());

  // GStreamer 1.22's leaks tracer reports at gst_deinit() with
  // g_warning("Leaks detected and logged under GST_DEBUG=GST_TRACER:7").
  if (text.find("Leaks detected") != std::string::npos) {
    g_leaks = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (MatchExpectedLogLocked(text))
      return;
  }
  if (g_tests_done) {
    g_late_unexpected = true;
    return;
  }
  ADD_FAILURE() << "unexpected " << LevelName(level) << " from g_log domain '"
                << dom << "': " << text;
}

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit Watchdog(int seconds)
      : seconds_(seconds), thread_([this] { Loop(); }) {}
  ~Watchdog() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    cond_.notify_all();
    thread_.join();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    deadline_ =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds_);
    armed_ = true;
    cond_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    cond_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!quit_) {
      if (!armed_) {
        cond_.wait(lock);
        continue;
      }
      if (cond_.wait_until(lock, deadline_) == std::cv_status::timeout &&
          armed_ && std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(
            stderr,
            "WATCHDOG: test %s still running after %d s: something waits "
            "with no way out. Aborting.\n",
            name_.c_str(), seconds_);
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  const int seconds_;
  std::mutex mutex_;
  std::condition_variable cond_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace

bool MatchExpectedLogLocked(const std::string& message) {
  for (ExpectLog *e : g_expectations) {
    if (message.find(e->substring_) != std::string::npos) {
      e->hits_++;
      return true;
    }
  }
  return false;
}

ExpectLog::ExpectLog(std::string substring) : substring_(std::move(substring)) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_expectations.push_back(this);
}

ExpectLog::~ExpectLog() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_expectations.erase(
      std::remove(g_expectations.begin(), g_expectations.end(), this),
      g_expectations.end());
}

int ExpectLog::hits() const {
  return hits_;
}

void InstallLogHandlers() {
  g_log_set_default_handler(LogHandler, nullptr);
  const auto all = static_cast<GLogLevelFlags>(
      G_LOG_LEVEL_MASK | G_LOG_FLAG_FATAL | G_LOG_FLAG_RECURSION);
  for (const char *domain :
       {"GStreamer", "GLib", "GLib-GObject", "GStreamer-Base",
        "GStreamer-Video", "GStreamer-Check"}) {
    g_log_set_handler(domain, all, LogHandler, nullptr);
  }
}

void MarkTestsDone() {
  g_tests_done = true;
}
bool LeaksReported() {
  return g_leaks;
}
bool UnexpectedLogAfterTests() {
  return g_late_unexpected;
}

void InstallWatchdog() {
  int seconds = 120;
  if (const char *env = g_getenv("GPUFAN_TEST_WATCHDOG_S"))
    seconds = std::max(1, atoi(env));
  // The listener list owns it and deletes it at exit.
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog(seconds));
}

// ---------------------------------------------------------------- buffers ---

void WriteIndex(GstBuffer *buffer, uint64_t index) {
  guint8 bytes[8];
  for (int i = 0; i < 8; i++)
    bytes[i] = static_cast<guint8>(index >> (8 * i));
  gst_buffer_fill(buffer, 0, bytes, sizeof bytes);
  GST_BUFFER_PTS(buffer) = index * kFrame;
  GST_BUFFER_DURATION(buffer) = kFrame;
}

GstBuffer *MakeIndexedBuffer(uint64_t index, gsize size) {
  GstBuffer *buffer =
      gst_buffer_new_allocate(nullptr, std::max<gsize>(size, 8), nullptr);
  gst_buffer_memset(buffer, 0, 0, gst_buffer_get_size(buffer));
  WriteIndex(buffer, index);
  GST_BUFFER_OFFSET(buffer) = index;
  return buffer;
}

int64_t DataIndex(GstBuffer *buffer) {
  guint8 bytes[8];
  if (gst_buffer_extract(buffer, 0, bytes, sizeof bytes) != sizeof bytes)
    return -1;
  uint64_t index = 0;
  for (int i = 0; i < 8; i++)
    index |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return static_cast<int64_t>(index);
}

int64_t PtsIndex(GstClockTime pts) {
  return GST_CLOCK_TIME_IS_VALID(pts) ? static_cast<int64_t>(pts / kFrame) : -1;
}

guint CountMetas(GstBuffer *buffer) {
  guint n = 0;
  gpointer state = nullptr;
  while (gst_buffer_iterate_meta(buffer, &state))
    n++;
  return n;
}

bool HasH264Nal(GstBuffer *buffer, int type) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ))
    return false;
  bool found = false;
  for (gsize i = 0; i + 3 < map.size && !found; ++i)
    found = map.data[i] == 0 && map.data[i + 1] == 0 && map.data[i + 2] == 1 &&
            (map.data[i + 3] & 0x1f) == type;
  gst_buffer_unmap(buffer, &map);
  return found;
}

std::string VisibleMd5(GstPad *pad, GstBuffer *buffer) {
  GstCaps *caps = gst_pad_get_current_caps(pad);
  GstVideoInfo vinfo;
  std::string sum = "(unmapped)";
  GstVideoFrame frame;
  if (caps && gst_video_info_from_caps(&vinfo, caps) &&
      gst_video_frame_map(&frame, &vinfo, buffer, GST_MAP_READ)) {
    GChecksum *md5 = g_checksum_new(G_CHECKSUM_MD5);
    for (guint c = 0; c < GST_VIDEO_FRAME_N_COMPONENTS(&frame); c++) {
      const auto *data =
          static_cast<const guint8 *>(GST_VIDEO_FRAME_COMP_DATA(&frame, c));
      const gint stride = GST_VIDEO_FRAME_COMP_STRIDE(&frame, c);
      const gint row = GST_VIDEO_FRAME_COMP_WIDTH(&frame, c) *
                       GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, c);
      for (gint y = 0; y < GST_VIDEO_FRAME_COMP_HEIGHT(&frame, c); y++)
        g_checksum_update(md5, data + y * stride, row);
    }
    sum = g_checksum_get_string(md5);
    g_checksum_free(md5);
    gst_video_frame_unmap(&frame);
  }
  if (caps)
    gst_caps_unref(caps);
  return sum;
}

bool HasFactory(const char *name) {
  GstElementFactory *f = gst_element_factory_find(name);
  if (!f)
    return false;
  gst_object_unref(f);
  return true;
}

GstBuffer *CopyWithoutMetas(GstBuffer *buffer) {
  GstBuffer *copy = gst_buffer_new();
  // No GST_BUFFER_COPY_META: the new buffer carries no metas at all.
  gst_buffer_copy_into(copy, buffer,
                       static_cast<GstBufferCopyFlags>(
                           GST_BUFFER_COPY_FLAGS | GST_BUFFER_COPY_TIMESTAMPS |
                           GST_BUFFER_COPY_MEMORY | GST_BUFFER_COPY_DEEP),
                       0, static_cast<gsize>(-1));
  return copy;
}

namespace {
std::string Around(const std::vector<int64_t>& v, size_t pos) {
  std::ostringstream out;
  size_t from = pos > 5 ? pos - 5 : 0;
  size_t to = std::min(v.size(), pos + 6);
  out << "[" << from << ".." << to << "): ";
  for (size_t i = from; i < to; i++)
    out << (i == pos ? "*" : "") << v[i] << " ";
  return out.str();
}
}  // namespace

::testing::AssertionResult IsSequence(const std::vector<int64_t>& got,
                                      int64_t first, size_t count) {
  for (size_t i = 0; i < std::min(got.size(), count); i++) {
    if (got[i] != first + static_cast<int64_t>(i)) {
      return ::testing::AssertionFailure()
             << "position " << i << ": expected "
             << first + static_cast<int64_t>(i) << ", got " << got[i] << " ("
             << got.size() << " items; " << Around(got, i) << ")";
    }
  }
  if (got.size() != count) {
    return ::testing::AssertionFailure()
           << "expected " << count << " items from " << first << ", got "
           << got.size()
           << (got.empty() ? std::string()
                           : " (last " + std::to_string(got.back()) + ")");
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IsStrictlyIncreasing(
    const std::vector<int64_t>& got) {
  for (size_t i = 1; i < got.size(); i++) {
    if (got[i] <= got[i - 1]) {
      return ::testing::AssertionFailure()
             << "not strictly increasing at position " << i << ": "
             << got[i - 1] << " then " << got[i] << " (" << Around(got, i)
             << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- records ---

RecordLog::~RecordLog() {
  Clear();
}

void RecordLog::AddBuffer(GstBuffer *buffer) {
  Entry e;
  e.is_buffer = true;
  e.index = DataIndex(buffer);
  e.pts_index = PtsIndex(GST_BUFFER_PTS(buffer));
  e.n_metas = CountMetas(buffer);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(e);
  }
  cond_.notify_all();
}

void RecordLog::AddEvent(GstEvent *event) {
  Entry e;
  e.event = gst_event_ref(event);
  if (GST_EVENT_TYPE(event) == GST_EVENT_GAP) {
    GstClockTime ts, dur;
    gst_event_parse_gap(event, &ts, &dur);
    e.index = e.pts_index = PtsIndex(ts);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(e);
  }
  cond_.notify_all();
}

bool RecordLog::WaitFor(
    const std::function<bool(const std::vector<Entry>&)>& pred,
    Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout, [&] { return pred(entries_); });
}

bool RecordLog::WaitBuffers(size_t n, Duration timeout) const {
  return WaitFor(
      [n](const std::vector<Entry>& entries) {
        return static_cast<size_t>(std::count_if(
                   entries.begin(), entries.end(),
                   [](const Entry& e) { return e.is_buffer; })) >= n;
      },
      timeout);
}

bool RecordLog::WaitEvents(GstEventType type, size_t n,
                           Duration timeout) const {
  return WaitFor(
      [type, n](const std::vector<Entry>& entries) {
        return static_cast<size_t>(std::count_if(
                   entries.begin(), entries.end(),
                   [type](const Entry& e) { return e.type() == type; })) >= n;
      },
      timeout);
}

size_t RecordLog::Buffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const Entry& e) { return e.is_buffer; });
}

size_t RecordLog::Events(GstEventType type) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(entries_.begin(), entries_.end(),
                       [type](const Entry& e) { return e.type() == type; });
}

std::vector<int64_t> RecordLog::BufferIndices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> out;
  for (const Entry& e : entries_)
    if (e.is_buffer)
      out.push_back(e.index);
  return out;
}

std::vector<int64_t> RecordLog::BufferPtsIndices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> out;
  for (const Entry& e : entries_)
    if (e.is_buffer)
      out.push_back(e.pts_index);
  return out;
}

std::vector<int64_t> RecordLog::DataItemPtsIndices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> out;
  for (const Entry& e : entries_)
    if (e.is_buffer || e.type() == GST_EVENT_GAP)
      out.push_back(e.pts_index);
  return out;
}

std::vector<Entry> RecordLog::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

std::string RecordLog::Summary(size_t max_items) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  size_t n = 0;
  for (const Entry& e : entries_) {
    if (n++ == max_items) {
      out << "... (" << entries_.size() << " in all)";
      break;
    }
    if (e.is_buffer)
      out << e.index << " ";
    else if (e.type() == GST_EVENT_GAP)
      out << "gap(" << e.index << ") ";
    else
      out << GST_EVENT_TYPE_NAME(e.event) << " ";
  }
  return out.str();
}

void RecordLog::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_)
    if (e.event)
      gst_event_unref(e.event);
  entries_.clear();
}

// ------------------------------------------------------------------- bus ---

BusLog::BusLog(GstElement *pipeline) {
  bus_ = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus_, OnMessage, this, nullptr);
}

BusLog::~BusLog() {
  gst_bus_set_sync_handler(bus_, nullptr, nullptr, nullptr);
  gst_object_unref(bus_);
  for (GstMessage *m : messages_)
    gst_message_unref(m);
}

GstBusSyncReply BusLog::OnMessage(GstBus *, GstMessage *msg, gpointer data) {
  auto *self = static_cast<BusLog *>(data);
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->messages_.push_back(msg);  // takes the message's ref
  }
  self->cond_.notify_all();
  return GST_BUS_DROP;
}

GstMessage *BusLog::WaitFor(const std::function<bool(GstMessage *)>& pred,
                            Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  GstMessage *found = nullptr;
  cond_.wait_for(lock, timeout, [&] {
    for (GstMessage *m : messages_) {
      if (pred(m)) {
        found = m;
        return true;
      }
    }
    return false;
  });
  return found;
}

bool BusLog::WaitForCount(const std::function<bool(GstMessage *)>& pred,
                          size_t n, Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout, [&] {
    return static_cast<size_t>(
               std::count_if(messages_.begin(), messages_.end(), pred)) >= n;
  });
}

GstMessage *BusLog::WaitForType(GstMessageType types, Duration timeout) {
  return WaitFor(
      [types](GstMessage *m) { return (GST_MESSAGE_TYPE(m) & types) != 0; },
      timeout);
}

std::vector<GstMessage *> BusLog::Matching(
    const std::function<bool(GstMessage *)>& pred) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<GstMessage *> out;
  for (GstMessage *m : messages_)
    if (pred(m))
      out.push_back(m);
  return out;
}

size_t BusLog::Count(const std::function<bool(GstMessage *)>& pred) {
  return Matching(pred).size();
}

size_t BusLog::CountType(GstMessageType types) {
  return Count(
      [types](GstMessage *m) { return (GST_MESSAGE_TYPE(m) & types) != 0; });
}

std::string BusLog::ErrorText(GstMessage *msg) {
  GError *err = nullptr;
  gchar *debug = nullptr;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
    gst_message_parse_error(msg, &err, &debug);
  else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_WARNING)
    gst_message_parse_warning(msg, &err, &debug);
  else
    return {};
  std::string text =
      std::string(err ? err->message : "") + " | " + (debug ? debug : "");
  g_clear_error(&err);
  g_free(debug);
  return text;
}

std::string BusLog::ErrorsText() {
  std::string out;
  for (GstMessage *m : Matching([](GstMessage *m) {
         return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR ||
                GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING;
       })) {
    out += std::string(GST_MESSAGE_TYPE_NAME(m)) + " from " +
           GST_MESSAGE_SRC_NAME(m) + ": " + ErrorText(m) + "\n";
  }
  return out;
}

bool BusLog::IsElementMessage(GstMessage *msg, const char *structure_name) {
  if (GST_MESSAGE_TYPE(msg) != GST_MESSAGE_ELEMENT)
    return false;
  const GstStructure *s = gst_message_get_structure(msg);
  return s && gst_structure_has_name(s, structure_name);
}

// ------------------------------------------------------------------ state ---

bool SetStateAndWait(GstElement *element, GstState state, Duration timeout) {
  GstStateChangeReturn ret = gst_element_set_state(element, state);
  if (ret == GST_STATE_CHANGE_FAILURE)
    return false;
  if (ret == GST_STATE_CHANGE_ASYNC) {
    ret = gst_element_get_state(
        element, nullptr, nullptr,
        static_cast<GstClockTime>(timeout.count()) * GST_MSECOND);
    return ret != GST_STATE_CHANGE_FAILURE && ret != GST_STATE_CHANGE_ASYNC;
  }
  return true;
}

bool PollUntil(const std::function<bool()>& pred, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(Duration(2));
  }
  return true;
}

// ------------------------------------------------------------------- pads ---

namespace {

GstStaticPadTemplate kSrcTemplate = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
GstStaticPadTemplate kSinkTemplate = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

gboolean SwallowUpstreamEvent(GstPad *, GstObject *, GstEvent *event) {
  gst_event_unref(event);
  return TRUE;
}

template <typename T>
T *Self(GstPad *pad) {
  return static_cast<T *>(gst_pad_get_element_private(pad));
}

}  // namespace

Source::Source() {
  pad_ = gst_pad_new_from_static_template(&kSrcTemplate, "test-src");
  gst_pad_set_event_function(pad_, SwallowUpstreamEvent);
  gst_pad_set_active(pad_, TRUE);
  thread_ = std::thread([this] { Loop(); });
}

Source::~Source() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cond_.notify_all();
  thread_.join();
  GstPad *peer = gst_pad_get_peer(pad_);
  if (peer) {
    gst_pad_unlink(pad_, peer);
    gst_object_unref(peer);
  }
  gst_pad_set_active(pad_, FALSE);
  gst_object_unref(pad_);
}

void Source::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cond_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty())
      return;  // stop_ and drained
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

bool Source::LinkTo(GstPad *sink) {
  return gst_pad_link(pad_, sink) == GST_PAD_LINK_OK;
}

bool Source::Run(std::function<void()> fn, Duration timeout, const char *what) {
  struct Done {
    std::mutex mutex;
    std::condition_variable cond;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  bool stuck;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stuck = stuck_;
    jobs_.push_back([fn = std::move(fn), done] {
      fn();
      std::lock_guard<std::mutex> l(done->mutex);
      done->done = true;
      done->cond.notify_all();
    });
  }
  cond_.notify_all();
  if (stuck) {
    ADD_FAILURE() << what
                  << " not waited for: an earlier push is still blocked";
    return false;
  }
  std::unique_lock<std::mutex> lock(done->mutex);
  if (!done->cond.wait_for(lock, timeout, [&] { return done->done; })) {
    ADD_FAILURE() << what << " into the element did not return within "
                  << timeout.count()
                  << " ms (a blocked chain/event/query function)";
    std::lock_guard<std::mutex> l(mutex_);
    stuck_ = true;
    return false;
  }
  return true;
}

std::optional<GstFlowReturn> Source::Push(GstBuffer *buffer, Duration timeout) {
  auto result = std::make_shared<std::atomic<int>>(GST_FLOW_OK);
  GstPad *pad = pad_;
  if (!Run([pad, buffer, result] { *result = gst_pad_push(pad, buffer); },
           timeout, "buffer push"))
    return std::nullopt;
  return static_cast<GstFlowReturn>(result->load());
}

bool Source::PushEvent(GstEvent *event, Duration timeout) {
  auto result = std::make_shared<std::atomic<bool>>(false);
  GstPad *pad = pad_;
  std::string what = std::string(GST_EVENT_TYPE_NAME(event)) + " event push";
  if (!Run([pad, event, result] { *result = gst_pad_push_event(pad, event); },
           timeout, what.c_str()))
    return false;
  return *result;
}

bool Source::PushSegment() {
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  return PushEvent(gst_event_new_segment(&segment));
}

bool Source::Start(const char *caps) {
  GstCaps *c = gst_caps_from_string(caps);
  bool ok = PushEvent(gst_event_new_stream_start("gpufan-test-stream"));
  ok = PushEvent(gst_event_new_caps(c)) && ok;
  gst_caps_unref(c);
  return PushSegment() && ok;
}

GstQuery *Source::PeerQuery(GstQuery *query, bool *answered, Duration timeout) {
  // Whoever finishes last (the waiting caller or a late query) frees it.
  struct State {
    std::mutex mutex;
    GstQuery *query;
    bool result = false;
    bool done = false;
    bool abandoned = false;
  };
  auto state = std::make_shared<State>();
  state->query = query;
  GstPad *pad = pad_;
  const bool ran = Run(
      [pad, state] {
        const bool result = gst_pad_peer_query(pad, state->query);
        std::lock_guard<std::mutex> lock(state->mutex);
        state->result = result;
        state->done = true;
        if (state->abandoned)
          gst_query_unref(state->query);
      },
      timeout, "query");
  std::lock_guard<std::mutex> lock(state->mutex);
  if (!ran && !state->done) {
    state->abandoned = true;
    return nullptr;
  }
  *answered = state->result;
  return state->query;
}

void Source::PushIndicesAsync(uint64_t first, uint64_t count, bool eos_after) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint64_t i = first; i < first + count; i++) {
      jobs_.push_back([this, i] {
        GstFlowReturn ret = gst_pad_push(pad_, MakeIndexedBuffer(i));
        std::lock_guard<std::mutex> l(mutex_);
        async_results_.push_back(ret);
        cond_.notify_all();
      });
    }
    if (eos_after)
      jobs_.push_back(
          [this] { gst_pad_push_event(pad_, gst_event_new_eos()); });
  }
  cond_.notify_all();
}

std::vector<GstFlowReturn> Source::AsyncResults() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return async_results_;
}

bool Source::WaitAsyncResults(size_t n, Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout,
                        [&] { return async_results_.size() >= n; });
}

PadCollector::PadCollector(const char *name) {
  pad_ = gst_pad_new_from_static_template(&kSinkTemplate, name);
  gst_pad_set_element_private(pad_, this);
  gst_pad_set_chain_function(pad_, Chain);
  gst_pad_set_event_function(pad_, Event);
  gst_pad_set_query_function(pad_, Query);
  gst_pad_set_active(pad_, TRUE);
}

PadCollector::~PadCollector() {
  Unblock();
  GstPad *peer = gst_pad_get_peer(pad_);
  if (peer) {
    gst_pad_unlink(peer, pad_);
    gst_object_unref(peer);
  }
  gst_pad_set_active(pad_, FALSE);
  gst_object_unref(pad_);
}

void PadCollector::SetFlow(GstFlowReturn flow) {
  std::lock_guard<std::mutex> lock(mutex_);
  flow_ = flow;
}

void PadCollector::Block() {
  std::lock_guard<std::mutex> lock(mutex_);
  blocked_ = true;
}

void PadCollector::Unblock() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocked_ = false;
  }
  cond_.notify_all();
}

size_t PadCollector::BlockedInChain() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocked_in_chain_;
}

void PadCollector::SetAllocationAnswer(guint size, guint min_buffers,
                                       guint max_buffers,
                                       std::vector<GType> metas) {
  std::lock_guard<std::mutex> lock(mutex_);
  answer_allocation_ = true;
  alloc_size_ = size;
  alloc_min_ = min_buffers;
  alloc_max_ = max_buffers;
  alloc_metas_ = std::move(metas);
}

GstFlowReturn PadCollector::Chain(GstPad *pad, GstObject *, GstBuffer *buffer) {
  PadCollector *self = Self<PadCollector>(pad);
  self->log_.AddBuffer(buffer);
  gst_buffer_unref(buffer);
  std::unique_lock<std::mutex> lock(self->mutex_);
  if (self->blocked_) {
    self->blocked_in_chain_++;
    self->cond_.notify_all();
    self->cond_.wait(lock,
                     [self] { return !self->blocked_ || self->flushing_; });
    self->blocked_in_chain_--;
    if (self->flushing_)
      return GST_FLOW_FLUSHING;
  }
  return self->flow_;
}

gboolean PadCollector::Event(GstPad *pad, GstObject *, GstEvent *event) {
  PadCollector *self = Self<PadCollector>(pad);
  self->log_.AddEvent(event);
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_START ||
      GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->flushing_ = GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_START;
    }
    self->cond_.notify_all();
  }
  gst_event_unref(event);
  return TRUE;
}

gboolean PadCollector::Query(GstPad *pad, GstObject *parent, GstQuery *query) {
  PadCollector *self = Self<PadCollector>(pad);
  if (GST_QUERY_TYPE(query) == GST_QUERY_ALLOCATION) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    if (!self->answer_allocation_)
      return FALSE;
    gst_query_add_allocation_pool(query, nullptr, self->alloc_size_,
                                  self->alloc_min_, self->alloc_max_);
    for (GType api : self->alloc_metas_)
      gst_query_add_allocation_meta(query, api, nullptr);
    return TRUE;
  }
  return gst_pad_query_default(pad, parent, query);
}

Branch::Branch(const char *name, Mode mode) : mode_(mode) {
  std::string sink_name = std::string(name) + "-sink";
  std::string src_name = std::string(name) + "-src";
  sink_ = gst_pad_new_from_static_template(&kSinkTemplate, sink_name.c_str());
  src_ = gst_pad_new_from_static_template(&kSrcTemplate, src_name.c_str());
  gst_pad_set_element_private(sink_, this);
  gst_pad_set_element_private(src_, this);
  gst_pad_set_chain_function(sink_, Chain);
  gst_pad_set_event_function(sink_, SinkEvent);
  gst_pad_set_query_function(sink_, SinkQuery);
  gst_pad_set_event_function(src_, SrcEvent);
  gst_pad_set_query_function(src_, SrcQuery);
  gst_pad_set_active(sink_, TRUE);
  gst_pad_set_active(src_, TRUE);
}

Branch::~Branch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DropHeldLocked();
    for (GstEvent *e : captured_flush_)
      gst_event_unref(e);
    captured_flush_.clear();
    if (caps_override_)
      gst_caps_unref(caps_override_);
  }
  for (GstPad *pad : {sink_, src_}) {
    GstPad *peer = gst_pad_get_peer(pad);
    if (peer) {
      if (GST_PAD_IS_SRC(pad))
        gst_pad_unlink(pad, peer);
      else
        gst_pad_unlink(peer, pad);
      gst_object_unref(peer);
    }
    gst_pad_set_active(pad, FALSE);
    gst_object_unref(pad);
  }
}

void Branch::DropHeldLocked() {
  for (GstMiniObject *o : held_)
    gst_mini_object_unref(o);
  held_.clear();
}

void Branch::SetMode(Mode mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  mode_ = mode;
}

void Branch::CaptureFlush(bool capture) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_flush_ = capture;
}

void Branch::SetTransform(std::function<GstBuffer *(GstBuffer *)> transform) {
  std::lock_guard<std::mutex> lock(mutex_);
  transform_ = std::move(transform);
}

void Branch::SetCapsOverride(const char *caps) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (caps_override_)
    gst_caps_unref(caps_override_);
  caps_override_ = gst_caps_from_string(caps);
}

size_t Branch::Dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

size_t Branch::Held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

bool Branch::WaitHeldEvent(GstEventType type, Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout, [&] {
    return std::any_of(held_.begin(), held_.end(), [type](GstMiniObject *o) {
      return GST_IS_EVENT(o) && GST_EVENT_TYPE(GST_EVENT_CAST(o)) == type;
    });
  });
}

bool Branch::WaitHeldBuffers(size_t n, Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout, [&] {
    return static_cast<size_t>(std::count_if(
               held_.begin(), held_.end(),
               [](GstMiniObject *o) { return GST_IS_BUFFER(o); })) >= n;
  });
}

bool Branch::ReleaseOne(bool stop_at_event, GstEventType type) {
  GstMiniObject *item;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_.empty())
      return false;
    item = held_.front();
    if (stop_at_event && GST_IS_EVENT(item) &&
        GST_EVENT_TYPE(GST_EVENT_CAST(item)) == type)
      return false;
    held_.pop_front();
  }
  if (GST_IS_BUFFER(item)) {
    GstFlowReturn ret = gst_pad_push(src_, GST_BUFFER_CAST(item));
    std::lock_guard<std::mutex> lock(mutex_);
    release_results_.push_back(ret);
  } else {
    gst_pad_push_event(src_, GST_EVENT_CAST(item));
  }
  return true;
}

size_t Branch::ReleaseAll() {
  size_t n = 0;
  while (ReleaseOne(false, GST_EVENT_UNKNOWN))
    n++;
  return n;
}

size_t Branch::ReleaseUntil(GstEventType type) {
  size_t n = 0;
  while (ReleaseOne(true, type))
    n++;
  return n;
}

std::vector<GstFlowReturn> Branch::ReleaseResults() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return release_results_;
}

bool Branch::WaitCapturedFlush(GstEventType type, Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cond_.wait_for(lock, timeout, [&] {
    return std::any_of(
        captured_flush_.begin(), captured_flush_.end(),
        [type](GstEvent *e) { return GST_EVENT_TYPE(e) == type; });
  });
}

bool Branch::ForwardCapturedFlush(GstEventType type) {
  GstEvent *event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it =
        std::find_if(captured_flush_.begin(), captured_flush_.end(),
                     [type](GstEvent *e) { return GST_EVENT_TYPE(e) == type; });
    if (it == captured_flush_.end())
      return false;
    event = *it;
    captured_flush_.erase(it);
  }
  return gst_pad_push_event(src_, event);
}

GstFlowReturn Branch::Chain(GstPad *pad, GstObject *, GstBuffer *buffer) {
  Branch *self = Self<Branch>(pad);
  std::function<GstBuffer *(GstBuffer *)> transform;
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    transform = self->transform_;
  }
  if (transform) {
    buffer = transform(buffer);
    if (!buffer) {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->dropped_++;
      return GST_FLOW_OK;
    }
  }
  self->seen_.AddBuffer(buffer);
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    if (self->mode_ == Mode::kHold) {
      self->held_.push_back(GST_MINI_OBJECT_CAST(buffer));
      self->cond_.notify_all();
      return GST_FLOW_OK;
    }
  }
  return gst_pad_push(self->src_, buffer);
}

gboolean Branch::SinkEvent(GstPad *pad, GstObject *, GstEvent *event) {
  Branch *self = Self<Branch>(pad);
  const GstEventType type = GST_EVENT_TYPE(event);
  if (type == GST_EVENT_CAPS) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    if (self->caps_override_) {
      GstEvent *replaced = gst_event_new_caps(self->caps_override_);
      gst_event_unref(event);
      event = replaced;
    }
  }
  self->seen_.AddEvent(event);
  {
    std::unique_lock<std::mutex> lock(self->mutex_);
    if (type == GST_EVENT_FLUSH_START)
      self->DropHeldLocked();
    if ((type == GST_EVENT_FLUSH_START || type == GST_EVENT_FLUSH_STOP) &&
        self->capture_flush_) {
      self->captured_flush_.push_back(event);
      self->cond_.notify_all();
      return TRUE;
    }
    if (GST_EVENT_IS_SERIALIZED(event) && type != GST_EVENT_FLUSH_STOP &&
        self->mode_ == Mode::kHold) {
      self->held_.push_back(GST_MINI_OBJECT_CAST(event));
      self->cond_.notify_all();
      return TRUE;
    }
  }
  return gst_pad_push_event(self->src_, event);
}

gboolean Branch::SinkQuery(GstPad *pad, GstObject *parent, GstQuery *query) {
  Branch *self = Self<Branch>(pad);
  switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_CAPS:
    case GST_QUERY_ACCEPT_CAPS:
      return gst_pad_query_default(pad, parent, query);
    default:
      return gst_pad_peer_query(self->src_, query);
  }
}

gboolean Branch::SrcEvent(GstPad *pad, GstObject *, GstEvent *event) {
  return gst_pad_push_event(Self<Branch>(pad)->sink_, event);
}

gboolean Branch::SrcQuery(GstPad *pad, GstObject *, GstQuery *query) {
  return gst_pad_peer_query(Self<Branch>(pad)->sink_, query);
}

// ----------------------------------------------------------------- probes ---

ProbeRecorder::ProbeRecorder(GstPad *pad)
    : pad_(pad ? GST_PAD(gst_object_ref(pad)) : nullptr), id_(0) {
  if (!pad_)
    return;
  id_ = gst_pad_add_probe(
      pad_,
      static_cast<GstPadProbeType>(
          GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
          GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM | GST_PAD_PROBE_TYPE_EVENT_FLUSH),
      Probe, this, nullptr);
}

ProbeRecorder::~ProbeRecorder() {
  if (!pad_)
    return;
  gst_pad_remove_probe(pad_, id_);
  gst_object_unref(pad_);
}

GstPadProbeReturn ProbeRecorder::Probe(GstPad *, GstPadProbeInfo *info,
                                       gpointer data) {
  auto *self = static_cast<ProbeRecorder *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    self->log_.AddBuffer(GST_PAD_PROBE_INFO_BUFFER(info));
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList *list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    for (guint i = 0; i < gst_buffer_list_length(list); i++)
      self->log_.AddBuffer(gst_buffer_list_get(list, i));
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_BOTH) {
    self->log_.AddEvent(GST_PAD_PROBE_INFO_EVENT(info));
  }
  return GST_PAD_PROBE_OK;
}

IndexStamper::IndexStamper(GstPad *pad)
    : pad_(pad ? GST_PAD(gst_object_ref(pad)) : nullptr), id_(0) {
  if (!pad_)
    return;
  id_ =
      gst_pad_add_probe(pad_, GST_PAD_PROBE_TYPE_BUFFER, Probe, this, nullptr);
}

IndexStamper::~IndexStamper() {
  if (!pad_)
    return;
  gst_pad_remove_probe(pad_, id_);
  gst_object_unref(pad_);
}

GstPadProbeReturn IndexStamper::Probe(GstPad *, GstPadProbeInfo *info,
                                      gpointer data) {
  auto *self = static_cast<IndexStamper *>(data);
  GstBuffer *buffer = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
  WriteIndex(buffer, self->next_++);
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  return GST_PAD_PROBE_OK;
}

// ------------------------------------------------------------------ stats ---

GstStructure *GetStats(GstElement *element) {
  GstStructure *stats = nullptr;
  g_object_get(element, "stats", &stats, nullptr);
  return stats;
}

guint StatsLaneCount(const GstStructure *stats) {
  const GValue *lanes = gst_structure_get_value(stats, "lanes");
  return lanes && GST_VALUE_HOLDS_ARRAY(lanes) ? gst_value_array_get_size(lanes)
                                               : 0;
}

const GstStructure *StatsLane(const GstStructure *stats, guint i) {
  const GValue *lanes = gst_structure_get_value(stats, "lanes");
  if (!lanes || !GST_VALUE_HOLDS_ARRAY(lanes) ||
      i >= gst_value_array_get_size(lanes))
    return nullptr;
  const GValue *lane = gst_value_array_get_value(lanes, i);
  return GST_VALUE_HOLDS_STRUCTURE(lane) ? gst_value_get_structure(lane)
                                         : nullptr;
}

const GstStructure *StatsLaneById(const GstStructure *stats, guint id) {
  for (guint i = 0; i < StatsLaneCount(stats); i++) {
    const GstStructure *lane = StatsLane(stats, i);
    guint got = G_MAXUINT;
    if (lane && gst_structure_get_uint(lane, "lane", &got) && got == id)
      return lane;
  }
  return nullptr;
}

void CheckRequestPadNaming(const char *factory, const char *prefix,
                           guint explicit_index) {
  GstElement *element = gst_element_factory_make(factory, nullptr);
  ASSERT_NE(element, nullptr) << factory;
  const std::string any = std::string(prefix) + "%u";
  auto name_of = [](GstPad *pad) {
    gchar *n = gst_pad_get_name(pad);
    std::string s = n;
    g_free(n);
    return s;
  };
  std::vector<GstPad *> pads;
  for (int i = 0; i < 3; i++) {
    pads.push_back(gst_element_request_pad_simple(element, any.c_str()));
    ASSERT_NE(pads.back(), nullptr);
    EXPECT_EQ(name_of(pads.back()), prefix + std::to_string(i));
  }
  gst_element_release_request_pad(element, pads[1]);
  gst_object_unref(pads[1]);
  pads[1] = gst_element_request_pad_simple(element, any.c_str());
  ASSERT_NE(pads[1], nullptr);
  EXPECT_EQ(name_of(pads[1]), std::string(prefix) + "1")
      << "the lowest free index is reused";
  const std::string explicit_name = prefix + std::to_string(explicit_index);
  GstPad *explicit_pad =
      gst_element_request_pad_simple(element, explicit_name.c_str());
  ASSERT_NE(explicit_pad, nullptr)
      << "explicit " << explicit_name << " refused";
  EXPECT_EQ(name_of(explicit_pad), explicit_name);
  pads.push_back(explicit_pad);
  GstPad *next = gst_element_request_pad_simple(element, any.c_str());
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(name_of(next), std::string(prefix) + "3");
  pads.push_back(next);
  for (GstPad *p : pads) {
    gst_element_release_request_pad(element, p);
    gst_object_unref(p);
  }
  EXPECT_EQ(element->numpads, 1) << "request pads left after release "
                                    "(only the always pad should remain)";
  gst_object_unref(element);
}

void CycleStatesWithAndWithoutPads(const char *factory,
                                   const char *pad_template) {
  for (int pads = 0; pads <= 2; pads += 2) {
    GstElement *element = gst_element_factory_make(factory, nullptr);
    ASSERT_NE(element, nullptr) << factory;
    std::vector<GstPad *> requested;
    for (int i = 0; i < pads; i++)
      requested.push_back(
          gst_element_request_pad_simple(element, pad_template));
    for (int round = 0; round < 3; round++) {
      for (GstState s : {GST_STATE_READY, GST_STATE_PAUSED, GST_STATE_PLAYING,
                         GST_STATE_PAUSED, GST_STATE_READY, GST_STATE_NULL,
                         GST_STATE_PLAYING, GST_STATE_NULL}) {
        EXPECT_NE(gst_element_set_state(element, s), GST_STATE_CHANGE_FAILURE)
            << factory << " to " << gst_element_state_get_name(s) << " with "
            << pads << " pads";
      }
    }
    for (GstPad *p : requested) {
      gst_element_release_request_pad(element, p);
      gst_object_unref(p);
    }
    gst_object_unref(element);
  }
}

guint64 StatsU64(const GstStructure *s, const char *field) {
  guint64 v = 0;
  if (!gst_structure_get_uint64(s, field, &v)) {
    ADD_FAILURE() << "no guint64 field '" << field << "' in "
                  << gst_structure_get_name(s);
    return 0;
  }
  return v;
}

guint64 SumLanesU64(const GstStructure *stats, const char *field) {
  guint64 sum = 0;
  for (guint i = 0; i < StatsLaneCount(stats); i++)
    sum += StatsU64(StatsLane(stats, i), field);
  return sum;
}

void ExpectLaneCounts(const GstStructure *lane, const LaneCounts& expected,
                      const char *file, int line) {
  if (!lane) {
    ADD_FAILURE_AT(file, line) << "no such lane in the statistics";
    return;
  }
  guint id = 0;
  const std::string label =
      gst_structure_get_uint(lane, "lane", &id)
          ? "lane " + std::to_string(id)
          : std::string("lane (no id)");
  gpufan_counts::ExpectLaneCountsAt(
      file, line, label, expected,
      [&](const gpufan_counts::LaneCountField& f) -> uint64_t {
        // The counts are guint64 but for queued and in-flight (guint).
        guint64 v64 = 0;
        guint v = 0;
        if (gst_structure_get_uint64(lane, f.stats_name, &v64))
          return v64;
        if (gst_structure_get_uint(lane, f.stats_name, &v))
          return v;
        ADD_FAILURE_AT(file, line)
            << label << ": no count field '" << f.stats_name << "'";
        return 0;
      },
      &gpufan_counts::LaneCountField::stats_name);
}

namespace {
::testing::AssertionResult CheckFields(
    const GstStructure *s,
    std::initializer_list<std::pair<const char *, GType>> fields) {
  for (const auto& [name, type] : fields) {
    const GValue *v = gst_structure_get_value(s, name);
    if (!v) {
      gchar *str = gst_structure_to_string(s);
      auto r = ::testing::AssertionFailure()
               << "field '" << name << "' missing in " << str;
      g_free(str);
      return r;
    }
    if (G_VALUE_TYPE(v) != type) {
      return ::testing::AssertionFailure()
             << "field '" << name << "' has type " << G_VALUE_TYPE_NAME(v)
             << ", expected " << g_type_name(type);
    }
  }
  return ::testing::AssertionSuccess();
}
}  // namespace

::testing::AssertionResult HasStatsShape(const GstStructure *stats,
                                         guint n_lanes) {
  if (!stats)
    return ::testing::AssertionFailure() << "no stats structure";
  if (!gst_structure_has_name(stats, "gpufan-stats"))
    return ::testing::AssertionFailure()
           << "stats structure named '" << gst_structure_get_name(stats)
           << "', expected 'gpufan-stats'";
  auto top = CheckFields(stats, {{"policy", G_TYPE_STRING},
                                 {"dispatched", G_TYPE_UINT64},
                                 {"released", G_TYPE_UINT64},
                                 {"unmatched", G_TYPE_UINT64},
                                 {"in-flight", G_TYPE_UINT},
                                 {"max-in-flight", G_TYPE_UINT},
                                 {"window-peak", G_TYPE_UINT},
                                 {"elapsed", G_TYPE_UINT64},
                                 {"lanes", GST_TYPE_ARRAY}});
  if (!top)
    return top;
  if (StatsLaneCount(stats) != n_lanes)
    return ::testing::AssertionFailure()
           << "stats has " << StatsLaneCount(stats) << " lanes, expected "
           << n_lanes;
  for (guint i = 0; i < n_lanes; i++) {
    const GstStructure *lane = StatsLane(stats, i);
    if (!lane)
      return ::testing::AssertionFailure()
             << "lanes[" << i << "] is no structure";
    if (!gst_structure_has_name(lane, "lane"))
      return ::testing::AssertionFailure()
             << "lanes[" << i << "] named '" << gst_structure_get_name(lane)
             << "'";
    auto r = CheckFields(lane, {{"lane", G_TYPE_UINT},
                                {"device", G_TYPE_STRING},
                                {"weight", G_TYPE_DOUBLE},
                                {"claimed", G_TYPE_BOOLEAN},
                                {"dispatched", G_TYPE_UINT64},
                                {"completed", G_TYPE_UINT64},
                                {"dropped", G_TYPE_UINT64},
                                {"failed", G_TYPE_UINT64},
                                {"timed-out", G_TYPE_UINT64},
                                {"late", G_TYPE_UINT64},
                                {"reorder-waits", G_TYPE_UINT64},
                                {"queued", G_TYPE_UINT},
                                {"queue-limit", G_TYPE_UINT},
                                {"in-flight", G_TYPE_UINT},
                                {"service-time", G_TYPE_UINT64},
                                {"wake-time", G_TYPE_UINT64},
                                {"fps", G_TYPE_DOUBLE},
                                {"push-time", G_TYPE_UINT64},
                                {"idle-time", G_TYPE_UINT64},
                                {"settle-time", G_TYPE_UINT64},
                                {"query-time", G_TYPE_UINT64},
                                {"output-time", G_TYPE_UINT64}});
    if (!r)
      return r << " (lanes[" << i << "])";
  }
  return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------ lane faults ---

LaneFault::LaneFault(GstElement *element, Kind kind, int64_t at, bool only)
    : element_(GST_ELEMENT(gst_object_ref(element))),
      pad_(gst_element_get_static_pad(element, "src")),
      kind_(kind),
      at_(at),
      only_(only) {
  id_ =
      gst_pad_add_probe(pad_, GST_PAD_PROBE_TYPE_BUFFER, Probe, this, nullptr);
}

LaneFault::~LaneFault() {
  Release();
  gst_pad_remove_probe(pad_, id_);
  gst_object_unref(pad_);
  gst_object_unref(element_);
}

void LaneFault::Release() {
  std::lock_guard<std::mutex> lock(mutex_);
  released_ = true;
  cond_.notify_all();
}

int64_t LaneFault::struck() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return struck_;
}

GstPadProbeReturn LaneFault::Probe(GstPad *, GstPadProbeInfo *info,
                                   gpointer data) {
  auto *self = static_cast<LaneFault *>(data);
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  const int64_t frame = PtsIndex(GST_BUFFER_PTS(buffer));
  std::unique_lock<std::mutex> lock(self->mutex_);
  if (frame < self->at_ || self->released_ ||
      (self->only_ && frame != self->at_))
    return GST_PAD_PROBE_OK;
  const bool first = self->struck_ < 0;
  if (first)
    self->struck_ = frame;
  switch (self->kind_) {
    case Kind::kBlock:
      self->cond_.wait(lock, [self] { return self->released_; });
      return GST_PAD_PROBE_OK;
    case Kind::kError:
      if (first)
        GST_ELEMENT_ERROR(self->element_, STREAM, FAILED,
                          ("injected error at frame %" G_GINT64_FORMAT, frame),
                          (nullptr));
      break;
    case Kind::kSilentError:
      break;
  }
  gst_buffer_unref(buffer);
  GST_PAD_PROBE_INFO_DATA(info) = nullptr;
  GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_ERROR;
  return GST_PAD_PROBE_HANDLED;
}

}  // namespace gpufan_test

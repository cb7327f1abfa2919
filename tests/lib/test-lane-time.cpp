// SPDX-License-Identifier: LGPL-2.1-or-later
// Where a lane's time goes (LaneTimer) and the trace of a session
// (TraceWriter). Time is a ManualClock throughout.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gpufan/lane-time.h"
#include "gpufan/session.h"
#include "tag-payload.h"

namespace gpufan {
namespace {

constexpr int64_t kMs = 1'000'000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    n++;
  return n;
}

std::string TempPath(const char *name) {
  return ::testing::TempDir() + "gpufan-" + name + "-" +
         std::to_string(::getpid()) + ".json";
}

TEST(LaneTimer, AddsEachKindApart) {
  LaneTimer timer(3, nullptr);
  timer.Add(LaneTime::kPush, 10, 40);
  timer.Add(LaneTime::kPush, 50, 60);
  timer.Add(LaneTime::kIdle, 40, 50);
  timer.Add(LaneTime::kQuery, 0, 7);
  timer.Add(LaneTime::kOutput, 9, 5);  // backwards: nothing
  const LaneTimeTotals t = timer.Totals();
  EXPECT_EQ(t[static_cast<int>(LaneTime::kPush)], 40);
  EXPECT_EQ(t[static_cast<int>(LaneTime::kIdle)], 10);
  EXPECT_EQ(t[static_cast<int>(LaneTime::kSettle)], 0);
  EXPECT_EQ(t[static_cast<int>(LaneTime::kQuery)], 7);
  EXPECT_EQ(t[static_cast<int>(LaneTime::kOutput)], 0);
  EXPECT_FALSE(timer.tracing());
}

TEST(LaneTimer, NamesAreTheStatsFields) {
  EXPECT_STREQ(LaneTimeName(LaneTime::kPush), "push");
  EXPECT_STREQ(LaneTimeName(LaneTime::kIdle), "idle");
  EXPECT_STREQ(LaneTimeName(LaneTime::kSettle), "settle");
  EXPECT_STREQ(LaneTimeName(LaneTime::kQuery), "query");
  EXPECT_STREQ(LaneTimeName(LaneTime::kOutput), "output");
}

TEST(TraceWriter, WritesCompleteTraceEventJson) {
  const std::string path = TempPath("trace");
  auto trace = std::make_shared<TraceWriter>();
  std::string error;
  ASSERT_TRUE(trace->Open(path, 1000, 7, &error)) << error;
  trace->NameLane(2);
  trace->NameLane(2);  // once
  LaneTimer timer(2, trace);
  EXPECT_TRUE(timer.tracing());
  timer.Add(LaneTime::kPush, 1000 + 2500, 1000 + 4000, 5);
  timer.Add(LaneTime::kQuery, 1000 + 4000, 1000 + 4100);
  trace->Instant(TraceWriter::OutputTrack(), "release", 1000 + 9000, 5);
  trace->Close();
  EXPECT_FALSE(timer.tracing());
  timer.Add(LaneTime::kPush, 0, 1);  // after Close: not written

  const std::string text = ReadFile(path);
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_NE(text.find("]}\n"), std::string::npos);
  EXPECT_EQ(Count(text, "\"ph\":\"X\""), 2u);
  EXPECT_EQ(Count(text, "\"ph\":\"i\""), 1u);
  EXPECT_EQ(Count(text, "\"name\":\"lane 2\""), 1u);
  EXPECT_EQ(Count(text, "\"name\":\"lane 2 out of branch\""), 1u);
  // ts and dur in microseconds from the origin; the push on the lane's
  // track, the query on its out-of-branch track
  EXPECT_NE(text.find("\"name\":\"push\",\"pid\":7,\"tid\":5,\"ts\":2.500,"
                      "\"dur\":1.500,\"args\":{\"seq\":5}}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"name\":\"query\",\"pid\":7,\"tid\":6,\"ts\":4.000,"
                      "\"dur\":0.100}"),
            std::string::npos)
      << text;
  std::remove(path.c_str());
}

TEST(TraceWriter, StopsAtItsBoundAndSaysSo) {
  const std::string path = TempPath("bound");
  TraceWriter trace;
  std::string error;
  ASSERT_TRUE(trace.Open(path, 0, 1, &error, 3)) << error;
  for (int i = 0; i < 10; i++)
    trace.Instant(TraceWriter::LaneTrack(0), "dispatch", i * kMs, i);
  EXPECT_FALSE(trace.enabled());
  trace.Close();
  const std::string text = ReadFile(path);
  EXPECT_EQ(Count(text, "\"name\":\"dispatch\""), 3u);
  EXPECT_NE(text.find("trace full: 3 events"), std::string::npos);
  EXPECT_NE(text.find("]}\n"), std::string::npos);
  std::remove(path.c_str());
}

TEST(TraceWriter, OpenFailsWithTheReason) {
  TraceWriter trace;
  std::string error;
  EXPECT_FALSE(trace.Open("/nonexistent-dir/x/trace.json", 0, 1, &error));
  EXPECT_NE(error.find("/nonexistent-dir/x/trace.json"), std::string::npos);
  EXPECT_FALSE(trace.enabled());
}

TEST(SessionLaneTime, StatsShowEachLanesTimesAndTheTraceItsItems) {
  auto clock = std::make_shared<ManualClock>(100 * kMs);
  auto session = Session::Create({}, clock);
  session->AddLane(0, Device::Cpu(0));
  session->AddLane(1, Device::Cpu(1));
  session->ClaimLane(0);
  session->ClaimLane(1);
  const std::string path = TempPath("session");
  std::string error;
  ASSERT_TRUE(session->StartTrace(path, &error)) << error;

  const Dispatch d = session->DispatchItem(0);
  ASSERT_EQ(d.status, DispatchStatus::kOk);
  ASSERT_TRUE(session->MarkStarted(d.lane, d.seq));
  std::shared_ptr<LaneTimer> timer = session->LaneTimerFor(d.lane);
  EXPECT_EQ(timer, session->LaneTimerFor(d.lane));  // one per lane
  timer->Add(LaneTime::kPush, clock->NowNs(), clock->NowNs() + 3 * kMs, d.seq);
  clock->Advance(3 * kMs);
  session->OnPushed(d.lane, d.seq, PushOutcome::kDelivered);
  session->Arrive(d.lane, d.seq, 0, P("frame"));
  EXPECT_EQ(session->TakeReady().items.size(), 1u);
  session->StopTrace();

  const SessionStats stats = session->Stats();
  for (const LaneStats& l : stats.lanes)
    EXPECT_EQ(l.time_ns[static_cast<int>(LaneTime::kPush)],
              l.lane == d.lane ? 3 * kMs : 0);

  const std::string text = ReadFile(path);
  const std::string tid = std::to_string(TraceWriter::LaneTrack(d.lane));
  const std::string out_tid = std::to_string(TraceWriter::LaneOutTrack(d.lane));
  const std::string seq = "\"args\":{\"seq\":" + std::to_string(d.seq) + "}";
  EXPECT_NE(text.find("\"name\":\"dispatch\",\"pid\":" +
                      std::to_string(session->id()) + ",\"tid\":" + tid +
                      ",\"ts\":0.000," + seq),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\"name\":\"push\",\"pid\":" + std::to_string(session->id()) +
                ",\"tid\":" + tid + ",\"ts\":0.000,\"dur\":3000.000," + seq),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\"name\":\"arrive\",\"pid\":" + std::to_string(session->id()) +
                ",\"tid\":" + out_tid + ",\"ts\":3000.000," + seq),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("\"name\":\"release\",\"pid\":" +
                      std::to_string(session->id()) + ",\"tid\":0"),
            std::string::npos)
      << text;
  EXPECT_EQ(Count(text, "\"name\":\"lane 0\""), 1u);
  EXPECT_EQ(Count(text, "\"name\":\"lane 1\""), 1u);
  std::remove(path.c_str());
}

TEST(SessionLaneTime, AnUnknownLanesTimerIsItsOwn) {
  auto session = Session::Create({}, std::make_shared<ManualClock>());
  std::shared_ptr<LaneTimer> timer = session->LaneTimerFor(9);
  ASSERT_TRUE(timer);
  timer->Add(LaneTime::kIdle, 0, 5);
  EXPECT_TRUE(session->Stats().lanes.empty());
}

}  // namespace
}  // namespace gpufan

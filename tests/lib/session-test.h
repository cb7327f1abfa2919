// SPDX-License-Identifier: LGPL-2.1-or-later
// The fixture of the Session tests (test-lib-session, test-session-*.cpp but
// -ops, -lanes, -waits and -streams, which are binaries of their own): a
// Session on a ManualClock with CPU lanes, and what left its window by name.
// Not in an anonymous namespace: every file of the binary must see one
// SessionTest (GoogleTest checks that a suite has one fixture class).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpufan/session.h"
#include "lane-stats.h"
#include "tag-payload.h"

namespace gpufan {

inline constexpr int64_t kMs = 1'000'000;

using Strings = std::vector<std::string>;

// "text@seq" for items, "-@seq" for empty entries, "text@e" for attachments.
inline Strings Describe(const std::vector<Released>& items) {
  Strings d;
  for (const Released& r : items) {
    std::string s = TagText(r);
    s += "@" + (r.lane == kNoLane ? std::string("e") : std::to_string(r.seq));
    d.push_back(s);
  }
  return d;
}

class SessionTest : public ::testing::Test {
 protected:
  void Make(SessionConfig config = {}, int lanes = 2, bool claim = true) {
    config.stall_timeout_ns =
        config.stall_timeout_ns == SessionConfig{}.stall_timeout_ns
            ? 100 * kMs
            : config.stall_timeout_ns;
    session_ = Session::Create(config, clock_);
    for (int i = 0; i < lanes; ++i) {
      session_->AddLane(static_cast<uint32_t>(i), Device::Cpu(i));
      if (claim)
        session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  // Adaptive, one claimed lane per entry of `gpus`: lane i on GPU gpus[i].
  void MakeGpuLanes(const std::vector<int>& gpus) {
    Make({}, 0);
    for (size_t i = 0; i < gpus.size(); ++i) {
      Device device;
      device.kind = DeviceKind::kCuda;
      device.index = gpus[i];
      device.name = "GPU " + std::to_string(gpus[i]);
      session_->AddLane(static_cast<uint32_t>(i), device);
      session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  // Dispatches and starts one item; expects it on `lane`.
  Dispatch Send(uint32_t lane, int64_t pts = kNoTime) {
    const std::optional<Dispatch> d = session_->TryDispatchItem(pts);
    EXPECT_TRUE(d.has_value());
    if (!d)
      return {};
    EXPECT_EQ(d->status, DispatchStatus::kOk);
    EXPECT_EQ(d->lane, lane);
    session_->MarkStarted(d->lane, d->seq);
    return *d;
  }

  Strings Take() { return Describe(session_->TakeReady().items); }

  const LaneStats& Lane(const SessionStats& s, uint32_t lane) {
    return LaneOf(s, lane);
  }

  std::shared_ptr<ManualClock> clock_ =
      std::make_shared<ManualClock>(1000 * kMs);
  std::shared_ptr<Session> session_;
};

inline SessionConfig RoundRobin() {
  SessionConfig c;
  c.policy = Policy::kRoundRobin;
  return c;
}

}  // namespace gpufan

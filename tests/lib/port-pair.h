// SPDX-License-Identifier: LGPL-2.1-or-later
// A Session as the elements see it, for the port tests (GoogleTest): the fan-out's port,
// the fan-in's it hands over, claimed lanes, round robin and a 100 ms
// stall-timeout on a ManualClock.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "gpufan/clock.h"
#include "gpufan/fanin-port.h"
#include "gpufan/fanout-port.h"

namespace gpufan {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStall = 100 * kMs;

struct PortPair {
  std::shared_ptr<ManualClock> clock =
      std::make_shared<ManualClock>(1000 * kMs);
  std::shared_ptr<FanOutPort> out;
  std::shared_ptr<FanInPort> in;

  explicit PortPair(uint32_t lanes) {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.stall_timeout_ns = kStall;
    out = FanOutPort::Create(c, clock);
    in = out->fanin_port();
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      out->AddLane(lane, Device::Cpu(static_cast<int>(lane)));
      in->ClaimLane(lane);
    }
  }
};

// A test with `kLanes` lanes, each claimed.
template <uint32_t kLanes>
class PortPairTest : public ::testing::Test {
 protected:
  PortPair ports_{kLanes};
  const std::shared_ptr<ManualClock>& clock_ = ports_.clock;
  const std::shared_ptr<FanOutPort>& out_ = ports_.out;
  const std::shared_ptr<FanInPort>& in_ = ports_.in;
};

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// A read-only view of a Session (gpufan/session.h): its statistics and the
// settings and states both elements may read. Each port (gpufan/fanout-port.h,
// gpufan/fanin-port.h) is one, plus the calls of its element.
//
// A view is a handle: it keeps the Session alive, and every method forwards
// inline to it (no virtual call, no lock of its own). Thread-safety: as the
// Session's, every method is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "gpufan/clock.h"
#include "gpufan/scheduler.h"
#include "gpufan/session.h"
#include "gpufan/stats.h"

namespace gpufan {

class StatsView {
 public:
  explicit StatsView(std::shared_ptr<Session> core) : core_(std::move(core)) {}

  uint64_t id() const { return core_->id(); }  // unique in this process
  // The Session's clock: every time a port takes or returns is on it.
  const Clock& clock() const { return core_->clock(); }
  SessionStats Stats() const { return core_->Stats(); }

  Policy policy() const { return core_->policy(); }
  uint32_t lane_queue_size() const { return core_->lane_queue_size(); }
  uint32_t max_in_flight() const { return core_->max_in_flight(); }  // 0: auto
  uint32_t EffectiveMaxInFlight() const {
    return core_->EffectiveMaxInFlight();
  }
  bool flushing() const { return core_->flushing(); }
  bool input_ended() const { return core_->input_ended(); }
  // The fan-out has several input streams (AddStream, or a dispatch of one).
  bool HasStreams() const { return core_->HasStreams(); }
  // The fan-in's output failed (FanInPort::NoteOutputFailed): the lanes'
  // pushes return that error too, and it is not theirs.
  bool output_failed() const { return core_->output_failed(); }
  // Since when every item is accounted for (delivered, proven dropped or
  // given up) after the input ended; kNoTime while that is not so.
  int64_t AccountedForSinceNs() const { return core_->AccountedForSinceNs(); }

 protected:
  Session& core() const { return *core_; }

 private:
  std::shared_ptr<Session> core_;
};

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// Input streams: one fan-out over several inputs (its request sink pads).
// They share the lanes: admission is fair between the streams that wait
// (start-time fair queueing over their weights), and each stream's items
// leave the window in that stream's order (ReorderWindow).
#include "gpufan/session.h"

#include <algorithm>
#include <utility>

namespace gpufan {

Session::Stream& Session::StreamUnlocked(uint32_t stream) {
  auto [it, added] = streams_.try_emplace(stream);
  if (added) {
    it->second.vtime = virtual_now_;
    it->second.counters.stream = stream;
  }
  return it->second;
}

namespace {

// 0: a background stream; a negative or NaN weight is the default 1.
double ValidStreamWeight(double weight) {
  return weight >= 0.0 ? weight : 1.0;
}

}  // namespace

void Session::AddStream(uint32_t stream, double weight) {
  std::lock_guard<Mutex> lock(mutex_);
  Stream& s = StreamUnlocked(stream);
  s.weight = ValidStreamWeight(weight);
  s.removed = false;
}

void Session::RemoveStream(uint32_t stream) {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end())
    return;
  // A thread still waiting for it keeps it until it leaves (see
  // DispatchItem).
  if (it->second.waiting == 0)
    streams_.erase(it);
  else
    it->second.removed = true;
  NotifyAllUnlocked();
}

void Session::SetStreamWeight(uint32_t stream, double weight) {
  std::lock_guard<Mutex> lock(mutex_);
  Stream& s = StreamUnlocked(stream);
  const double valid = ValidStreamWeight(weight);
  // Out of the background: level with the weighted streams, not behind
  // the turns it took among background streams.
  if (s.weight == 0.0 && valid > 0.0)
    s.vtime = virtual_now_;
  s.weight = valid;
  NotifyAdmitUnlocked();
}

void Session::SetStreamMaxInFlight(uint32_t stream, uint32_t limit) {
  std::lock_guard<Mutex> lock(mutex_);
  StreamUnlocked(stream).max_in_flight = limit;
  NotifyAdmitUnlocked();
}

bool Session::HasStreams() const {
  std::lock_guard<Mutex> lock(mutex_);
  return !streams_.empty();
}

bool Session::HasStream(uint32_t stream) const {
  std::lock_guard<Mutex> lock(mutex_);
  return streams_.count(stream) > 0;
}

bool Session::StreamBlockedUnlocked(const Stream& s) const {
  if (s.flushing)
    return true;
  if (s.max_in_flight > 0)
    return s.in_flight + s.at_output >= s.max_in_flight;
  // Items at its output hold no lane and no share of the session's bound,
  // but a stream whose downstream stopped must not pile them up without end.
  return s.at_output > 0 && s.at_output >= EffectiveMaxInFlightUnlocked();
}

bool Session::StreamMayDispatchUnlocked(uint32_t stream) const {
  if (stream == kMainStream)
    return true;
  auto blocked = [this](const Stream& s) { return StreamBlockedUnlocked(s); };
  auto self = streams_.find(stream);
  if (self == streams_.end() || blocked(self->second))
    return self == streams_.end();
  // Its turn: no other waiting stream that could go has a smaller virtual
  // time (ties go to the lower id). Background streams (weight 0) go only
  // while no weighted stream could, in turn among themselves.
  const bool background = self->second.weight == 0.0;
  for (const auto& [id, other] : streams_) {
    if (id == stream || other.waiting == 0 || blocked(other))
      continue;
    if (background != (other.weight == 0.0)) {
      if (background)
        return false;
      continue;
    }
    if (other.vtime < self->second.vtime ||
        (other.vtime == self->second.vtime && id < stream))
      return false;
  }
  return true;
}

void Session::CountStreamDispatchUnlocked(Outstanding& item, int64_t now_ns) {
  Stream& s = StreamUnlocked(item.stream);
  if (s.weight > 0.0) {
    virtual_now_ = std::max(virtual_now_, s.vtime);
    s.vtime += 1.0 / s.weight;
  } else {
    s.vtime += 1.0;  // turns among the background streams only
  }
  s.in_flight++;
  s.counters.dispatched++;
  if (s.first_dispatch_ns == kNoTime)
    s.first_dispatch_ns = now_ns;
}

void Session::CountStreamReleaseUnlocked(Released& released, int64_t now_ns) {
  auto it = streams_.find(released.stream);
  if (it == streams_.end())
    return;
  if (released.payload) {
    StreamStats& c = it->second.counters;
    c.delivered++;
    if (released.opened_ns != kNoTime && now_ns >= released.opened_ns) {
      const int64_t latency = now_ns - released.opened_ns;
      c.latency_total_ns += latency;
      c.max_latency_ns = std::max(c.max_latency_ns, latency);
    }
    it->second.at_output++;
    released.holds_stream_slot = true;
  } else {
    it->second.counters.lost++;
  }
}

void Session::StreamOutputDone(uint32_t stream) {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = streams_.find(stream);
  // Reset() keeps the count: the fan-in's output gives back what it held.
  if (it == streams_.end() || it->second.at_output == 0)
    return;
  it->second.at_output--;
  NotifyAdmitUnlocked();
}

void Session::AttachStreamEvent(uint32_t stream, PayloadPtr payload) {
  std::lock_guard<Mutex> lock(mutex_);
  StreamUnlocked(stream);
  // "After everything dispatched so far" is the next item's place.
  window_.AttachBefore(next_seq_, std::move(payload), stream);
  NotifyAllUnlocked();
}

void Session::FlushStream(uint32_t stream, bool start, bool tell_listener) {
  {
    std::lock_guard<Mutex> lock(mutex_);
    Stream& s = StreamUnlocked(stream);
    s.flushing = start;
    if (!start) {
      // Its items still in the branches come back late and are dropped.
      const size_t forgotten = window_.DropStream(stream);
      s.counters.flushed += forgotten;
      s.vtime = std::max(s.vtime, virtual_now_);
    }
    NotifyAllUnlocked();
  }
  if (!tell_listener)
    return;
  std::function<void(uint32_t, bool)> listener;
  {
    std::lock_guard<Mutex> lock(listener_mutex_);
    listener = stream_flush_listener_;
    if (!listener)
      return;
    stream_flush_calls_++;
  }
  listener(stream, start);
  std::lock_guard<Mutex> lock(listener_mutex_);
  if (--stream_flush_calls_ == 0)
    stream_flush_cv_.notify_all();
}

void Session::SetStreamFlushListener(
    std::function<void(uint32_t stream, bool start)> listener) {
  std::unique_lock<Mutex> lock(listener_mutex_);
  stream_flush_listener_ = std::move(listener);
  stream_flush_cv_.wait(lock, [this] { return stream_flush_calls_ == 0; });
}

void Session::CountLeakyDrop(uint32_t stream) {
  std::lock_guard<Mutex> lock(mutex_);
  StreamUnlocked(stream).counters.leaky_dropped++;
}

void Session::StreamStatsUnlocked(SessionStats *stats, int64_t now_ns) const {
  for (const auto& [id, s] : streams_) {
    StreamStats out = s.counters;
    out.stream = id;
    out.weight = s.weight;
    out.max_in_flight = s.max_in_flight;
    if (out.delivered > 0)
      out.latency_ns =
          out.latency_total_ns / static_cast<int64_t>(out.delivered);
    out.in_flight = s.in_flight;
    const int64_t elapsed =
        s.first_dispatch_ns == kNoTime ? 0 : now_ns - s.first_dispatch_ns;
    out.fps = elapsed > 0 ? static_cast<double>(out.dispatched) * 1e9 /
                                static_cast<double>(elapsed)
                          : 0.0;
    stats->streams.push_back(out);
  }
}

}  // namespace gpufan

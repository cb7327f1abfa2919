// SPDX-License-Identifier: LGPL-2.1-or-later
// The checks of gpufan-streams (what makes it a test: the meson test
// `gpufan-streams`, scripts/run-streams.sh). Pad probes hash every frame of
// a stream where it enters gpufanout (sink_k) and where it leaves gpufanin
// (src_k); at the end, each stream's output must be exactly its input:
// complete, in order, its own frames, then one EOS, with gpufanout's
// statistics of the stream agreeing. A watchdog ends a run that hangs.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace streams_check {

// One frame as a probe saw it.
struct Frame {
  guint64 pts = 0;
  guint64 hash = 0;
  bool operator==(const Frame& o) const {
    return pts == o.pts && hash == o.hash;
  }
  bool operator<(const Frame& o) const {
    return pts != o.pts ? pts < o.pts : hash < o.hash;
  }
};

// One input stream as the checks see it. `in` is written only by the
// source's streaming thread (the probe on gpufanout's sink_k), `out` only by
// gpufanin's output thread (the probe on src_k); the main thread reads them
// once those threads have stopped (the source at NULL, or the pipeline).
struct StreamRecord {
  int index = 0;
  std::string pattern;
  guint64 num_buffers = 0;
  bool added = false;    // added while playing
  bool removed = false;  // removed while playing
  guint64 in_at_removal = 0;
  bool ended_before_removal = false;

  std::vector<Frame> in, out;
  std::atomic<guint64> n_in{0}, n_out{0};
  std::atomic<bool> in_eos{false};
  std::atomic<int> out_eos{0};            // EOS events seen on src_k
  std::atomic<guint64> out_after_eos{0};  // buffers after the EOS

  GstStructure *stats = nullptr;  // its entry of gpufanout's `streams`
  bool stats_final = false;       // from the statistics at the end
};

// Records what enters the stream (a probe on gpufanout's sink_k) and what
// leaves it (on gpufanin's src_k).
void WatchInput(GstPad *fan_sink, StreamRecord *s);
void WatchOutput(GstPad *fan_src, StreamRecord *s);

// Prints a table of the streams (those added to the pipeline) and returns
// whether every check passed.
bool Report(const std::vector<const StreamRecord *>& streams);

// Ends the process when the run has not finished by its deadline, whatever
// the main thread is blocked in (a state change, a pad release, teardown):
// exit status 3, after a line per stream saying where it was.
class Watchdog {
 public:
  Watchdog(int seconds, std::vector<const StreamRecord *> streams);
  ~Watchdog();

 private:
  void Run(int seconds);

  const std::vector<const StreamRecord *> streams_;
  std::mutex mutex_;
  std::condition_variable cond_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace streams_check

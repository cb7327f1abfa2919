// SPDX-License-Identifier: LGPL-2.1-or-later
// The end-of-stream decision (docs/ordering.md, "When the stream ends"): the
// fan-in says which of its inputs have their EOS and which lane each is
// paired with; the rule, the lanes' states and stall-timeout are the
// Session's.
#include "gpufan/session.h"

namespace gpufan {

bool Session::MayEndStream(bool all_inputs_ended) const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.empty() &&
         (all_inputs_ended || accounted_since_ns_ != kNoTime);
}

EndOfStream Session::DecideEndOfStream(
    const std::vector<EosInput>& inputs) const {
  std::lock_guard<Mutex> lock(mutex_);
  EndOfStream end;
  if (inputs.empty() || !window_.empty())
    return end;
  bool all_ended = true;
  for (const EosInput& in : inputs)
    all_ended &= in.ended;
  if (all_ended) {
    end.ends = true;
    return end;
  }
  if (accounted_since_ns_ == kNoTime)
    return end;  // the input goes on: only the inputs' EOS ends it

  const int64_t now = clock_->NowNs();
  const bool any_claimed = AnyClaimedUnlocked();
  bool wait_more = false;
  for (size_t i = 0; i < inputs.size(); i++) {
    const EosInput& in = inputs[i];
    if (in.ended)
      continue;
    MissingInput missing;
    missing.input = i;
    missing.why =
        in.paired ? MissingEos::kNotInTime : MissingEos::kNeverPaired;
    auto it = in.paired ? lanes_.find(in.lane) : lanes_.end();
    if (it != lanes_.end()) {
      const Lane& l = it->second;
      const LaneHealth state = StateOfUnlocked(l, any_claimed);
      // a lane taken out of the stream sends nothing more, EOS included
      if (state == LaneHealth::kFailed)
        continue;
      if (state == LaneHealth::kStalled) {
        missing.why = MissingEos::kStalled;
        missing.stall_kind = l.stall_kind;
        missing.stalled_seq = l.stalled_seq;
        missing.stalled_ns = now - l.stalled_ns;
      }
    }
    // a stalled lane was waited for already (its head, stall-timeout)
    wait_more |= missing.why != MissingEos::kStalled;
    end.missing.push_back(missing);
  }
  // A branch may swallow EOS: the others are waited for stall-timeout.
  const int64_t deadline = accounted_since_ns_ + config_.stall_timeout_ns;
  if (wait_more && now < deadline) {
    end.missing.clear();
    end.recheck_ns = deadline;
    return end;
  }
  end.ends = true;
  return end;
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// Buffers that come back without our meta (a branch element made new ones):
// the lane and the PTS identify the item, since each lane is FIFO. With
// several input streams, items of different streams often share a PTS (their
// sources all start at 0): if the branch dropped one of them, the buffer that
// comes back could be any of them. Such a buffer waits until the lane's later
// arrivals settle it (each of those items came back, or a later item did and
// the count falls short), and one that stays ambiguous is dropped: a frame
// never leaves on another stream's pad.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "gpufan/session.h"

namespace gpufan {

namespace {

template <typename Item>
bool CandidateFor(const Item& o, int64_t pts_ns, uint64_t limit_seq) {
  return !o.replayed && o.pts_ns == pts_ns && o.seq < limit_seq;
}

}  // namespace

bool Session::MustHoldUnmarkedUnlocked(const Lane& lane, int64_t pts_ns) const {
  if (!lane.unmarked.empty())
    return true;  // it came after them: it waits behind them
  std::optional<uint32_t> stream;
  for (const Outstanding& o : lane.outstanding) {
    if (!CandidateFor(o, pts_ns, next_seq_))
      continue;
    if (stream && *stream != o.stream)
      return true;
    stream = o.stream;
  }
  return false;
}

void Session::ResolveUnmarkedUnlocked(Lane& lane, bool final) {
  auto& held = lane.unmarked;
  // A branch that duplicates frames must not make the list grow without end.
  final |= held.size() > lane.outstanding.size() + 1;
  // Indices into lane.outstanding, oldest first.
  std::vector<size_t> cands;
  while (!held.empty()) {
    Unmarked& h = held.front();
    cands.clear();
    for (size_t i = 0; i < lane.outstanding.size(); ++i)
      if (CandidateFor(lane.outstanding[i], h.pts_ns, h.limit_seq))
        cands.push_back(i);
    bool one_stream = true;
    for (size_t c : cands)
      one_stream &= lane.outstanding[c].stream ==
                    lane.outstanding[cands.front()].stream;
    // Every item any of the held buffers of its PTS can be came back (FIFO:
    // the first is the oldest), or only one stream's items can be it: the
    // oldest, as with one stream.
    size_t same_pts = 0;
    uint64_t limit = h.limit_seq;
    for (const Unmarked& u : held)
      if (u.pts_ns == h.pts_ns) {
        same_pts++;
        limit = std::max(limit, u.limit_seq);
      }
    const size_t items = static_cast<size_t>(std::count_if(
        lane.outstanding.begin(), lane.outstanding.end(),
        [&](const Outstanding& o) { return CandidateFor(o, h.pts_ns, limit); }));
    if (!cands.empty() && (one_stream || same_pts >= items)) {
      PayloadPtr payload = std::move(h.payload);
      held.pop_front();
      TakeMatchUnlocked(
          lane,
          lane.outstanding.begin() + static_cast<std::ptrdiff_t>(cands.front()),
          std::move(payload), false);
      continue;
    }
    // A later buffer came from an item after all of them: no more of them
    // will come, and which one this was cannot be told.
    bool settled = final || cands.empty();
    for (size_t i = 1; i < held.size() && !settled; i++) {
      const Unmarked& later = held[i];
      if (later.pts_ns == h.pts_ns)
        continue;
      auto first = std::find_if(
          lane.outstanding.begin(), lane.outstanding.end(),
          [&](const Outstanding& o) {
            return CandidateFor(o, later.pts_ns, later.limit_seq);
          });
      settled = first != lane.outstanding.end() &&
                first->seq > lane.outstanding[cands.back()].seq;
    }
    if (!settled)
      return;
    // It came from the first candidate or a later one: the first is gone
    // either way (dropped by the branch, or its frame is this one we drop),
    // and so is all before it. The others stay outstanding (one may still
    // come): a later match proves them dropped.
    unmatched_++;
    const size_t through = cands.empty() ? 0 : cands.front() + 1;
    held.pop_front();
    SettleFrontUnlocked(lane, through, std::nullopt, std::nullopt);
  }
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// A program built against the installed libgpufan with
// `pkg-config --cflags --libs gpufan` (tests/install/check-install.sh): three
// items come back out of order and leave the reorder window in order.
#include <cstdio>
#include <memory>
#include <vector>

#include "gpufan/reorder-window.h"

namespace {

struct Frame : gpufan::Payload {
  explicit Frame(int n) : number(n) {}
  int number;
};

}  // namespace

int main() {
  gpufan::ReorderWindow window;
  for (uint64_t seq = 0; seq < 3; seq++)
    window.Open(seq, 0, 0);
  for (int n : {2, 0, 1})
    window.Arrive(static_cast<uint64_t>(n), std::make_unique<Frame>(n));

  std::vector<gpufan::Released> out;
  window.PopSettled(out, 0);
  if (out.size() != 3) {
    std::fprintf(stderr, "released %zu items, expected 3\n", out.size());
    return 1;
  }
  for (int n = 0; n < 3; n++) {
    auto *frame = dynamic_cast<Frame *>(out[n].payload.get());
    if (!frame || frame->number != n) {
      std::fprintf(stderr, "item %d left out of order\n", n);
      return 1;
    }
  }
  std::printf("libgpufan from pkg-config: 3 items in order\n");
  return 0;
}

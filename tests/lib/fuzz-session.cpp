// SPDX-License-Identifier: LGPL-2.1-or-later
// libFuzzer harness: the fuzzer's bytes choose the session operations of
// session-ops.h; any broken invariant or leak aborts.
#include <cstdio>
#include <cstdlib>

#include "session-ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gpufan::ops;
  std::string failure;
  {
    ByteChoices choices(data, size);
    // The first byte picks one input or several streams.
    OpsRun run(choices, choices.Uniform(0, 1) == 1);
    failure = run.Run(100'000);
  }
  if (!failure.empty() || g_live_payloads != 0) {
    std::fprintf(stderr, "session invariant broken: %s (live payloads %d)\n",
                 failure.c_str(), g_live_payloads);
    std::abort();
  }
  return 0;
}

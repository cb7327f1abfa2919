// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared main of the element test binaries: GStreamer up, log policing and a
// watchdog on, the tests, then gst_deinit() so that the leaks tracer
// (GST_TRACERS=leaks, set by meson) reports; a leak makes the binary fail.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gst-test-util.h"

int main(int argc, char **argv) {
#if defined(__SANITIZE_ADDRESS__)
  // LeakSanitizer checks this process at exit. The processes GStreamer
  // starts from here inherit ASAN_OPTIONS: gst-plugin-scanner, which loads
  // every installed plugin (their one-off leaks are not ours), and
  // gst-launch-1.0 in one test. This process has read its options already.
  const char *asan = g_getenv("ASAN_OPTIONS");
  g_setenv("ASAN_OPTIONS",
           (std::string(asan ? asan : "") + ":detect_leaks=0").c_str(), TRUE);
#endif
  ::testing::InitGoogleTest(&argc, argv);
  gst_init(&argc, &argv);
  gpufan_test::InstallLogHandlers();
  gpufan_test::InstallWatchdog();

  for (const char *factory : {"gpufanout", "gpufanin"}) {
    GstElementFactory *f = gst_element_factory_find(factory);
    if (!f) {
      std::fprintf(stderr,
                   "element '%s' not found: GST_PLUGIN_PATH_1_0=%s (is the "
                   "plugin built?)\n",
                   factory,
                   g_getenv("GST_PLUGIN_PATH_1_0")
                       ? g_getenv("GST_PLUGIN_PATH_1_0")
                       : "(unset)");
    } else {
      gst_object_unref(f);
    }
  }

  int rc = RUN_ALL_TESTS();
  gpufan_test::MarkTestsDone();
  gst_deinit();

  if (gpufan_test::LeaksReported()) {
    std::fprintf(
        stderr,
        "FAIL: the leaks tracer found objects still alive at gst_deinit() "
        "(see the GST_TRACER object-alive lines above)\n");
    rc = rc ? rc : 1;
  }
  if (gpufan_test::UnexpectedLogAfterTests()) {
    std::fprintf(stderr,
                 "FAIL: warnings or criticals after the tests (see above)\n");
    rc = rc ? rc : 1;
  }
  return rc;
}

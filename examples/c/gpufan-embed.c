/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An application that embeds gpufanbin: builds a pipeline, runs it to EOS
 * and prints the lanes from the gpufan-stats message on the bus. Only
 * GStreamer is linked (pkg-config gstreamer-1.0); the elements come from the
 * plugin. Usage: gpufan-embed [FRAMES]  (exit status 1 on an error, or
 * when the lanes' frames do not add up to FRAMES). */
#include <gst/gst.h>
#include <stdlib.h>

/* Prints each lane's frames; returns their sum. */
static guint64
print_lanes (const GstStructure * stats)
{
  guint64 total = 0;
  const GValue *lanes = gst_structure_get_value (stats, "lanes");
  guint i;
  for (i = 0; lanes && i < gst_value_array_get_size (lanes); i++) {
    const GstStructure *lane =
        gst_value_get_structure (gst_value_array_get_value (lanes, i));
    guint id = 0;
    guint64 frames = 0;
    gst_structure_get_uint (lane, "lane", &id);
    gst_structure_get_uint64 (lane, "completed", &frames);
    g_print ("lane %u (%s): %" G_GUINT64_FORMAT " frames\n", id,
        gst_structure_get_string (lane, "device"), frames);
    total += frames;
  }
  return total;
}

int
main (int argc, char **argv)
{
  int frames = argc > 1 ? atoi (argv[1]) : 300, failed = 0;
  guint64 done_frames = 0;
  gchar *desc;
  GstElement *pipeline;
  GstBus *bus;
  GError *error = NULL;

  gst_init (&argc, &argv);
  desc = g_strdup_printf ("videotestsrc num-buffers=%d ! "
      "video/x-raw,width=320,height=240 ! gpufanbin devices=cpu:2 "
      "branch=\"videoflip method=horizontal-flip\" ! fakesink", frames);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  if (!pipeline) {
    g_printerr ("could not build the pipeline: %s\n", error->message);
    return 1;
  }
  bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (;;) {
    GstMessage *msg = gst_bus_timed_pop (bus, GST_CLOCK_TIME_NONE);
    const GstStructure *s = gst_message_get_structure (msg);
    gboolean done = GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS;
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
      gst_message_parse_error (msg, &error, NULL);
      g_printerr ("error: %s\n", error->message);
      g_clear_error (&error);
      failed = done = 1;
    } else if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ELEMENT && s
        && gst_structure_has_name (s, "gpufan-stats")) {
      done_frames = print_lanes (s); /* the last one is the final count */
    }
    gst_message_unref (msg);
    if (done)
      break;
  }
  if (!failed && done_frames != (guint64) frames) {
    g_printerr ("the lanes did %" G_GUINT64_FORMAT " of %d frames\n",
        done_frames, frames);
    failed = 1;
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  return failed;
}

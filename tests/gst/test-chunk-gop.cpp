// SPDX-License-Identifier: LGPL-2.1-or-later
// chunk=keyframes on open GOPs (issue 24, item 4): chunks are cut only where
// they decode alone (an IDR picture for H.264/H.265), so decoding through
// gpufanout's chunk lanes (two CPU lanes of the same decoder) is
// bit-identical to one decoder: every frame's md5 (visible pixels), the
// frame count and their order. Inputs: x264 open GOP with B-frames (whose I
// pictures h264parse flags as keyframes), closed GOP, B-pyramid, the open
// GOP as avc (length-prefixed), and x265 with CRA pictures (open GOP). Where
// a stream has no clean cut for 4 x chunk-frames, gpufanout warns once.
#include <glib/gstdio.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr const char *kHour = "3600000000000";
constexpr int kFrames = 180;

// Each decoded frame at a pad: its PTS and the md5 of its visible pixels
// (row by row, whatever the strides of the decoder's pool).
struct Frames {
  std::mutex mutex;
  std::vector<GstClockTime> pts;
  std::vector<std::string> md5;

  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<Frames *>(user_data);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    const std::string sum = VisibleMd5(pad, buffer);
    std::lock_guard<std::mutex> lk(self->mutex);
    self->pts.push_back(GST_BUFFER_PTS(buffer));
    self->md5.push_back(sum);
    return GST_PAD_PROBE_OK;
  }
};

struct Codec {
  const char *encoder;  // factory
  const char *decoder;
  const char *parser;
  const char *caps;  // the file's caps (byte-stream)
};
const Codec kH264{"x264enc", "avdec_h264", "h264parse",
                  "video/x-h264,stream-format=byte-stream"};
const Codec kH265{"x265enc", "avdec_h265", "h265parse",
                  "video/x-h265,stream-format=byte-stream"};

class ChunkGop : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!path_.empty())
      g_unlink(path_.c_str());
  }

  // Skips unless the codec's encoder, parser and decoder are there.
  bool Available(const Codec& codec) {
    for (const char *name : {codec.encoder, codec.decoder, codec.parser}) {
      GstPluginFeature *f =
          gst_registry_lookup_feature(gst_registry_get(), name);
      if (!f)
        return false;
      gst_object_unref(f);
    }
    return true;
  }

  // Encodes kFrames of moving video with @encoder into a file of its own.
  void Encode(const Codec& codec, const std::string& encoder) {
    gchar *name = nullptr;
    gint fd = g_file_open_tmp("gpufan-gop-XXXXXX.es", &name, nullptr);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
    g_free(name);
    LaunchedPipeline p(
        "videotestsrc pattern=ball num-buffers=" + std::to_string(kFrames) +
        " ! video/x-raw,format=I420,width=128,height=96,framerate=30/1 ! " +
        encoder + " ! " + codec.caps + " ! filesink location=" + path_);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.PlayToEos());
  }

  // Decodes the file with one decoder.
  void DecodeAlone(const Codec& codec, const std::string& parse, Frames *out) {
    LaunchedPipeline p("filesrc location=" + path_ + " ! " + parse + " ! " +
                       codec.decoder + " ! fakesink name=out sync=false");
    ASSERT_TRUE(p.ok());
    p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, &Frames::Probe, out);
    ASSERT_TRUE(p.PlayToEos());
  }

  // Decodes the file through gpufanout chunk=keyframes over two lanes of
  // the same decoder; the number of "no clean cut" warnings.
  void DecodeInChunks(const Codec& codec, const std::string& parse,
                      int chunk_frames, Frames *out, size_t *warnings) {
    const std::string lane = std::string("queue ! ") + codec.decoder;
    LaunchedPipeline p(
        "filesrc location=" + path_ + " ! " + parse +
        " ! gpufanout name=f devices=cpu:2 chunk=keyframes chunk-frames=" +
        std::to_string(chunk_frames) + "  gpufanin name=m stall-timeout=" +
        kHour + " ! fakesink name=out sync=false  f.src_0 ! " + lane +
        " ! m.sink_0  f.src_1 ! " + lane + " ! m.sink_1");
    ASSERT_TRUE(p.ok());
    p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, &Frames::Probe, out);
    ASSERT_TRUE(p.PlayToEos());
    *warnings = p.bus().Count([](GstMessage *m) {
      return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
             BusLog::ErrorText(m).find("No clean cut point") !=
                 std::string::npos;
    });
  }

  // The whole check: chunked output equals one decoder's, frame by frame,
  // for each chunk-frames; the warning where expected.
  void CheckIdentical(const Codec& codec, const std::string& encoder,
                      bool expect_warning, const std::string& parse_caps = "") {
    if (!Available(codec))
      GTEST_SKIP() << codec.encoder << ", " << codec.parser << " or "
                   << codec.decoder << " is not installed";
    ASSERT_NO_FATAL_FAILURE(Encode(codec, encoder));
    const std::string parse = std::string(codec.parser) +
                              (parse_caps.empty() ? "" : " ! ") + parse_caps;
    Frames alone;
    ASSERT_NO_FATAL_FAILURE(DecodeAlone(codec, parse, &alone));
    ASSERT_EQ(alone.md5.size(), static_cast<size_t>(kFrames));
    for (int chunk_frames : {1, 30}) {
      SCOPED_TRACE("chunk-frames=" + std::to_string(chunk_frames));
      Frames chunked;
      size_t warnings = 0;
      ASSERT_NO_FATAL_FAILURE(
          DecodeInChunks(codec, parse, chunk_frames, &chunked, &warnings));
      ASSERT_EQ(chunked.md5.size(), alone.md5.size());
      int moved = 0, differ = 0;
      for (size_t i = 0; i < alone.md5.size(); i++) {
        if (chunked.pts[i] != alone.pts[i] && moved++ < 3)
          ADD_FAILURE() << "frame " << i << " has PTS " << chunked.pts[i]
                        << ", one decoder's " << alone.pts[i];
        if (chunked.md5[i] != alone.md5[i] && differ++ < 3)
          ADD_FAILURE() << "frame " << i << " decodes differently";
      }
      EXPECT_EQ(moved, 0) << "frames out of order or missing";
      EXPECT_EQ(differ, 0) << "frames that decode differently";
      EXPECT_EQ(warnings, expect_warning ? 1u : 0u);
    }
  }

  std::string path_;
};

}  // namespace

// x264's open GOP: I pictures every 30 frames are non-IDR (a recovery point
// SEI), and the B-frames after each reference the GOP before. Only the
// first picture is an IDR: one chunk, and the warning.
TEST_F(ChunkGop, H264OpenGopIsIdenticalToOneDecoder) {
  CheckIdentical(kH264,
                 "x264enc speed-preset=superfast threads=1 bframes=3 "
                 "key-int-max=30 option-string=open-gop=1",
                 true);
}

// The same open-GOP stream as avc (NAL units with length prefixes).
TEST_F(ChunkGop, H264OpenGopAsAvcIsIdenticalToOneDecoder) {
  CheckIdentical(kH264,
                 "x264enc speed-preset=superfast threads=1 bframes=3 "
                 "key-int-max=30 option-string=open-gop=1",
                 true, "video/x-h264,stream-format=avc,alignment=au");
}

// Closed GOPs: an IDR every 30 frames, each a cut.
TEST_F(ChunkGop, H264ClosedGopIsIdenticalToOneDecoder) {
  CheckIdentical(kH264,
                 "x264enc speed-preset=superfast threads=1 bframes=3 "
                 "key-int-max=30",
                 false);
}

TEST_F(ChunkGop, H264BPyramidIsIdenticalToOneDecoder) {
  CheckIdentical(kH264,
                 "x264enc speed-preset=superfast threads=1 bframes=3 "
                 "b-pyramid=true key-int-max=30",
                 false);
}

// x265's open GOP: CRA pictures every 30 frames with RASL pictures that
// reference the GOP before.
TEST_F(ChunkGop, H265CraIsIdenticalToOneDecoder) {
  CheckIdentical(kH265,
                 "x265enc speed-preset=superfast "
                 "option-string=\"open-gop=1:keyint=30:min-keyint=30:"
                 "bframes=3:frame-threads=1:pools=none\"",
                 true);
}

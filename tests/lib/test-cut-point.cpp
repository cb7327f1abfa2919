// SPDX-License-Identifier: LGPL-2.1-or-later
// The clean-cut scanner (gpufan/cut-point.h) on crafted access units:
// Annex B with 3- and 4-byte start codes, length-prefixed (avc, hvc),
// open-GOP I pictures (SEI + non-IDR I slice, H.265 CRA), truncated and
// garbage input.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpufan/cut-point.h"

using gpufan::IsIdrAccessUnit;
using gpufan::NalLengthSize;
using gpufan::VideoCodec;

namespace {

using Bytes = std::vector<uint8_t>;

// NAL units as a byte stream, the first with a 4-byte start code and the
// rest with 3-byte ones.
Bytes AnnexB(const std::vector<Bytes>& nals) {
  Bytes out;
  bool first = true;
  for (const Bytes& nal : nals) {
    if (first)
      out.push_back(0);
    first = false;
    out.insert(out.end(), {0, 0, 1});
    out.insert(out.end(), nal.begin(), nal.end());
  }
  return out;
}

// NAL units each prefixed by its length in @size bytes.
Bytes Prefixed(const std::vector<Bytes>& nals, unsigned size) {
  Bytes out;
  for (const Bytes& nal : nals) {
    for (unsigned b = size; b-- > 0;)
      out.push_back(static_cast<uint8_t>(nal.size() >> (8 * b)));
    out.insert(out.end(), nal.begin(), nal.end());
  }
  return out;
}

bool Idr(VideoCodec codec, const Bytes& b, unsigned nal_length_size) {
  return IsIdrAccessUnit(codec, b.data(), b.size(), nal_length_size);
}

// H.264 NAL units (nal_ref_idc 3 where a reference).
const Bytes kAud264 = {0x09, 0xf0};
const Bytes kSps264 = {0x67, 0x64, 0x00, 0x1f, 0xac};
const Bytes kPps264 = {0x68, 0xee, 0x3c, 0x80};
const Bytes kSei264 = {0x06, 0x06, 0x01, 0xc4, 0x80};  // recovery point
const Bytes kIdr264 = {0x65, 0x88, 0x84, 0x00, 0x33};
const Bytes kISlice264 = {0x61, 0x88, 0x84, 0x00, 0x33};  // non-IDR
const Bytes kBSlice264 = {0x01, 0x9e, 0x00, 0x00, 0x03, 0x01};

// H.265 NAL units (two-byte headers).
const Bytes kVps265 = {0x40, 0x01, 0x0c, 0x01};
const Bytes kSps265 = {0x42, 0x01, 0x01, 0x01};
const Bytes kPps265 = {0x44, 0x01, 0xc1, 0x72};
const Bytes kSei265 = {0x4e, 0x01, 0x05, 0x10};
const Bytes kIdrWRadl = {0x26, 0x01, 0xaf, 0x08};  // 19
const Bytes kIdrNLp = {0x28, 0x01, 0xaf, 0x08};    // 20
const Bytes kCra = {0x2a, 0x01, 0xaf, 0x08};       // 21
const Bytes kBlaWLp = {0x20, 0x01, 0xaf, 0x08};    // 16
const Bytes kTrail = {0x02, 0x01, 0xd0, 0x08};     // TRAIL_R
const Bytes kRasl = {0x10, 0x01, 0xd0, 0x08};      // RASL_R

}  // namespace

TEST(CutPoint, H264ByteStreamIdrWithHeaders) {
  EXPECT_TRUE(Idr(VideoCodec::kH264,
                  AnnexB({kAud264, kSps264, kPps264, kSei264, kIdr264}), 0));
  // 3-byte start codes only
  Bytes b = AnnexB({kIdr264});
  EXPECT_TRUE(Idr(VideoCodec::kH264, Bytes(b.begin() + 1, b.end()), 0));
  // 4-byte start codes everywhere
  Bytes four = {0, 0, 0, 1};
  four.insert(four.end(), kSps264.begin(), kSps264.end());
  four.insert(four.end(), {0, 0, 0, 1});
  four.insert(four.end(), kIdr264.begin(), kIdr264.end());
  EXPECT_TRUE(Idr(VideoCodec::kH264, four, 0));
}

TEST(CutPoint, H264OpenGopIPictureIsNoCut) {
  // an open GOP's I frame: recovery point SEI and a non-IDR I slice
  EXPECT_FALSE(
      Idr(VideoCodec::kH264, AnnexB({kAud264, kSei264, kISlice264}), 0));
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({kBSlice264}), 0));
  // the first VCL NAL unit decides
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({kISlice264, kIdr264}), 0));
  // headers alone are no picture
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({kSps264, kPps264}), 0));
}

TEST(CutPoint, H264LengthPrefixed) {
  for (unsigned size : {1u, 2u, 4u}) {
    EXPECT_TRUE(
        Idr(VideoCodec::kH264, Prefixed({kSei264, kIdr264}, size), size))
        << size;
    EXPECT_FALSE(
        Idr(VideoCodec::kH264, Prefixed({kSei264, kISlice264}, size), size))
        << size;
  }
  // a byte stream read as length-prefixed is garbage, not a cut
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({kBSlice264}), 4));
}

TEST(CutPoint, TruncatedAndGarbageInput) {
  EXPECT_FALSE(IsIdrAccessUnit(VideoCodec::kH264, nullptr, 0, 0));
  EXPECT_FALSE(IsIdrAccessUnit(VideoCodec::kH264, nullptr, 0, 4));
  const Bytes whole = Prefixed({kSei264, kIdr264}, 4);
  // every prefix: never a read past the end (ASan), and no IDR before its
  // NAL unit is complete
  for (size_t n = 0; n < whole.size(); n++)
    EXPECT_FALSE(
        Idr(VideoCodec::kH264, Bytes(whole.begin(), whole.begin() + n), 4))
        << n;
  const Bytes annexb = AnnexB({kSps264, kIdr264});
  for (size_t n = 0; n <= annexb.size(); n++) {
    Bytes part(annexb.begin(), annexb.begin() + n);
    // the IDR's header byte is its first: from there on it is one
    const bool has_header = n > annexb.size() - kIdr264.size();
    EXPECT_EQ(Idr(VideoCodec::kH264, part, 0), has_header) << n;
  }
  // a length past the end
  Bytes bad = {0x00, 0x00, 0x10, 0x00, 0x65, 0x88};
  EXPECT_FALSE(Idr(VideoCodec::kH264, bad, 4));
  // a zero length
  EXPECT_FALSE(Idr(VideoCodec::kH264, Bytes{0, 0, 0, 0, 0x65}, 4));
  // forbidden_zero_bit set: not a NAL unit
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({{0xe5, 0x88}}), 0));
  // zeros and noise
  EXPECT_FALSE(Idr(VideoCodec::kH264, Bytes(64, 0), 0));
  EXPECT_FALSE(Idr(VideoCodec::kH264, Bytes(64, 0xff), 2));
  // an unsupported length size
  EXPECT_FALSE(Idr(VideoCodec::kH264, Prefixed({kIdr264}, 4), 5));
}

TEST(CutPoint, H265IdrOnly) {
  EXPECT_TRUE(Idr(VideoCodec::kH265,
                  AnnexB({kVps265, kSps265, kPps265, kSei265, kIdrWRadl}), 0));
  EXPECT_TRUE(Idr(VideoCodec::kH265, AnnexB({kIdrNLp}), 0));
  // CRA (with or without RASL pictures after it), BLA: not counted
  EXPECT_FALSE(Idr(VideoCodec::kH265, AnnexB({kVps265, kSps265, kCra}), 0));
  EXPECT_FALSE(Idr(VideoCodec::kH265, AnnexB({kBlaWLp}), 0));
  EXPECT_FALSE(Idr(VideoCodec::kH265, AnnexB({kTrail}), 0));
  EXPECT_FALSE(Idr(VideoCodec::kH265, AnnexB({kRasl}), 0));
  EXPECT_TRUE(Idr(VideoCodec::kH265, Prefixed({kSei265, kIdrWRadl}, 4), 4));
  EXPECT_FALSE(Idr(VideoCodec::kH265, Prefixed({kSei265, kCra}, 4), 4));
  // a one-byte H.265 header is cut short
  EXPECT_FALSE(Idr(VideoCodec::kH265, Bytes{0, 0, 1, 0x26}, 0));
  // the same bytes are an H.264 IDR only where they say so
  EXPECT_FALSE(Idr(VideoCodec::kH264, AnnexB({kIdrWRadl}), 0));
  EXPECT_FALSE(Idr(VideoCodec::kOther, AnnexB({kIdr264}), 0));
}

TEST(CutPoint, NalLengthSizeFromCodecData) {
  const Bytes avcc = {0x01, 0x64, 0x00, 0x1f, 0xff, 0xe1, 0x00};
  EXPECT_EQ(NalLengthSize(VideoCodec::kH264, avcc.data(), avcc.size()), 4u);
  Bytes avcc2 = avcc;
  avcc2[4] = 0xfd;
  EXPECT_EQ(NalLengthSize(VideoCodec::kH264, avcc2.data(), avcc2.size()), 2u);
  EXPECT_EQ(NalLengthSize(VideoCodec::kH264, avcc.data(), 4), 0u);
  Bytes hvcc(23, 0);
  hvcc[0] = 1;
  hvcc[21] = 0x0f;
  EXPECT_EQ(NalLengthSize(VideoCodec::kH265, hvcc.data(), hvcc.size()), 4u);
  EXPECT_EQ(NalLengthSize(VideoCodec::kH265, hvcc.data(), 22), 0u);
  EXPECT_EQ(NalLengthSize(VideoCodec::kH264, nullptr, 0), 0u);
  EXPECT_EQ(NalLengthSize(VideoCodec::kOther, avcc.data(), avcc.size()), 0u);
}

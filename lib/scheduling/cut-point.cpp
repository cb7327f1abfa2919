// SPDX-License-Identifier: LGPL-2.1-or-later
// Clean cut points in H.264/H.265 access units (gpufan/cut-point.h).
#include "gpufan/cut-point.h"

namespace gpufan {

namespace {

enum class Nal { kNotVcl, kIdr, kOtherVcl };

// What the NAL unit whose header starts at @header (@left bytes there) is.
Nal Classify(VideoCodec codec, const uint8_t *header, size_t left) {
  if (codec == VideoCodec::kH264) {
    if (left < 1 || (header[0] & 0x80))  // forbidden_zero_bit
      return Nal::kNotVcl;
    const unsigned type = header[0] & 0x1f;
    if (type == 5)
      return Nal::kIdr;
    return type >= 1 && type <= 4 ? Nal::kOtherVcl : Nal::kNotVcl;
  }
  if (left < 2 || (header[0] & 0x80))
    return Nal::kNotVcl;
  const unsigned type = (header[0] >> 1) & 0x3f;
  if (type == 19 || type == 20)
    return Nal::kIdr;
  return type <= 31 ? Nal::kOtherVcl : Nal::kNotVcl;
}

}  // namespace

bool IsIdrAccessUnit(VideoCodec codec, const uint8_t *bytes, size_t size,
                     unsigned nal_length_size) {
  if (codec == VideoCodec::kOther || !bytes || nal_length_size > 4)
    return false;
  if (nal_length_size == 0) {
    // Annex B: a NAL unit follows each 00 00 01 (a 4-byte start code ends
    // with one); emulation prevention keeps it out of NAL payloads.
    for (size_t i = 0; i + 3 < size; i++) {
      if (bytes[i] != 0 || bytes[i + 1] != 0 || bytes[i + 2] != 1)
        continue;
      const Nal nal = Classify(codec, bytes + i + 3, size - i - 3);
      if (nal != Nal::kNotVcl)
        return nal == Nal::kIdr;
      i += 2;
    }
    return false;
  }
  size_t at = 0;
  while (size - at > nal_length_size) {
    size_t length = 0;
    for (unsigned b = 0; b < nal_length_size; b++)
      length = (length << 8) | bytes[at + b];
    at += nal_length_size;
    if (length == 0 || length > size - at)
      return false;  // garbage, or cut short
    const Nal nal = Classify(codec, bytes + at, length);
    if (nal != Nal::kNotVcl)
      return nal == Nal::kIdr;
    at += length;
  }
  return false;
}

unsigned NalLengthSize(VideoCodec codec, const uint8_t *codec_data,
                       size_t size) {
  if (!codec_data)
    return 0;
  if (codec == VideoCodec::kH264 && size >= 7)
    return (codec_data[4] & 0x03) + 1;
  if (codec == VideoCodec::kH265 && size >= 23)
    return (codec_data[21] & 0x03) + 1;
  return 0;
}

}  // namespace gpufan

// SPDX-License-Identifier: LGPL-2.1-or-later
// Where an encoded stream can be cut so that what follows decodes alone
// (chunk mode's clean cut points): an access unit whose first picture is an
// IDR. A pure byte scanner, no GStreamer.
//
//   H.264: the first VCL NAL unit (types 1-5) is an IDR slice (type 5).
//   H.265: the first VCL NAL unit (types 0-31) is IDR_W_RADL (19) or
//          IDR_N_LP (20). CRA (21) and BLA (16-18) are not counted: a CRA's
//          RASL pictures reference the previous GOP (H.265's open GOP).
// An open GOP's I picture (H.264 non-IDR I slice with a recovery point SEI)
// is not a clean cut: the B pictures that follow it in decoding order
// reference the GOP before.
//
// The scanner never reads outside [bytes, bytes + size): a NAL unit whose
// length prefix runs past the end, or data without a NAL header, is not a
// cut point.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpufan/prelude.h"

namespace gpufan {

enum class VideoCodec { kOther, kH264, kH265 };

// Whether the access unit in @bytes starts with an IDR picture.
// @nal_length_size 0: Annex B byte stream (3- or 4-byte start codes);
// 1-4: each NAL unit is prefixed by its big-endian length of that many
// bytes (avc/avc3, hvc1/hev1). kOther is never an IDR.
GPUFAN_API bool IsIdrAccessUnit(VideoCodec codec, const uint8_t *bytes,
                                size_t size, unsigned nal_length_size);

// The NAL length size (1-4) that codec_data gives for length-prefixed
// streams: avcC's lengthSizeMinusOne (byte 4) for H.264, hvcC's (byte 21)
// for H.265. 0 where codec_data is too short or not of that codec.
GPUFAN_API unsigned NalLengthSize(VideoCodec codec, const uint8_t *codec_data,
                                  size_t size);

}  // namespace gpufan

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where keyframes mode may cut a chunk: only where what follows decodes
 * alone. A parser's keyframe (no DELTA_UNIT) is not always one: h264parse
 * flags an open GOP's I picture (a non-IDR I slice with a recovery point
 * SEI) as a keyframe, and the B pictures after it reference the GOP before.
 * So for H.264 and H.265 in access units the buffer is scanned for an IDR
 * picture (gpufan/cut-point.h); other caps keep the flag. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <cstring>

using namespace fanout;

CutRule
fanout::cut_rule_from_caps (GstCaps * caps)
{
  CutRule rule;
  if (!caps || gst_caps_get_size (caps) < 1)
    return rule;
  const GstStructure * s = gst_caps_get_structure (caps, 0);
  gpufan::VideoCodec codec;
  const char * length_prefixed[2];
  if (gst_structure_has_name (s, "video/x-h264")) {
    codec = gpufan::VideoCodec::kH264;
    length_prefixed[0] = "avc";
    length_prefixed[1] = "avc3";
  } else if (gst_structure_has_name (s, "video/x-h265")) {
    codec = gpufan::VideoCodec::kH265;
    length_prefixed[0] = "hvc1";
    length_prefixed[1] = "hev1";
  } else {
    return rule;
  }
  /* a buffer must be a whole access unit */
  const char * alignment = gst_structure_get_string (s, "alignment");
  if (alignment && strcmp (alignment, "au") != 0)
    return rule;
  const GValue * codec_data = gst_structure_get_value (s, "codec_data");
  const char * format = gst_structure_get_string (s, "stream-format");
  if (!format)
    format = codec_data ? length_prefixed[0] : "byte-stream";
  guint nal_length_size;
  if (strcmp (format, "byte-stream") == 0) {
    nal_length_size = 0;
  } else if (strcmp (format, length_prefixed[0]) == 0
      || strcmp (format, length_prefixed[1]) == 0) {
    nal_length_size = 4; /* without codec_data: the usual size */
    if (codec_data && G_VALUE_HOLDS (codec_data, GST_TYPE_BUFFER)) {
      GstMapInfo map;
      GstBuffer * buffer = gst_value_get_buffer (codec_data);
      if (buffer && gst_buffer_map (buffer, &map, GST_MAP_READ)) {
        const unsigned size = gpufan::NalLengthSize (codec, map.data, map.size);
        gst_buffer_unmap (buffer, &map);
        if (size == 0)
          return rule; /* unreadable codec_data: keep the flag */
        nal_length_size = size;
      }
    }
  } else {
    return rule;
  }
  rule.codec = codec;
  rule.nal_length_size = nal_length_size;
  return rule;
}

bool
fanout::is_clean_cut (const CutRule & rule, GstBuffer * buffer)
{
  if (rule.codec == gpufan::VideoCodec::kOther)
    return !GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  GstMapInfo map;
  if (!gst_buffer_map (buffer, &map, GST_MAP_READ))
    return false;
  const bool idr = gpufan::IsIdrAccessUnit (rule.codec, map.data, map.size,
      rule.nal_length_size);
  gst_buffer_unmap (buffer, &map);
  return idr;
}

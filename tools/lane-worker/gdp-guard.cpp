/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gdp-guard.h"

#include <algorithm>
#include <cstring>

bool
GdpGuard::Feed (const uint8_t * data, size_t size)
{
  if (!error_.empty ())
    return false;
  while (size > 0) {
    if (payload_left_ > 0) {
      const size_t n = (size_t) std::min<uint64_t> (payload_left_, size);
      payload_left_ -= n;
      data += n;
      size -= n;
      continue;
    }
    const size_t n = std::min (kHeaderLength - header_have_, size);
    memcpy (header_ + header_have_, data, n);
    header_have_ += n;
    data += n;
    size -= n;
    if (header_have_ < kHeaderLength)
      break;
    header_have_ = 0;
    /* GDP 1.0: major, minor version in the first two bytes */
    if (header_[0] != 1 || header_[1] != 0) {
      error_ = "packet " + std::to_string (packets_)
          + " is not a GDP 1.0 header (version "
          + std::to_string (header_[0]) + "." + std::to_string (header_[1])
          + ")";
      return false;
    }
    const uint32_t length = ((uint32_t) header_[6] << 24)
        | ((uint32_t) header_[7] << 16) | ((uint32_t) header_[8] << 8)
        | header_[9];
    if (length > max_payload_) {
      error_ = "GDP packet " + std::to_string (packets_) + " announces "
          + std::to_string (length) + " bytes, more than the limit of "
          + std::to_string (max_payload_) + " (--max-packet)";
      return false;
    }
    payload_left_ = length;
    packets_++;
  }
  return true;
}

void
GdpGuard::Reset ()
{
  header_have_ = 0;
  payload_left_ = 0;
  packets_ = 0;
  error_.clear ();
}

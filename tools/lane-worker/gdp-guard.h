/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A bound on what one client can make the worker hold: gdpdepay collects a
 * GDP packet's whole payload before it looks at it, and the length comes
 * from the wire (4 GiB at most). The guard follows the packet framing of
 * the byte stream (62-byte headers, the payload length at byte 6) and
 * refuses a packet longer than the limit before gdpdepay sees it.
 * Not thread-safe: one streaming thread feeds it, the main thread resets
 * it while the pipeline is stopped. */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

class GdpGuard {
 public:
  static constexpr size_t kHeaderLength = 62;

  explicit GdpGuard (uint32_t max_payload) : max_payload_ (max_payload) {}

  /* false once the stream broke the bound; error() says how */
  bool Feed (const uint8_t * data, size_t size);
  void Reset ();
  const std::string & error () const { return error_; }

 private:
  uint32_t max_payload_;
  uint8_t header_[kHeaderLength] = {};
  size_t header_have_ = 0;
  uint64_t payload_left_ = 0;
  uint64_t packets_ = 0;
  std::string error_;
};

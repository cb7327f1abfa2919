// SPDX-License-Identifier: LGPL-2.1-or-later
// What the reorder window carries. The library never looks inside: the
// GStreamer glue derives from Payload to hold buffers and events.
#pragma once

#include <memory>

namespace gpufan {

struct Payload {
  virtual ~Payload() = default;
};

using PayloadPtr = std::unique_ptr<Payload>;

}  // namespace gpufan

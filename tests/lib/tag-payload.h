// SPDX-License-Identifier: LGPL-2.1-or-later
// A payload that is a name, for the window and session tests: what left the
// window is checked by name.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "gpufan/payload.h"
#include "gpufan/reorder-window.h"

namespace gpufan {

struct Tag : Payload {
  explicit Tag(std::string t) : text(std::move(t)) {}
  std::string text;
};

inline PayloadPtr P(const std::string& text) {
  return std::make_unique<Tag>(text);
}

// The name of what left, "-" for an empty entry (dropped or given up).
inline std::string TagText(const Released& r) {
  return r.payload ? static_cast<const Tag *>(r.payload.get())->text : "-";
}

}  // namespace gpufan

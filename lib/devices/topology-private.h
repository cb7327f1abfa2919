// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared by the Topology back ends (topology-hwloc.cpp, topology-none.cpp).
#pragma once

#include <cstddef>

namespace gpufan {
namespace detail {

// Ordinary page-aligned anonymous memory, for when nothing can bind it.
// Throws std::bad_alloc.
void *MapPages(size_t bytes);
void UnmapPages(void *p, size_t bytes);

}  // namespace detail
}  // namespace gpufan

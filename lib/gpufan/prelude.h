// SPDX-License-Identifier: LGPL-2.1-or-later
// Export macro for libgpufan's public API (set by the BUILDING_GPUFAN define).
#pragma once

#if defined(BUILDING_GPUFAN) && defined(__GNUC__)
#define GPUFAN_API __attribute__((visibility("default")))
#else
#define GPUFAN_API
#endif

// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA back end in a build without the ffnvcodec headers (chosen by
// lib/meson.build instead of cuda.cpp): the same API, and every entry says
// why there is no GPU.
#include <stdexcept>

#include "cuda-driver-private.h"

namespace gpufan {
namespace cuda {

using internal::kNotBuilt;

bool Available(std::string *why_not) {
  if (why_not != nullptr)
    *why_not = kNotBuilt;
  return false;
}

std::vector<Device> Discover(std::string *why_none) {
  if (why_none != nullptr)
    *why_none = kNotBuilt;
  return {};
}

uint64_t FreeMemory(int) {
  throw Error(kNotBuilt);
}

std::string StickyError(int) {
  return "";
}

void RegisterHost(void *, size_t) {
  throw Error(kNotBuilt);
}

void UnregisterHost(void *) {
  throw Error(kNotBuilt);
}

bool EnablePeerAccess(int, int) {
  return false;
}

void CopyPlanesOnDevice(int, void *, const std::vector<Plane2D>&) {
  throw Error(kNotBuilt);
}

void CopyPlanesViaHost(int, void *, int, void *, void *,
                       const std::vector<Plane2D>&) {
  throw Error(kNotBuilt);
}

std::shared_ptr<PrimaryContext> PrimaryContext::Retain(int) {
  throw Error(kNotBuilt);
}

// Never constructed in this build.
PrimaryContext::~PrimaryContext() = default;

PrimaryContext::ScopedPush::ScopedPush(const PrimaryContext&) {
  throw Error(kNotBuilt);
}

PrimaryContext::ScopedPush::~ScopedPush() = default;

std::shared_ptr<StreamPool> StreamPool::ForDevice(int, size_t max_streams) {
  if (max_streams == 0)
    throw std::invalid_argument("StreamPool: max_streams must be at least 1");
  throw Error(kNotBuilt);
}

// Never constructed in this build.
StreamPool::~StreamPool() = default;

StreamPool::Stream StreamPool::Acquire() {
  throw Error(kNotBuilt);
}

}  // namespace cuda
}  // namespace gpufan

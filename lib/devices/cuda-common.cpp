// SPDX-License-Identifier: LGPL-2.1-or-later
// The parts of the CUDA back end that need no driver: the error type and the
// pure formatting functions. Built with and without CUDA.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "cuda-driver-private.h"

namespace gpufan {
namespace cuda {

Error::Error(int code, std::string name, const std::string& description,
             std::string call, std::string file, int line)
    : std::runtime_error(
          internal::FormatCallError(code, name.c_str(), description.c_str(),
                                    call.c_str(), file.c_str(), line)),
      code_(code),
      name_(std::move(name)),
      call_(std::move(call)),
      file_(std::move(file)),
      line_(line) {}

Error::Error(const std::string& message) : std::runtime_error(message) {}

size_t PlaneBytes(const std::vector<Plane2D>& planes) {
  size_t bytes = 0;
  for (const Plane2D& plane : planes)
    bytes += plane.width_bytes * plane.height;
  return bytes;
}

namespace {

class HostPinner : public Pinner {
 public:
  void Pin(void *p, size_t bytes) override { RegisterHost(p, bytes); }
  void Unpin(void *p) override { UnregisterHost(p); }
};

}  // namespace

std::shared_ptr<Pinner> MakeHostPinner() {
  if (!Available())
    return nullptr;
  return std::make_shared<HostPinner>();
}

// StreamPool bookkeeping: the same with or without a driver.

StreamPool::Stream::Stream(std::shared_ptr<StreamPool> pool, void *stream)
    : pool_(std::move(pool)), stream_(stream) {}

StreamPool::Stream::Stream(Stream&& other) noexcept
    : pool_(std::move(other.pool_)), stream_(other.stream_) {
  other.stream_ = nullptr;
}

StreamPool::Stream& StreamPool::Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::move(other.pool_);
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

StreamPool::Stream::~Stream() {
  Reset();
}

void StreamPool::Stream::Reset() {
  if (pool_ != nullptr)
    pool_->Give(stream_);
  // May destroy the pool when this lease was its last holder.
  pool_.reset();
  stream_ = nullptr;
}

void StreamPool::Give(void *stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Acquire() reserved the room: no allocation, nothing to throw.
  idle_.push_back(stream);
  --leased_;
}

void StreamPool::RaiseBound(size_t max_streams) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_streams_ = std::max(max_streams_, max_streams);
}

StreamPool::Stats StreamPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats stats;
  stats.max_streams = max_streams_;
  stats.created = all_.size();
  stats.leased = leased_;
  stats.peak_leased = peak_leased_;
  return stats;
}

int StreamPool::ordinal() const {
  return context_->ordinal();
}

namespace internal {
namespace {

// Reads 1..max_digits hex digits at text[*pos]; false when there is none or
// too many.
bool ReadHex(const std::string& text, size_t *pos, size_t max_digits,
             unsigned long *value) {
  const size_t start = *pos;
  unsigned long v = 0;
  while (*pos < text.size() &&
         std::isxdigit(static_cast<unsigned char>(text[*pos]))) {
    if (*pos - start == max_digits)
      return false;
    const char c =
        static_cast<char>(std::tolower(static_cast<unsigned char>(text[*pos])));
    v = v * 16 + static_cast<unsigned long>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++*pos;
  }
  *value = v;
  return *pos > start;
}

bool Expect(const std::string& text, size_t *pos, char c) {
  if (*pos >= text.size() || text[*pos] != c)
    return false;
  ++*pos;
  return true;
}

}  // namespace

std::string NormalizePciBusId(const std::string& id) {
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  size_t pos = 0;
  // PCI limits: a 32-bit domain, 8-bit bus, 5-bit device, 3-bit function.
  if (!ReadHex(id, &pos, 8, &domain) || !Expect(id, &pos, ':') ||
      !ReadHex(id, &pos, 2, &bus) || !Expect(id, &pos, ':') ||
      !ReadHex(id, &pos, 2, &device) || !Expect(id, &pos, '.') ||
      !ReadHex(id, &pos, 1, &function) || pos != id.size() || device > 0x1f ||
      function > 7)
    return std::string();
  char text[32];
  std::snprintf(text, sizeof text, "%04lx:%02lx:%02lx.%lx", domain, bus, device,
                function);
  return text;
}

std::string FormatUuid(const std::array<unsigned char, 16>& bytes) {
  std::string text = "GPU-";
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    // 8-4-4-4-12 hex digits.
    if (i == 4 || i == 6 || i == 8 || i == 10)
      text += '-';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xf];
  }
  return text;
}

std::string FormatDriverVersion(int version) {
  if (version <= 0)
    return std::string();
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

std::string FormatCallError(int code, const char *name, const char *description,
                            const char *call, const char *file, int line) {
  std::string text = call;
  text += " failed: ";
  if (name != nullptr && name[0] != '\0')
    text += name;
  else
    text += "CUDA error " + std::to_string(code);
  if (description != nullptr && description[0] != '\0') {
    text += " (";
    text += description;
    text += ')';
  }
  text += " at ";
  text += file;
  text += ':';
  text += std::to_string(line);
  return text;
}

}  // namespace internal
}  // namespace cuda
}  // namespace gpufan

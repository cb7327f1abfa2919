// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA back end: the pure formatting, the error type and the checking
// helper (through a fake driver table), the loader on libraries that must
// fail, and, where a GPU opens, discovery, contexts, stream pools and pinning.
// test-cuda-nodriver.cpp covers the public API with the driver forced away.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda-driver-private.h"
#include "gpufan/cuda.h"
#include "gpufan/device-registry.h"
#include "gpufan/device.h"

namespace gpufan {
namespace cuda {
namespace {

using internal::FormatCallError;
using internal::FormatDriverVersion;
using internal::FormatUuid;
using internal::NormalizePciBusId;

// "GPU-" then 8-4-4-4-12 lower-case hex digits.
bool IsGpuUuid(const std::string& text) {
  if (text.size() != 40 || text.compare(0, 4, "GPU-") != 0)
    return false;
  for (size_t i = 4; i < text.size(); ++i) {
    const bool dash = i == 12 || i == 17 || i == 22 || i == 27;
    const char c = text[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

TEST(CudaFormat, PciBusIdIsLowerCaseWithShortDomain) {
  EXPECT_EQ(NormalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("0001:AF:1F.7"), "0001:af:1f.7");
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");
  // A domain wider than 16 bits keeps its digits.
  EXPECT_EQ(NormalizePciBusId("00010000:01:00.0"), "10000:01:00.0");
}

TEST(CudaFormat, MalformedPciBusIdIsEmpty) {
  for (const char *bad :
       {"", "3b:00.0", "0000:3b:00", "0000:3b:00.0x", "0000:3b:00.0 ",
        "0000:3g:00.0", "000000000:3b:00.0", "0000:3b:20.0", "0000:3b:00.8",
        "0000:123:00.0", "0000-3b-00.0", ":3b:00.0"}) {
    EXPECT_EQ(NormalizePciBusId(bad), "") << '"' << bad << '"';
  }
}

TEST(CudaFormat, UuidIsGroupedLowerCaseHex) {
  std::array<unsigned char, 16> bytes;
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(FormatUuid(bytes), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  EXPECT_TRUE(IsGpuUuid(FormatUuid(bytes)));
  EXPECT_FALSE(IsGpuUuid("GPU-00010203-0405-0607-0809-0a0b0c0d0e0F"));
  EXPECT_FALSE(IsGpuUuid("GPU-000102030-405-0607-0809-0a0b0c0d0e0f"));
  // CUuuid holds plain (signed) chars: bytes above 0x7f must not sign-extend.
  bytes.fill(0xab);
  bytes[15] = 0xff;
  EXPECT_EQ(FormatUuid(bytes), "GPU-abababab-abab-abab-abab-abababababff");
}

TEST(CudaFormat, DriverVersionIsMajorDotMinor) {
  EXPECT_EQ(FormatDriverVersion(12020), "12.2");
  EXPECT_EQ(FormatDriverVersion(11040), "11.4");
  EXPECT_EQ(FormatDriverVersion(12000), "12.0");
  EXPECT_EQ(FormatDriverVersion(12080), "12.8");
  EXPECT_EQ(FormatDriverVersion(0), "");
  EXPECT_EQ(FormatDriverVersion(-1), "");
}

TEST(CudaError, CallErrorText) {
  EXPECT_EQ(FormatCallError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory",
                            "cuMemAlloc_v2(&ptr, n)", "lib/devices/cuda.cpp", 42),
            "cuMemAlloc_v2(&ptr, n) failed: CUDA_ERROR_OUT_OF_MEMORY (out of "
            "memory) at lib/devices/cuda.cpp:42");
  // The driver did not know the code: the number stands in.
  EXPECT_EQ(FormatCallError(12345, nullptr, nullptr, "cuInit(0)", "a.cpp", 7),
            "cuInit(0) failed: CUDA error 12345 at a.cpp:7");
  EXPECT_EQ(FormatCallError(1, "", "", "f()", "b.cpp", 1),
            "f() failed: CUDA error 1 at b.cpp:1");
}

TEST(CudaError, CarriesTheCallAndWhere) {
  const Error e(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory",
                "cuMemAlloc_v2(&ptr, n)", "lib/devices/cuda.cpp", 42);
  EXPECT_EQ(e.code(), 2);
  EXPECT_EQ(e.name(), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(e.call(), "cuMemAlloc_v2(&ptr, n)");
  EXPECT_EQ(e.file(), "lib/devices/cuda.cpp");
  EXPECT_EQ(e.line(), 42);
  EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos);

  const Error plain("no driver");
  EXPECT_EQ(plain.code(), Error::kNoCode);
  EXPECT_EQ(plain.name(), "");
  EXPECT_STREQ(plain.what(), "no driver");

  // Callers may catch the exhausted pool as any CUDA error.
  try {
    throw StreamPoolExhausted("all leased");
  } catch (const Error& caught) {
    EXPECT_STREQ(caught.what(), "all leased");
  }
}

TEST(CudaStream, EmptyLeaseIsHarmless) {
  StreamPool::Stream lease;
  EXPECT_FALSE(lease);
  EXPECT_EQ(lease.handle(), nullptr);
  lease.Reset();
  StreamPool::Stream moved(std::move(lease));
  EXPECT_FALSE(moved);
  moved = StreamPool::Stream();
  EXPECT_FALSE(moved);
}

#if GPUFAN_HAVE_CUDA

// A driver table with fakes, so the checking helper is tested without a GPU.
CUresult FakeErrorName(CUresult error, const char **name) {
  if (error == 2) {
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return CUDA_SUCCESS;
  }
  *name = nullptr;
  return static_cast<CUresult>(1);  // CUDA_ERROR_INVALID_VALUE
}

CUresult FakeErrorString(CUresult error, const char **text) {
  *text = error == 2 ? "out of memory" : nullptr;
  return error == 2 ? CUDA_SUCCESS : static_cast<CUresult>(1);
}

CUresult FakeAllocFails(CUdeviceptr *, size_t) {
  return static_cast<CUresult>(2);
}

CUresult FakeInitUnknownError(unsigned int) {
  return static_cast<CUresult>(9999);
}

CUresult FakeInitOk(unsigned int) {
  return CUDA_SUCCESS;
}

internal::Driver& FakeDriver() {
  static internal::Driver driver;
  driver.cuGetErrorName = FakeErrorName;
  driver.cuGetErrorString = FakeErrorString;
  driver.cuMemAlloc_v2 = FakeAllocFails;
  driver.cuInit = FakeInitOk;
  return driver;
}

TEST(CudaCheck, ThrowsWithNameCallFileAndLine) {
  internal::Driver& driver = FakeDriver();
  CUdeviceptr ptr = 0;
  int line = 0;
  try {
    // clang-format off
    line = __LINE__; GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&ptr, 64));
    // clang-format on
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 2);
    EXPECT_EQ(e.name(), "CUDA_ERROR_OUT_OF_MEMORY");
    EXPECT_EQ(e.call(), "cuMemAlloc_v2(&ptr, 64)");
    EXPECT_NE(e.file().find("test-cuda.cpp"), std::string::npos) << e.file();
    EXPECT_EQ(e.line(), line);
    const std::string what = e.what();
    EXPECT_NE(what.find("cuMemAlloc_v2(&ptr, 64) failed: "
                        "CUDA_ERROR_OUT_OF_MEMORY (out of memory) at "),
              std::string::npos)
        << what;
  }
}

TEST(CudaCheck, SuccessDoesNotThrowAndUnknownCodesKeepTheNumber) {
  internal::Driver& driver = FakeDriver();
  EXPECT_NO_THROW(GPUFAN_CU_CHECK(driver, cuInit(0)));
  driver.cuInit = FakeInitUnknownError;
  try {
    GPUFAN_CU_CHECK(driver, cuInit(0));
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 9999);
    EXPECT_EQ(e.name(), "");
    EXPECT_NE(std::string(e.what()).find("cuInit(0) failed: CUDA error 9999"),
              std::string::npos)
        << e.what();
  }
  driver.cuInit = FakeInitOk;
}

TEST(CudaLoader, MissingLibraryIsNamed) {
  std::string why;
  EXPECT_EQ(internal::OpenDriver("/nonexistent/libcuda.so.1", &why), nullptr);
  EXPECT_EQ(why.rfind("/nonexistent/libcuda.so.1 not found (no NVIDIA "
                      "driver): ",
                      0),
            0u)
      << why;
  // Null reason pointers are allowed.
  EXPECT_EQ(internal::OpenDriver("/nonexistent/libcuda.so.1", nullptr),
            nullptr);
}

TEST(CudaLoader, LibraryWithoutTheDriverApiIsRefused) {
  // libm is present wherever this test runs, and has no cuInit.
  std::string why;
  EXPECT_EQ(internal::OpenDriver("libm.so.6", &why), nullptr);
  EXPECT_EQ(why, "libm.so.6 has no cuInit (not a CUDA driver, or one too old)");
}

// --- On a GPU -------------------------------------------------------------

// Skips the test, with the reason, when no CUDA device opens here.
#define REQUIRE_GPU()                               \
  do {                                              \
    std::string why;                                \
    if (!Available(&why) || Discover(&why).empty()) \
      GTEST_SKIP() << "no CUDA device: " << why;    \
  } while (0)

TEST(CudaGpu, DiscoveryFieldsAreSane) {
  REQUIRE_GPU();
  std::string why = "unchanged";
  const std::vector<Device> devices = Discover(&why);
  EXPECT_EQ(why, "");
  std::set<int> ordinals;
  for (const Device& d : devices) {
    SCOPED_TRACE(d.name);
    EXPECT_EQ(d.kind, DeviceKind::kCuda);
    EXPECT_TRUE(ordinals.insert(d.index).second);
    EXPECT_FALSE(d.name.empty());
    EXPECT_TRUE(IsGpuUuid(d.uuid)) << d.uuid;
    EXPECT_FALSE(d.pci_bus_id.empty());
    EXPECT_EQ(NormalizePciBusId(d.pci_bus_id), d.pci_bus_id);
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_GE(d.cc_major, 3);
    EXPECT_GE(d.cc_minor, 0);
    // Left to the topology code.
    EXPECT_EQ(d.numa_node, -1);
    EXPECT_TRUE(d.local_cpus.empty());
  }
  // Cached: the same answer again.
  EXPECT_EQ(Discover().size(), devices.size());

  const DeviceRegistry registry = DeviceRegistry::Discover();
  EXPECT_EQ(registry.gpu_count(), devices.size());
  EXPECT_EQ(registry.gpu_note(), "");
  ASSERT_GT(registry.devices().size(), devices.size());
  for (size_t i = 0; i < devices.size(); ++i)
    EXPECT_EQ(registry.devices()[i].uuid, devices[i].uuid);
  EXPECT_EQ(registry.DefaultForLane(0).kind, DeviceKind::kCuda);
}

TEST(CudaGpu, PrimaryContextIsRetainedOnceAndShared) {
  REQUIRE_GPU();
  const int ordinal = Discover().front().index;
  const std::shared_ptr<PrimaryContext> a = PrimaryContext::Retain(ordinal);
  const std::shared_ptr<PrimaryContext> b = PrimaryContext::Retain(ordinal);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a.use_count(), 2);
  EXPECT_NE(a->handle(), nullptr);
  EXPECT_EQ(a->ordinal(), ordinal);
  { PrimaryContext::ScopedPush push(*a); }
  // Pushes nest.
  {
    PrimaryContext::ScopedPush outer(*a);
    PrimaryContext::ScopedPush inner(*b);
  }
}

TEST(CudaGpu, BadOrdinalIsATypedError) {
  REQUIRE_GPU();
  try {
    PrimaryContext::Retain(1 << 20);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "CUDA_ERROR_INVALID_DEVICE") << e.what();
    EXPECT_EQ(e.call(), "cuDeviceGet(&device, ordinal)");
  }
  EXPECT_THROW(FreeMemory(-1), Error);
}

TEST(CudaGpu, StreamPoolIsBoundedAndReusesStreams) {
  REQUIRE_GPU();
  const int ordinal = Discover().front().index;
  const std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(ordinal, 2);
  EXPECT_EQ(StreamPool::ForDevice(ordinal, 2).get(), pool.get());
  EXPECT_EQ(pool->ordinal(), ordinal);
  EXPECT_THROW(StreamPool::ForDevice(ordinal, 0), std::invalid_argument);

  StreamPool::Stream a = pool->Acquire();
  StreamPool::Stream b = pool->Acquire();
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_NE(a.handle(), b.handle());
  EXPECT_THROW(pool->Acquire(), StreamPoolExhausted);
  StreamPool::Stats stats = pool->stats();
  EXPECT_EQ(stats.max_streams, 2u);
  EXPECT_EQ(stats.created, 2u);
  EXPECT_EQ(stats.leased, 2u);
  EXPECT_EQ(stats.peak_leased, 2u);

  // A lease given back is the next one handed out; nothing new is created.
  void *const a_handle = a.handle();
  a.Reset();
  EXPECT_FALSE(a);
  StreamPool::Stream c = pool->Acquire();
  EXPECT_EQ(c.handle(), a_handle);
  EXPECT_EQ(pool->stats().created, 2u);

  // A move keeps the one lease.
  StreamPool::Stream d = std::move(c);
  EXPECT_FALSE(c);
  EXPECT_EQ(d.handle(), a_handle);
  EXPECT_EQ(pool->stats().leased, 2u);

  // A larger bound asked for later raises the shared pool's.
  EXPECT_EQ(StreamPool::ForDevice(ordinal, 3).get(), pool.get());
  StreamPool::Stream e = pool->Acquire();
  EXPECT_TRUE(e);
  EXPECT_THROW(pool->Acquire(), StreamPoolExhausted);

  b.Reset();
  d.Reset();
  e.Reset();
  stats = pool->stats();
  EXPECT_EQ(stats.leased, 0u);
  EXPECT_EQ(stats.peak_leased, 3u);
  EXPECT_EQ(stats.created, 3u);
}

TEST(CudaGpu, StreamLeaseKeepsItsPoolAlive) {
  REQUIRE_GPU();
  const int ordinal = Discover().front().index;
  StreamPool::Stream lease = StreamPool::ForDevice(ordinal, 1)->Acquire();
  EXPECT_TRUE(lease);
  // The pool is held by the lease alone: the next caller gets the same pool
  // and its one stream is still leased.
  EXPECT_THROW(StreamPool::ForDevice(ordinal, 1)->Acquire(),
               StreamPoolExhausted);
  lease.Reset();
}

TEST(CudaGpu, RegisterHostPinsAndCopies) {
  REQUIRE_GPU();
  const int ordinal = Discover().front().index;
  constexpr size_t kBytes = 1 << 20;
  std::unique_ptr<void, decltype(&std::free)> host(
      std::aligned_alloc(4096, kBytes), &std::free);
  ASSERT_NE(host.get(), nullptr);
  std::memset(host.get(), 0x5a, kBytes);

  RegisterHost(host.get(), kBytes);
  EXPECT_THROW(RegisterHost(host.get(), kBytes), Error);

  // The pinned memory feeds an asynchronous copy on a pool stream.
  const internal::Driver& driver = internal::RequireDriver();
  const std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(ordinal, 1);
  {
    PrimaryContext::ScopedPush push(*pool->context());
    CUdeviceptr device = 0;
    GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&device, kBytes));
    StreamPool::Stream stream = pool->Acquire();
    const auto cu_stream = static_cast<CUstream>(stream.handle());
    GPUFAN_CU_CHECK(
        driver, cuMemcpyHtoDAsync_v2(device, host.get(), kBytes, cu_stream));
    GPUFAN_CU_CHECK(driver, cuStreamSynchronize(cu_stream));
    GPUFAN_CU_CHECK(driver, cuMemFree_v2(device));
  }

  UnregisterHost(host.get());
  EXPECT_THROW(UnregisterHost(host.get()), Error);
}

TEST(CudaGpu, DriverVersionAndDeviceToDeviceCopy) {
  REQUIRE_GPU();
  const internal::Driver& driver = internal::RequireDriver();
  int version = 0;
  GPUFAN_CU_CHECK(driver, cuDriverGetVersion(&version));
  EXPECT_GE(version, 11000);  // 1000 * major + 10 * minor

  const int ordinal = Discover().front().index;
  constexpr size_t kBytes = 1 << 20;
  const std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(ordinal, 1);
  PrimaryContext::ScopedPush push(*pool->context());
  CUdeviceptr from = 0;
  CUdeviceptr to = 0;
  GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&from, kBytes));
  GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&to, kBytes));
  StreamPool::Stream stream = pool->Acquire();
  const auto cu_stream = static_cast<CUstream>(stream.handle());
  GPUFAN_CU_CHECK(driver, cuMemcpyDtoDAsync_v2(to, from, kBytes, cu_stream));
  GPUFAN_CU_CHECK(driver, cuStreamSynchronize(cu_stream));
  GPUFAN_CU_CHECK(driver, cuMemFree_v2(to));
  GPUFAN_CU_CHECK(driver, cuMemFree_v2(from));
}

TEST(CudaGpu, FreeMemoryIsAtMostTotal) {
  REQUIRE_GPU();
  for (const Device& d : Discover()) {
    const uint64_t free = FreeMemory(d.index);
    EXPECT_GT(free, 0u) << d.name;
    EXPECT_LE(free, d.total_memory) << d.name;
  }
}

// --- Over the stand-in driver (fake-libcuda.cpp) ----------------------------
// It counts what a real driver hides: retains, live streams and their flags,
// registrations and their flags, the context stack.

struct FakeDriverView {
  int (*retains)(int device);
  int (*live_streams)();
  long (*stream_flags)(int n);
  long (*registered_flags)(void *p);
  int (*context_depth)();
  void (*set_sticky)(int device, int code);
};

// The counters of the driver in use, or nullptr when it is not the fake.
const FakeDriverView *Fake() {
  static FakeDriverView view;
  static const FakeDriverView *found = []() -> const FakeDriverView * {
    const char *path = std::getenv("GPUFAN_LIBCUDA");
    if (path == nullptr || !Available())
      return nullptr;
    // Already loaded by the back end: RTLD_NOLOAD only finds it.
    void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr)
      return nullptr;
    view.retains = reinterpret_cast<int (*)(int)>(
        dlsym(library, "gpufan_fake_cuda_retains"));
    view.live_streams = reinterpret_cast<int (*)()>(
        dlsym(library, "gpufan_fake_cuda_live_streams"));
    view.stream_flags = reinterpret_cast<long (*)(int)>(
        dlsym(library, "gpufan_fake_cuda_stream_flags"));
    view.registered_flags = reinterpret_cast<long (*)(void *)>(
        dlsym(library, "gpufan_fake_cuda_registered_flags"));
    view.context_depth = reinterpret_cast<int (*)()>(
        dlsym(library, "gpufan_fake_cuda_context_depth"));
    view.set_sticky = reinterpret_cast<void (*)(int, int)>(
        dlsym(library, "gpufan_fake_cuda_set_sticky"));
    dlclose(library);  // drops only the reference RTLD_NOLOAD took
    return view.retains != nullptr && view.live_streams != nullptr &&
                   view.stream_flags != nullptr &&
                   view.registered_flags != nullptr &&
                   view.context_depth != nullptr && view.set_sticky != nullptr
               ? &view
               : nullptr;
  }();
  return found;
}

#define REQUIRE_FAKE()                                                  \
  do {                                                                  \
    if (Fake() == nullptr)                                              \
      GTEST_SKIP() << "needs the stand-in driver (test-lib-cuda-fake)"; \
  } while (0)

TEST(CudaFake, ContextIsRetainedOnceAndReleasedByTheLastHolder) {
  REQUIRE_FAKE();
  // Discovery's codec probes gave their context back.
  Discover();
  EXPECT_EQ(Fake()->retains(0), 0);
  std::shared_ptr<PrimaryContext> a = PrimaryContext::Retain(0);
  std::shared_ptr<PrimaryContext> b = PrimaryContext::Retain(0);
  std::shared_ptr<PrimaryContext> other = PrimaryContext::Retain(1);
  EXPECT_EQ(Fake()->retains(0), 1);
  EXPECT_EQ(Fake()->retains(1), 1);
  EXPECT_NE(a->handle(), other->handle());
  a.reset();
  EXPECT_EQ(Fake()->retains(0), 1);
  b.reset();
  EXPECT_EQ(Fake()->retains(0), 0);
  other.reset();
  EXPECT_EQ(Fake()->retains(1), 0);
}

// A device whose context answers with a sticky error is told
// by name and code; a device that answers, or another error, is not; the
// context stack is left as found.
TEST(CudaFake, StickyErrorsAreTold) {
  REQUIRE_FAKE();
  EXPECT_EQ(StickyError(1), "");
  Fake()->set_sticky(1, 700);
  const std::string sticky = StickyError(1);
  EXPECT_NE(sticky.find("(700)"), std::string::npos) << sticky;
  EXPECT_EQ(StickyError(0), "") << "only device 1 is broken";
  Fake()->set_sticky(1, 2);  // out of memory: not sticky
  EXPECT_EQ(StickyError(1), "");
  Fake()->set_sticky(-1, 0);
  EXPECT_EQ(StickyError(7), "") << "no such device: nothing to tell";
  EXPECT_EQ(Fake()->context_depth(), 0);
}

TEST(CudaFake, PushesBalance) {
  REQUIRE_FAKE();
  const std::shared_ptr<PrimaryContext> context = PrimaryContext::Retain(0);
  EXPECT_EQ(Fake()->context_depth(), 0);
  {
    PrimaryContext::ScopedPush outer(*context);
    PrimaryContext::ScopedPush inner(*context);
    EXPECT_EQ(Fake()->context_depth(), 2);
  }
  EXPECT_EQ(Fake()->context_depth(), 0);
  FreeMemory(1);
  { StreamPool::Stream lease = StreamPool::ForDevice(0, 1)->Acquire(); }
  EXPECT_EQ(Fake()->context_depth(), 0);
  // A failed call leaves the stack as it found it.
  EXPECT_THROW(FreeMemory(7), Error);
  EXPECT_EQ(Fake()->context_depth(), 0);
}

TEST(CudaFake, StreamsAreNonBlockingAndDieWithThePool) {
  REQUIRE_FAKE();
  const int before = Fake()->live_streams();
  int created = 0;
  while (Fake()->stream_flags(created) >= 0)
    ++created;
  {
    std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(1, 3);
    std::vector<StreamPool::Stream> leases;
    for (int i = 0; i < 3; ++i)
      leases.push_back(pool->Acquire());
    EXPECT_THROW(pool->Acquire(), StreamPoolExhausted);
    EXPECT_EQ(Fake()->live_streams(), before + 3);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(Fake()->stream_flags(created + i), CU_STREAM_NON_BLOCKING);
    EXPECT_EQ(Fake()->retains(1), 1);
    // Leases outlive the caller's handle on the pool.
    pool.reset();
    EXPECT_EQ(Fake()->live_streams(), before + 3);
  }
  EXPECT_EQ(Fake()->live_streams(), before);
  EXPECT_EQ(Fake()->retains(1), 0);
}

TEST(CudaFake, RegisterHostIsPortableAndHoldsItsContext) {
  REQUIRE_FAKE();
  std::vector<char> host(1 << 20);
  RegisterHost(host.data(), host.size());
  EXPECT_EQ(Fake()->registered_flags(host.data()),
            static_cast<long>(internal::kMemHostRegisterPortable));
  // The registration belongs to the context it was made in.
  EXPECT_EQ(Fake()->retains(0), 1);
  try {
    RegisterHost(host.data(), host.size());
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Error::kNoCode) << e.what();
  }
  UnregisterHost(host.data());
  EXPECT_EQ(Fake()->registered_flags(host.data()), -1);
  EXPECT_EQ(Fake()->retains(0), 0);
}

TEST(CudaFake, DriverErrorsArriveTyped) {
  REQUIRE_FAKE();
  std::vector<char> host(4096);
  // Registered behind our back: the driver refuses the second registration
  // and the error says so by name.
  const std::shared_ptr<PrimaryContext> context = PrimaryContext::Retain(0);
  const internal::Driver& driver = internal::RequireDriver();
  {
    PrimaryContext::ScopedPush push(*context);
    GPUFAN_CU_CHECK(driver, cuMemHostRegister_v2(host.data(), host.size(), 0));
  }
  try {
    RegisterHost(host.data(), host.size());
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 712);
    EXPECT_EQ(e.name(), "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
  }
  // Not ours to undo.
  EXPECT_THROW(UnregisterHost(host.data()), Error);
  PrimaryContext::ScopedPush push(*context);
  GPUFAN_CU_CHECK(driver, cuMemHostUnregister(host.data()));
}

TEST(CudaFake, DeviceToDeviceCopiesTheBytesInAContext) {
  REQUIRE_FAKE();
  const internal::Driver& driver = internal::RequireDriver();
  int version = 0;
  GPUFAN_CU_CHECK(driver, cuDriverGetVersion(&version));
  EXPECT_EQ(version, 12020);

  // The stand-in's device memory is host memory: the copy can be read back.
  std::vector<char> from(4096, 'a');
  std::vector<char> to(4096, 'b');
  const auto src = reinterpret_cast<CUdeviceptr>(from.data());
  const auto dst = reinterpret_cast<CUdeviceptr>(to.data());
  // No current context: refused, as the driver refuses it.
  EXPECT_EQ(driver.cuMemcpyDtoDAsync_v2(dst, src, to.size(), nullptr),
            static_cast<CUresult>(201));  // CUDA_ERROR_INVALID_CONTEXT
  EXPECT_EQ(to.front(), 'b');
  const std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(0, 1);
  PrimaryContext::ScopedPush push(*pool->context());
  StreamPool::Stream stream = pool->Acquire();
  GPUFAN_CU_CHECK(driver,
                  cuMemcpyDtoDAsync_v2(dst, src, to.size(),
                                       static_cast<CUstream>(stream.handle())));
  EXPECT_EQ(to, from);
}

// Frames between GPUs: planes with pitches of their own, copied device to
// device and through the host in runs of about 1 MiB (a 2.5 MiB plane makes
// three), land byte for byte, padding left alone; the planes' bytes are
// PlaneBytes; the context stack is left as found.
TEST(CudaFake, PlanesArriveWholeByEitherPath) {
  REQUIRE_FAKE();
  struct Buffer {
    std::vector<unsigned char> bytes;
    uint64_t at(size_t offset) {
      return reinterpret_cast<uint64_t>(bytes.data() + offset);
    }
  };
  // A 2560 x 1024 plane (2.5 MiB) and a 1280 x 513 one, pitched.
  const size_t widths[] = {2560, 1280}, heights[] = {1024, 513};
  const size_t src_pitch = 3072, dst_pitch = 2816;
  Buffer src{std::vector<unsigned char>(src_pitch * (1024 + 513))};
  for (size_t i = 0; i < src.bytes.size(); i++)
    src.bytes[i] = static_cast<unsigned char>(i * 7 + i / 4096);
  std::vector<Plane2D> planes;
  size_t src_offset = 0, dst_offset = 0;
  for (int p = 0; p < 2; p++) {
    Plane2D plane;
    plane.src_pitch = src_pitch;
    plane.dst_pitch = dst_pitch;
    plane.width_bytes = widths[p];
    plane.height = heights[p];
    plane.src = src_offset;  // offsets until the buffers exist
    plane.dst = dst_offset;
    src_offset += src_pitch * heights[p];
    dst_offset += dst_pitch * heights[p];
    planes.push_back(plane);
  }
  EXPECT_EQ(PlaneBytes(planes), 2560u * 1024 + 1280 * 513);
  std::vector<unsigned char> host(PlaneBytes(planes));
  for (const bool via_host : {false, true}) {
    SCOPED_TRACE(via_host ? "via host" : "device to device");
    Buffer dst{std::vector<unsigned char>(dst_offset, 0xee)};
    std::vector<Plane2D> placed = planes;
    for (Plane2D& plane : placed) {
      plane.src = src.at(plane.src);
      plane.dst = dst.at(plane.dst);
    }
    const std::shared_ptr<StreamPool> pool = StreamPool::ForDevice(1, 1);
    StreamPool::Stream stream = pool->Acquire();
    const std::shared_ptr<StreamPool> source = StreamPool::ForDevice(0, 1);
    StreamPool::Stream down = source->Acquire();
    if (via_host)
      CopyPlanesViaHost(0, down.handle(), 1, stream.handle(), host.data(),
                        placed);
    else
      CopyPlanesOnDevice(1, stream.handle(), placed);
    EXPECT_EQ(Fake()->context_depth(), 0);
    size_t so = 0, dso = 0;
    for (int p = 0; p < 2; p++) {
      for (size_t row = 0; row < heights[p]; row++) {
        const unsigned char *from = &src.bytes[so + row * src_pitch];
        const unsigned char *to = &dst.bytes[dso + row * dst_pitch];
        ASSERT_EQ(std::memcmp(from, to, widths[p]), 0)
            << "plane " << p << " row " << row;
        if (widths[p] < dst_pitch) {
          ASSERT_EQ(to[widths[p]], 0xee) << "padding of row " << row;
        }
      }
      so += src_pitch * heights[p];
      dso += dst_pitch * heights[p];
    }
  }
}

#endif  // GPUFAN_HAVE_CUDA

}  // namespace
}  // namespace cuda
}  // namespace gpufan

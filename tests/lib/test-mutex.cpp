// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan::Mutex and gpufan::CondVar: exclusion, and waits that end on their
// event or at their deadline (never earlier, never wrapped around). The time
// bounds here only catch a wait that returned too early or hung.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "gpufan/mutex.h"

namespace gpufan {
namespace {

using std::chrono::steady_clock;
constexpr auto kHang = std::chrono::seconds(60);

TEST(Mutex, ExcludesAndTryLockFailsWhileHeld) {
  Mutex m;
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) {
        std::lock_guard<Mutex> lock(m);
        counter++;
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(counter, 400'000);

  std::unique_lock<Mutex> held(m);
  bool took = true;
  std::thread([&] { took = m.try_lock(); }).join();
  EXPECT_FALSE(took);
  held.unlock();
  std::thread([&] {
    took = m.try_lock();
    if (took)
      m.unlock();
  }).join();
  EXPECT_TRUE(took);
}

TEST(CondVar, WaitForEndsAtItsDeadlineWithoutANotify) {
  Mutex m;
  CondVar cv;
  std::unique_lock<Mutex> lock(m);
  const auto start = steady_clock::now();
  // With a predicate: a spurious wake-up (POSIX allows them) waits again.
  EXPECT_FALSE(
      cv.wait_for(lock, std::chrono::milliseconds(30), [] { return false; }));
  // A correctness bound, not a speed one: the deadline cannot come early.
  EXPECT_GE(steady_clock::now() - start, std::chrono::milliseconds(30));
  EXPECT_TRUE(lock.owns_lock());
}

TEST(CondVar, APastDeadlineReturnsAtOnce) {
  Mutex m;
  CondVar cv;
  std::unique_lock<Mutex> lock(m);
  EXPECT_EQ(cv.wait_until(lock, steady_clock::now() - std::chrono::seconds(1)),
            std::cv_status::timeout);
  EXPECT_FALSE(
      cv.wait_for(lock, std::chrono::nanoseconds(-5), [] { return false; }));
}

// A notify ends the wait; "forever" (the largest duration) must not wrap
// around into a deadline in the past, which would end the wait at once.
TEST(CondVar, NotifyEndsAWaitOfForever) {
  Mutex m;
  CondVar cv;
  bool ready = false;
  std::thread notifier([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<Mutex> lock(m);
    ready = true;
    cv.notify_all();
  });
  std::unique_lock<Mutex> lock(m);
  const auto start = steady_clock::now();
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::nanoseconds::max(),
                          [&] { return ready; }));
  EXPECT_TRUE(ready);
  EXPECT_LT(steady_clock::now() - start, kHang);
  lock.unlock();
  notifier.join();
}

TEST(CondVar, NotifyOneWakesAPlainWait) {
  Mutex m;
  CondVar cv;
  bool ready = false;
  std::thread waiter([&] {
    std::unique_lock<Mutex> lock(m);
    cv.wait(lock, [&] { return ready; });
  });
  {
    std::lock_guard<Mutex> lock(m);
    ready = true;
  }
  cv.notify_one();
  waiter.join();  // a lost notify hangs here (the suite's timeout)
  EXPECT_TRUE(ready);
}

}  // namespace
}  // namespace gpufan

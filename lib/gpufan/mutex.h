// SPDX-License-Identifier: LGPL-2.1-or-later
// The lock of the per-item path, and its condition variable.
//
// The Session's lock, a lane's and gpufanin's are taken several times per
// item by three or more threads (the upstream thread, the lanes' workers) and
// held for well under a microsecond. std::mutex sleeps in the kernel at the
// first collision: on a two-core machine a context switch for the thread
// that collided and a wake-up system call for the one that held it, many
// times per thousand items. glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP)
// first spins a bounded number of times (a few microseconds at most), which
// a holder of a short critical section usually ends, and then sleeps like
// any mutex. It waits only for the lock, and only briefly: not a polling wait
// (conditions wait on CondVar). In the no-delay pipeline of
// bench/stock-compare.sh it took a quarter off the wall time, and three
// quarters of the context switches with one lane (docs/performance.md).
//
// CondVar is std::condition_variable's interface over pthread_cond_t on
// CLOCK_MONOTONIC (steady_clock's clock), for a Mutex (std::condition_variable
// takes only std::mutex; std::condition_variable_any adds a lock of its own to
// every wait and notify).
#pragma once

#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>  // std::cv_status
#include <cstdint>
#include <limits>
#include <mutex>

namespace gpufan {

class Mutex {
 public:
  Mutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP  // glibc; elsewhere a plain one
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&mutex_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~Mutex() {
    pthread_mutex_destroy(&mutex_);
  }
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() {
    pthread_mutex_lock(&mutex_);
  }
  bool try_lock() {
    return pthread_mutex_trylock(&mutex_) == 0;
  }
  void unlock() {
    pthread_mutex_unlock(&mutex_);
  }
  pthread_mutex_t *native_handle() {
    return &mutex_;
  }

 private:
  pthread_mutex_t mutex_;
};

class CondVar {
 public:
  using Lock = std::unique_lock<Mutex>;
  using TimePoint = std::chrono::steady_clock::time_point;

  CondVar() {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cond_, &attr);
    pthread_condattr_destroy(&attr);
  }
  ~CondVar() { pthread_cond_destroy(&cond_); }
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void notify_one() { pthread_cond_signal(&cond_); }
  void notify_all() { pthread_cond_broadcast(&cond_); }

  void wait(Lock& lock) {
    pthread_cond_wait(&cond_, lock.mutex()->native_handle());
  }
  template <class Predicate>
  void wait(Lock& lock, Predicate pred) {
    while (!pred())
      wait(lock);
  }

  std::cv_status wait_until(Lock& lock, TimePoint deadline) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           deadline.time_since_epoch())
                           .count();
    if (ns <= 0)
      return std::cv_status::timeout;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    return pthread_cond_timedwait(&cond_, lock.mutex()->native_handle(), &ts) ==
                   ETIMEDOUT
               ? std::cv_status::timeout
               : std::cv_status::no_timeout;
  }
  template <class Rep, class Period>
  std::cv_status wait_for(Lock& lock,
                          const std::chrono::duration<Rep, Period>& timeout) {
    return wait_until(lock, DeadlineAfter(timeout));
  }
  template <class Rep, class Period, class Predicate>
  bool wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& timeout,
                Predicate pred) {
    const TimePoint deadline = DeadlineAfter(timeout);
    while (!pred()) {
      if (wait_until(lock, deadline) == std::cv_status::timeout)
        return pred();
    }
    return true;
  }

 private:
  // now + timeout, saturated: a timeout of "forever" must not wrap around.
  template <class Rep, class Period>
  static TimePoint DeadlineAfter(
      const std::chrono::duration<Rep, Period>& timeout) {
    const TimePoint now = std::chrono::steady_clock::now();
    const auto left = TimePoint::max() - now;
    if (timeout >= left)
      return TimePoint::max();
    return now + std::chrono::duration_cast<TimePoint::duration>(timeout);
  }

  pthread_cond_t cond_;
};

}  // namespace gpufan

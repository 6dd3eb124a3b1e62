#include "during_next_wait.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace fabric::kv::test {
namespace {

thread_local std::function<void()> t_hook;
thread_local bool t_ran = false;

using ClockWait = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const struct timespec*);

ClockWait real_clockwait() {
  // The next definition after this binary's: libc's (or a sanitizer runtime's interceptor).
  static const auto real = reinterpret_cast<ClockWait>(dlsym(RTLD_NEXT, "pthread_cond_clockwait"));
  if (real == nullptr) {
    std::fputs("during_next_wait: no pthread_cond_clockwait after this binary's\n", stderr);
    std::abort();
  }
  return real;
}

}  // namespace

void during_next_wait(std::function<void()> hook) {
  t_hook = std::move(hook);
  t_ran = false;
}

bool next_wait_hook_ran() { return t_ran; }

}  // namespace fabric::kv::test

// This binary's definition wins over libc's for every caller linked into it, the library under
// test included; every thread but an armed one goes straight through.
extern "C" int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                      clockid_t clock, const struct timespec* abstime) {
  using namespace fabric::kv::test;
  if (t_hook) {
    std::function<void()> hook = std::exchange(t_hook, nullptr);
    pthread_mutex_unlock(mutex);
    hook();
    t_ran = true;
    pthread_mutex_lock(mutex);
  }
  return real_clockwait()(cond, mutex, clock, abstime);
}

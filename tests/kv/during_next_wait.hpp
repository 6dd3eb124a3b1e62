#pragma once
// Runs a function on this thread inside its next timed condition-variable wait, after the wait
// has released its mutex and before it blocks: what other threads may do while a waiter sleeps,
// made to happen at that exact point instead of by chance. Only for test binaries that link
// during_next_wait.cpp, which interposes pthread_cond_clockwait (what libstdc++'s
// condition_variable::wait_until on steady_clock calls).

#include <functional>

namespace fabric::kv::test {

// Arms `hook` for this thread's next pthread_cond_clockwait; it runs once, with the wait's mutex
// unlocked (so it may call into the object that waits), and is disarmed before it runs (so waits
// inside it are ordinary ones).
void during_next_wait(std::function<void()> hook);

// Whether the hook armed on this thread has run (false again after the next during_next_wait):
// a test asserts it, so that a library that stopped waiting this way fails instead of passing.
[[nodiscard]] bool next_wait_hook_ran();

}  // namespace fabric::kv::test

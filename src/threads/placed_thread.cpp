#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "common/log.hpp"
#include "fabric/threads.hpp"

namespace fabric {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<ThreadPlacement> threads;
};

Registry& registry() {
  // Never destroyed: a thread of an engine that outlives main() still leaves it at its end.
  static auto* r = new Registry;
  return *r;
}

constexpr std::size_t kKernelNameChars = 15;

}  // namespace

PlacedThread::PlacedThread(std::string_view name, const CpuSet& cpus)
    : tid_(static_cast<pid_t>(::syscall(SYS_gettid))) {
  const std::string shown(name.substr(0, kKernelNameChars));
  (void)pthread_setname_np(pthread_self(), shown.c_str());
  if (!cpus.empty()) {
    if (auto st = pin_current_thread(cpus); !st.ok()) {
      log::warn("thread {} keeps the CPUs it inherited: {}", shown, st.to_string());
    }
  }
  auto now = current_thread_affinity();
  cpus_ = now ? std::move(now).value() : cpus;
  std::lock_guard lock(registry().mutex);
  registry().threads.push_back(ThreadPlacement{shown, tid_, cpus_});
}

PlacedThread::~PlacedThread() {
  std::lock_guard lock(registry().mutex);
  auto& all = registry().threads;
  std::erase_if(all, [this](const ThreadPlacement& t) { return t.tid == tid_; });
}

std::vector<ThreadPlacement> library_threads() {
  std::lock_guard lock(registry().mutex);
  return registry().threads;
}

}  // namespace fabric

#pragma once
// The host proxy thread: it runs a MoeGroup's engine-side steps in the
// background, driven by a device's signals, so that the overflow WRITEs go
// out as soon as the routes are in and the combine WRITEs as soon as the rows
// are gathered, whatever the device does meanwhile.
//
// A device signals either by calling signal() or by storing into the watched
// word of watch() (a GPU kernel: one 64-bit store, cuda/watcher_store.cuh).
// The word holds epoch * 4 + step (steps 0..3 below); values in between that
// the watcher skips are replayed in order, so no step is ever lost.
//
//   device                          proxy thread
//   begin_dispatch, stage private
//   signal(private_staged)   ->     post_private
//   stage the rest
//   signal(all_staged)       ->     mark_staged, complete_dispatch (routes in,
//                                   overflow posted, tokens in)
//   wait_dispatched, reorder
//   gather expert rows
//   signal(rows_gathered)    ->     post_combine, push_combine_direct,
//                                   mark_combine_pushed, await_combine
//   wait_combined, weighted sum
//   signal(rows_consumed)    ->     finish_combine (barrier posted)
//   wait_idle (before the next begin_dispatch)

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"

namespace fabric::moe {

enum class ProxyStep : std::uint32_t {
  private_staged = 0,
  all_staged = 1,
  rows_gathered = 2,
  rows_consumed = 3,
};

class Proxy {
 public:
  explicit Proxy(MoeGroup& group);
  ~Proxy();  // stops the thread (after the step it runs, whose waits are bounded)
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // For the current epoch (group.epoch()).
  void signal(ProxyStep step);
  // A watched word whose stores (epoch * 4 + step) signal; the device writes it.
  Result<Watcher> watch(TransferEngine& engine, WatcherMemory memory = WatcherMemory::host);

  // Bounded (3 x MoeConfig::timeout; the proxy's own waits are bounded by one):
  // until the proxy finished the dispatch, the combine, or the whole
  // iteration of the current epoch; the step's error otherwise.
  Status wait_dispatched();
  Status wait_combined();
  Status wait_idle();

 private:
  enum Milestone { dispatched = 0, combined = 1, idle = 2 };
  void run();
  void execute(ProxyStep step);
  Status wait_for(Milestone m);

  MoeGroup& group_;
  std::mutex mutex_;
  std::condition_variable work_, progress_;
  std::deque<ProxyStep> queue_;
  std::uint32_t reached_[3] = {0, 0, 0};  // epoch each milestone was last reached in
  Status error_;
  bool stopping_ = false;
  std::uint64_t watched_ = 3;  // last watched value handled (watcher thread only)
  std::thread thread_;
};

}  // namespace fabric::moe

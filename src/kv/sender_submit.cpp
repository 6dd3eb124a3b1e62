// Carrying out Actions once the mutex is released: sends and state reports, then the writes.
// A write the engine refuses ends its transfer, which may send and report more: the loop runs
// until nothing is left.

#include <thread>

#include "sender_impl.hpp"

namespace fabric::kv {

Status Sender::Impl::submit(const Submit& s, OnDone done) {
  return std::visit(
      [&](const auto& w) -> Status {
        using T = std::decay_t<decltype(w)>;
        if constexpr (std::is_same_v<T, PagedWrite>) {
          return engine.submit_paged_writes(w, std::move(done));
        } else if constexpr (std::is_same_v<T, SingleWrite>) {
          return engine.submit_single_write(w, std::move(done));
        } else {
          return engine.submit_imm(w.imm, w.dst, std::move(done));
        }
      },
      s.write);
}

void Sender::Impl::run(Actions a) {
  while (true) {
    a.deliver(link, config.on_state);
    if (a.submits.empty()) return;
    Actions next;
    std::weak_ptr<Impl> weak = weak_from_this();
    for (auto& s : a.submits) {
      Transfer* t = s.transfer;
      std::string id = s.id;
      auto done = [weak, t, id](const Status& st) {
        if (auto self = weak.lock()) self->on_write_done(t, id, st);
      };
      Status st = submit(s, OnDone(DoneCallback(done)));
      // Back-pressure: the engine finishes requests on its own threads, so retrying frees up.
      const auto give_up = Clock::now() + engine.config().control_timeout;
      while (st.code() == Errc::again && Clock::now() < give_up) {
        std::this_thread::yield();
        st = submit(s, OnDone(DoneCallback(done)));
      }
      if (!st.ok()) {
        std::lock_guard lock(mutex);
        Entry* e = entries.find(id);
        if (e == nullptr) continue;
        --t->outstanding;
        stop_transfer(*t, st);
        check_transfer(next, id, *e, *t);
      }
    }
    a = std::move(next);
  }
}

}  // namespace fabric::kv

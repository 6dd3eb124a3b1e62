// Memory registration: reg_mr on the owning group's worker, reg_mrs batched per group with a
// rollback of the groups done when one fails, and dereg_mr once the region's transfers end.

#include <fmt/format.h>

#include <future>
#include <memory>

#include "engine/engine_impl.hpp"

namespace fabric {

namespace {

Status check_registration(const void* ptr, std::size_t len, Access access) {
  if (ptr == nullptr || len == 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("reg_mr needs a non-null pointer and a length > 0 (got {}, {})",
                              ptr, len));
  }
  // Any bit beyond the known ones is refused, even next to a known one: a
  // caller asking for a right this build does not know must not get a
  // registration that silently lacks it.
  constexpr auto kKnownAccess =
      static_cast<std::uint32_t>(Access::remote_write | Access::remote_read);
  if ((static_cast<std::uint32_t>(access) & ~kKnownAccess) != 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("unknown Access bits {:#x}", static_cast<std::uint32_t>(access)));
  }
  return Status::success();
}

}  // namespace

Result<Registered> TransferEngine::reg_mr(void* ptr, std::size_t len, Device device,
                                          Access access, std::optional<std::uint32_t> group) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = check_registration(ptr, len, access); !st.ok()) return st;
  auto g = impl_->group_for(device, group);
  if (!g) return g.status();
  auto* worker = impl_->workers[*g].get();
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  return worker->call<Registered>(
      [=, &self]() {
        return worker->registrar().register_memory(ptr, len, device, access, self, engine);
      },
      impl_->config.control_timeout);
}

Result<std::vector<Registered>> TransferEngine::reg_mrs(std::span<const MemoryRange> ranges,
                                                        Access access) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  // Each range's group; every group's ranges are registered in one pass of its worker.
  std::vector<std::vector<std::size_t>> by_group(impl_->workers.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    Status st = check_registration(ranges[i].ptr, ranges[i].length, access);
    auto g = impl_->group_for(ranges[i].device, ranges[i].group);
    if (st.ok() && !g) st = g.status();
    if (!st.ok()) return Status(st.code(), fmt::format("reg_mrs range {}: {}", i, st.message()));
    by_group[*g].push_back(i);
  }
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  std::vector<std::optional<Registered>> placed(ranges.size());
  // Undoes the groups done so far: nothing used the fresh registrations yet, each closes at once.
  const auto roll_back = [&] {
    for (std::size_t i = 0; i < placed.size(); ++i) {
      if (!placed[i]) continue;
      auto reg = placed[i]->handle.registration();
      auto* worker = impl_->workers[reg->group].get();
      worker->post_task([worker, reg] { worker->registrar().deregister(reg, {}); });
    }
  };
  for (std::size_t g = 0; g < by_group.size(); ++g) {
    if (by_group[g].empty()) continue;
    auto* worker = impl_->workers[g].get();
    // Copies: the caller may give up after control_timeout while the worker still reads them.
    std::vector<MemoryRange> mine;
    for (std::size_t i : by_group[g]) mine.push_back(ranges[i]);
    auto done = worker->call<std::vector<Registered>>(
        [=, &self, mine = std::move(mine), index = by_group[g]]()
            -> Result<std::vector<Registered>> {
          std::vector<Registered> out;
          out.reserve(mine.size());
          for (std::size_t j = 0; j < mine.size(); ++j) {
            const MemoryRange& r = mine[j];
            auto reg = worker->registrar().register_memory(r.ptr, r.length, r.device, access,
                                                           self, engine);
            if (!reg.ok()) {
              for (auto& ok : out) worker->registrar().deregister(ok.handle.registration(), {});
              return Status(reg.status().code(), fmt::format("reg_mrs range {}: {}", index[j],
                                                             reg.status().message()));
            }
            out.push_back(std::move(reg).value());
          }
          return out;
        },
        impl_->config.control_timeout);
    if (!done) {
      roll_back();
      return done.status();
    }
    for (std::size_t j = 0; j < by_group[g].size(); ++j) {
      placed[by_group[g][j]] = std::move((*done)[j]);
    }
  }
  std::vector<Registered> out;
  out.reserve(placed.size());
  for (auto& p : placed) out.push_back(std::move(*p));
  return out;
}

Status TransferEngine::dereg_mr(const MrHandle& handle) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_source(handle, impl_->identity); !st.ok()) return st;
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  auto reg = handle.registration();
  auto* worker = &impl_->worker_of(*reg);
  worker->post_task(
      [worker, reg, promise] { worker->registrar().deregister(reg, std::move(*promise)); });
  if (future.wait_for(impl_->config.control_timeout) != std::future_status::ready) {
    return {Errc::timeout, "dereg_mr: transfers using the region did not finish in time"};
  }
  return future.get();
}

}  // namespace fabric

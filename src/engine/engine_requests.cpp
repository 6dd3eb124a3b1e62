// Request translation: each submit_* checks its request and fills a pooled Op through
// Impl::submit, the one gated path to a worker; submit_recvs hands group 0 its receive pool.

#include <fmt/format.h>

#include <optional>

#include "engine/engine_impl.hpp"

namespace fabric {

using engine::Op;
using engine::OpKind;

namespace {

// A WRITE and a READ fill an Op alike: `local` is the registration counted in flight (a
// WRITE's source, a READ's destination), `remote` the peer's memory, and a READ has no imm.
template <typename Request>
Status fill_single(Op& op, const Request& request, std::uint32_t domains, const MrHandle& local,
                   const MrDesc& remote, std::optional<std::uint32_t> imm) {
  if (auto st = engine::plan_single_write_into(op.single.pieces, request.length, request.routing,
                                               domains);
      !st.ok()) {
    return st;
  }
  op.single.src_offset = request.src.offset;
  op.single.dst_offset = request.dst.offset;
  op.imm = imm;
  op.src = local.registration();
  op.dst = remote;
  return Status::success();
}

template <typename Request>
Status fill_paged(Op& op, const Request& request, const MrHandle& local, const MrDesc& remote,
                  std::optional<std::uint32_t> imm) {
  op.paged.page_length = request.page_length;
  op.paged.src = request.src_pages;  // copy-assigned: reuses the pooled Op's storage
  op.paged.dst = request.dst_pages;
  op.imm = imm;
  op.src = local.registration();
  op.dst = remote;
  return Status::success();
}

}  // namespace

// ---------------------------------------------------------------- messages

Status TransferEngine::submit_send(const NetAddr& to, std::span<const std::byte> message,
                                   OnDone on_done) {
  return impl_->submit(
      OpKind::send, PostKind::send, on_done,
      [&]() -> Status {
        if (auto st = engine::check_peer(to, impl_->identity); !st.ok()) return st;
        if (message.size() > to.max_message_size()) {
          return {Errc::invalid_argument,
                  fmt::format("message of {} bytes exceeds the receiver's buffer size of {} bytes",
                              message.size(), to.max_message_size())};
        }
        if (message.size() > impl_->config.max_message_size) {
          return {Errc::invalid_argument,
                  fmt::format("message of {} bytes exceeds this engine's max_message_size of {}",
                              message.size(), impl_->config.max_message_size)};
        }
        return Status::success();
      },
      [&]() -> engine::Worker& { return impl_->group0(); },
      [&](Op& op) {
        // Assigned into the pooled Op's storage: no allocation once it has held a message this
        // long.
        op.send.to = to;
        op.send.message.assign(message.begin(), message.end());
        return Status::success();
      });
}

Status TransferEngine::submit_recvs(std::size_t len, std::uint32_t count, RecvCallback on_recv) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (len < impl_->config.max_message_size) {
    return {Errc::invalid_argument,
            fmt::format("receive buffers of {} bytes cannot hold the advertised "
                        "max_message_size of {} bytes",
                        len, impl_->config.max_message_size)};
  }
  if (count == 0) return {Errc::invalid_argument, "submit_recvs needs count > 0"};
  if (!on_recv) return {Errc::invalid_argument, "submit_recvs needs a callback"};
  std::uint8_t mode = engine::kReceiveNone;
  if (!impl_->receive_mode.compare_exchange_strong(mode, engine::kReceiveRaw) &&
      mode != engine::kReceiveRaw) {
    return {Errc::invalid_argument,
            "this engine receives on channels, whose messages raw submit_recvs pools would "
            "take without routing them: an engine receives either raw or on channels"};
  }
  auto* worker = &impl_->group0();
  auto result = worker->call<bool>(
      [worker, len, count, cb = std::move(on_recv)]() mutable -> Result<bool> {
        if (auto st = worker->receives().add_pool(len, count, std::move(cb)); !st.ok()) return st;
        return true;
      },
      impl_->config.control_timeout);
  return result.status();
}

// ---------------------------------------------------------------- writes

Status TransferEngine::submit_single_write(const SingleWrite& request, OnDone on_done) {
  return impl_->submit(
      OpKind::single, PostKind::single_write, on_done,
      [&] { return engine::check_single_write(request, impl_->identity); },
      [&]() -> engine::Worker& { return impl_->worker_of(*request.src.mr.registration()); },
      [&](Op& op) {
        return fill_single(op, request, static_cast<std::uint32_t>(num_domains()),
                           request.src.mr, request.dst.mr, request.imm);
      });
}

Status TransferEngine::submit_paged_writes(const PagedWrite& request, OnDone on_done) {
  return impl_->submit(
      OpKind::paged, PostKind::paged_write, on_done,
      [&] { return engine::check_paged_write(request, impl_->identity); },
      [&]() -> engine::Worker& { return impl_->worker_of(*request.src.registration()); },
      [&](Op& op) { return fill_paged(op, request, request.src, request.dst, request.imm); });
}

// ---------------------------------------------------------------- reads
// The op's `src` registration is the local destination (counted in flight like a write's
// source, so dereg_mr waits for it) and its `dst` descriptor the peer's memory read from.

Status TransferEngine::submit_single_read(const SingleRead& request, OnDone on_done) {
  return impl_->submit(
      OpKind::single_read, PostKind::single_read, on_done,
      [&] { return engine::check_single_read(request, impl_->identity); },
      [&]() -> engine::Worker& { return impl_->worker_of(*request.dst.mr.registration()); },
      [&](Op& op) {
        return fill_single(op, request, static_cast<std::uint32_t>(num_domains()),
                           request.dst.mr, request.src.mr, std::nullopt);
      });
}

Status TransferEngine::submit_paged_reads(const PagedRead& request, OnDone on_done) {
  return impl_->submit(
      OpKind::paged_read, PostKind::paged_read, on_done,
      [&] { return engine::check_paged_read(request, impl_->identity); },
      [&]() -> engine::Worker& { return impl_->worker_of(*request.dst.registration()); },
      [&](Op& op) { return fill_paged(op, request, request.dst, request.src, std::nullopt); });
}

Status TransferEngine::submit_imm(std::uint32_t imm, const MrDesc& dst, OnDone on_done) {
  return impl_->submit(
      OpKind::imm, PostKind::imm, on_done,
      [&] { return engine::check_remote(dst, impl_->identity); },
      [&]() -> engine::Worker& { return impl_->group0(); },
      [&](Op& op) {
        op.imm = imm;
        op.dst = dst;
        return Status::success();
      });
}

// ---------------------------------------------------------------- to many peers

Status TransferEngine::submit_scatter(const Scatter& request, OnDone on_done) {
  const auto& slices = request.slices;
  std::uint32_t k = 0;  // the Domains per group, read once the gate is open
  return impl_->submit(
      OpKind::scatter, PostKind::scatter, on_done,
      [&]() -> Status {
        if (auto st = engine::check_source(request.src, impl_->identity); !st.ok()) return st;
        k = static_cast<std::uint32_t>(num_domains());
        if (auto st = engine::check_scatter_routing(request.routing, k); !st.ok()) return st;
        if (auto st = engine::check_scatter_slices(request.src, slices, impl_->identity);
            !st.ok()) {
          return st;
        }
        return impl_->check_group(
            request.group, slices.size(),
            [&](std::size_t i) -> const NetAddr& { return slices[i].dst.owner(); });
      },
      [&]() -> engine::Worker& { return impl_->worker_of(*request.src.registration()); },
      [&](Op& op) {
        if (auto st = engine::plan_scatter_into(op.scatter.pieces, slices, request.routing, k);
            !st.ok()) {
          return st;
        }
        for (const ScatterSlice& s : slices) op.scatter.dsts.push_back(s.dst);
        op.imm = request.imm;
        op.src = request.src.registration();
        if (request.group) op.group = request.group->id;
        return Status::success();
      });
}

Status TransferEngine::submit_barrier(const Barrier& request, OnDone on_done) {
  return impl_->submit(
      OpKind::barrier, PostKind::barrier, on_done,
      [&]() -> Status {
        for (std::size_t i = 0; i < request.dsts.size(); ++i) {
          if (auto st = engine::check_remote(request.dsts[i], impl_->identity); !st.ok()) {
            return {st.code(), fmt::format("peer {}: {}", i, st.message())};
          }
        }
        return impl_->check_group(
            request.group, request.dsts.size(),
            [&](std::size_t i) -> const NetAddr& { return request.dsts[i].owner(); });
      },
      [&]() -> engine::Worker& { return impl_->group0(); },
      [&](Op& op) {
        op.barrier.dsts.assign(request.dsts.begin(), request.dsts.end());
        op.imm = request.imm;
        if (request.group) op.group = request.group->id;
        return Status::success();
      });
}

}  // namespace fabric

#pragma once
// The Engine methods, bound in engine_bind.cpp. Each converts its arguments
// with the GIL held and calls the engine with it released; errors raise.

#include <pybind11/pybind11.h>

#include "arg_types.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine.hpp"
#include "memory.hpp"
#include "transfer.hpp"

namespace fabric::python {

std::unique_ptr<PyEngine> make_engine(
    const std::string& provider, std::int64_t domains_per_group, const std::string& bind_address,
    std::int64_t max_message_size, std::int64_t max_outstanding_requests, std::int64_t send_slots,
    std::int64_t request_timeout_ms, std::int64_t control_timeout_ms, std::int64_t drain_timeout_ms,
    bool busy_poll, std::optional<bool> delivery_complete, std::int64_t idle_spin_us,
    std::int64_t idle_yield_us, std::int64_t idle_sleep_us, const std::string& backend,
    const std::string& verbs_device, std::optional<std::int64_t> groups, std::int64_t host_group,
    bool post_on_submit, const std::string& thread_cpus, bool record_post_timings,
    std::int64_t metrics_peer_labels);

pybind11::tuple reg_mr(PyEngine& self, MemoryArg obj, std::optional<std::int64_t> length,
                       DeviceArg device, pybind11::object owner, bool remote_read,
                       std::optional<std::int64_t> group);
void dereg_mr(PyEngine& self, const PyMrHandle& handle);

std::shared_ptr<Transfer> send(PyEngine& self, const NetAddr& to, BufferArg data,
                               const pybind11::object& callback);
// Calls fn(message) (or fn(message, sender) when sender is given) with a read-only memoryview of
// `data`, released when fn returns: the engine re-posts the buffer behind it. GIL held.
void call_with_view(pybind11::handle fn, std::span<const std::byte> data,
                    pybind11::handle sender = pybind11::handle());
void submit_recvs(PyEngine& self, std::int64_t length, std::int64_t count,
                  const pybind11::object& callback);

std::shared_ptr<Transfer> single_write(PyEngine& self, const PyMrHandle& src, const MrDesc& dst,
                                       std::int64_t length, std::int64_t src_offset,
                                       std::int64_t dst_offset, std::optional<std::int64_t> imm,
                                       std::int64_t num_shards, std::optional<std::int64_t> domain,
                                       const pybind11::object& callback);
std::shared_ptr<Transfer> paged_writes(PyEngine& self, const PyMrHandle& src, const MrDesc& dst,
                                       std::int64_t page_length, IndicesArg src_indices,
                                       IndicesArg dst_indices,
                                       std::optional<std::int64_t> src_stride,
                                       std::optional<std::int64_t> dst_stride,
                                       std::int64_t src_offset, std::int64_t dst_offset,
                                       std::optional<std::int64_t> imm,
                                       const pybind11::object& callback);
std::shared_ptr<Transfer> imm(PyEngine& self, std::int64_t value, const MrDesc& dst,
                              const pybind11::object& callback);

PeerGroupHandle add_peer_group(PyEngine& self, const std::vector<NetAddr>& peers);
std::shared_ptr<Transfer> scatter(PyEngine& self, const PyMrHandle& src, SlicesArg slices,
                                  std::optional<PeerGroupHandle> group,
                                  std::optional<std::int64_t> imm, RoutingArg routing,
                                  const pybind11::object& callback);
std::shared_ptr<Transfer> barrier(PyEngine& self, std::int64_t value,
                                  const std::vector<MrDesc>& dsts,
                                  std::optional<PeerGroupHandle> group,
                                  const pybind11::object& callback);

void expect_imm_count(PyEngine& self, std::int64_t value, std::int64_t count,
                      const pybind11::object& callback);
std::shared_ptr<PyImmCounter> imm_counter(PyEngine& self, std::int64_t value);
void release_imm_counter(PyEngine& self, std::int64_t value);

}  // namespace fabric::python

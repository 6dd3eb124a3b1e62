// fabric_lib.moe._moe: one rank of an expert-parallel group (MoeGroup, driven by the CPU
// device) on the given fabric_lib.Engine, beside the process's other workloads, or on an engine
// of its own. The DeepEP-shaped API on top is python/fabric_lib/moe/_buffer.py; docs/moe.md
// describes both.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"
#include "fabric/moe/host_device.hpp"
#include "../arg_types.hpp"
#include "../buffer.hpp"
#include "../errors.hpp"
#include "../workload_engine.hpp"

namespace py = pybind11;
using namespace fabric;
using namespace fabric::moe;
using fabric::python::BufferArg;
using fabric::python::BytesView;
using fabric::python::check;
using fabric::python::raise_status;
using fabric::python::WorkloadEngine;

namespace {

ElementType element_type(const std::string& name) {
  if (name == "bf16" || name == "bfloat16") return ElementType::bf16;
  if (name == "f32" || name == "float32") return ElementType::f32;
  throw py::value_error("element type must be 'bf16' or 'f32', not '" + name + "'");
}

class Group {
 public:
  Group(std::uint32_t rank, std::uint32_t world_size, std::uint32_t num_experts, std::uint32_t hidden,
        std::uint32_t max_tokens_per_rank, std::uint32_t top_k, py::function all_gather,
        const std::string& provider, std::uint32_t dispatch_element_bytes, std::uint32_t num_scales,
        const std::string& combine_input, const std::string& combine_output,
        std::uint32_t max_private_tokens, std::uint32_t dp_size, std::uint32_t node_size,
        std::uint32_t expert_alignment, std::uint32_t timeout_ms, std::uint32_t host_threads,
        std::uint32_t request_timeout_ms, bool record_post_timings, bool busy_poll,
        const std::string& bind_address, const std::string& proxy, std::uint32_t idle_spin_us,
        std::uint32_t idle_yield_us, std::uint32_t idle_sleep_us, const py::object& engine)
      : engine_(engine, [&] {
          EngineConfig ec;
          ec.idle_spin = std::chrono::microseconds(idle_spin_us);
          ec.idle_yield = std::chrono::microseconds(idle_yield_us);
          ec.idle_sleep = std::chrono::microseconds(idle_sleep_us);
          ec.provider = provider;
          ec.bind_address = bind_address;
          ec.request_timeout = std::chrono::milliseconds(request_timeout_ms);
          ec.record_post_timings = record_post_timings;
          ec.busy_poll = busy_poll;
          return ec;
        }) {
    MoeConfig c;
    c.rank = rank;
    c.world_size = world_size;
    c.num_experts = num_experts;
    c.hidden = hidden;
    c.max_tokens_per_rank = max_tokens_per_rank;
    c.top_k = top_k;
    c.dispatch_element_bytes = dispatch_element_bytes;
    c.num_scales = num_scales;
    c.combine_input = element_type(combine_input);
    c.combine_output = element_type(combine_output);
    c.max_private_tokens = max_private_tokens;
    c.dp_size = dp_size;
    c.node_size = node_size;
    c.expert_alignment = expert_alignment;
    c.timeout = std::chrono::milliseconds(timeout_ms);
    c.host_threads = host_threads;
    // Runs on this thread during create(), which runs without the GIL: a shared engine's
    // callback thread may need it (another workload's Python callback) before create() is done.
    AllGather gather = [&all_gather](std::span<const std::byte> mine)
        -> Result<std::vector<std::vector<std::byte>>> {
      py::gil_scoped_acquire gil;
      try {
        py::list blobs = all_gather(py::bytes(reinterpret_cast<const char*>(mine.data()), mine.size()));
        std::vector<std::vector<std::byte>> out;
        for (const auto& b : blobs) {
          const std::string s = py::cast<py::bytes>(b);
          const auto* p = reinterpret_cast<const std::byte*>(s.data());
          out.emplace_back(p, p + s.size());
        }
        return out;
      } catch (const std::exception& e) {
        return Status(Errc::invalid_argument, std::string("moe all_gather raised: ") + e.what());
      }
    };
    ProxyMode mode = ProxyMode::inline_steps;
    if (proxy == "thread") mode = ProxyMode::thread;
    else if (proxy == "watcher") mode = ProxyMode::watcher;
    else if (proxy != "inline") throw py::value_error("proxy must be 'inline', 'thread' or 'watcher'");
    TransferEngine& e = engine_.get();
    Result<std::unique_ptr<MoeGroup>> group = Status(Errc::invalid_argument, "not created");
    {
      py::gil_scoped_release release;
      group = MoeGroup::create(e, c, gather);
    }
    if (!group.ok()) raise_status(group.status());
    group_ = std::move(group.value());
    device_ = std::make_unique<HostDevice>(*group_, mode, &e);
  }

  ~Group() { close(); }

  // The group gives its immediates and registration back to the engine, which an own engine
  // then stops and a shared one keeps for the process's other workloads.
  void close() {
    {
      py::gil_scoped_release release;
      device_.reset();
      group_.reset();
    }
    engine_.close();
  }

  MoeGroup& group() {
    if (!group_) throw py::value_error("the moe group is closed");
    return *group_;
  }

  void dispatch_send(const BufferArg& x, const BufferArg& scales, const BufferArg& topk,
                     std::uint32_t tokens) {
    BytesView xv(x, "x", false), sv(scales, "scales", false), tv(topk, "topk_idx", false);
    auto& g = group();
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->dispatch_send(xv.bytes(), sv.as<const float>(), tv.as<const std::int32_t>(), tokens);
    }
    (void)g;
    check(st);
  }

  void dispatch_recv(const BufferArg& recv_x, const BufferArg& recv_scales,
                     const BufferArg& counts) {
    BytesView xv(recv_x, "recv_x", true), sv(recv_scales, "recv_scales", true),
        cv(counts, "recv_count", true);
    group();
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->dispatch_recv(xv.mutable_bytes(), sv.as<float>(), cv.as<std::uint32_t>());
    }
    check(st);
  }

  void combine_send(const BufferArg& expert_out) {
    BytesView v(expert_out, "x", false);
    group();
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->combine_send(v.bytes());
    }
    check(st);
  }

  void combine_recv(const BufferArg& weights, const BufferArg& out) {
    BytesView wv(weights, "topk_weights", false), ov(out, "out", true);
    group();
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->combine_recv(wv.as<const float>(), ov.mutable_bytes());
    }
    check(st);
  }

  void quiesce() {
    auto& g = group();
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->wait_idle();
      if (st.ok()) st = g.quiesce();
    }
    check(st);
  }

  // The proxy's last iteration finished (a no-op inline).
  void wait_idle() {
    Status st;
    {
      py::gil_scoped_release release;
      st = device_->wait_idle();
    }
    check(st);
  }

  // The engine's requests not yet completed (a snapshot).
  [[nodiscard]] std::uint32_t outstanding_requests() const {
    if (!engine_) throw py::value_error("the moe group is closed");
    return engine_.get().outstanding_requests();
  }

  py::dict layout() {
    auto& g = group();
    const auto& l = g.layout(g.config().rank);
    py::dict d;
    d["total_bytes"] = l.total_bytes;
    d["private_bytes"] = l.exchange_offset - l.private_offset;
    d["exchange_bytes"] = l.exchange_bytes;
    d["send_bytes"] = l.send_bytes;
    d["combine_bytes"] = l.combine_bytes;
    d["recv_rows"] = l.recv_rows;
    d["slot_bytes"] = l.slot_bytes;
    d["row_bytes"] = l.row_bytes;
    d["private_tokens"] = l.private_tokens;
    d["local_experts"] = g.placement().local_experts(g.config().rank);
    d["first_expert"] = g.placement().first_expert(g.config().rank);
    return d;
  }

  py::dict stats() {
    {
      py::gil_scoped_release release;
      (void)device_->wait_idle();  // the proxy's counters are final once it is idle
    }
    const auto s = group().stats();
    py::dict d;
    d["iterations"] = s.iterations;
    d["writes_posted"] = s.writes_posted;
    d["bytes_posted"] = s.bytes_posted;
    d["direct_bytes"] = s.direct_bytes;
    d["imms_expected"] = s.imms_expected;
    d["imms_consumed"] = s.imms_consumed;
    d["max_writes_per_peer_dispatch"] = s.max_writes_per_peer_dispatch;
    d["max_writes_per_peer_combine"] = s.max_writes_per_peer_combine;
    d["submissions"] = s.submissions;
    d["completions"] = s.completions;
    d["stray_immediates"] = group().stray_immediates();
    return d;
  }

  py::dict timeline() {
    const auto t = group().timeline();
    py::dict d;
    d["begin_dispatch"] = t.begin_dispatch;
    d["private_posted"] = t.private_posted;
    d["routes_in"] = t.routes_in;
    d["overflow_posted"] = t.overflow_posted;
    d["tokens_in"] = t.tokens_in;
    d["combine_posted"] = t.combine_posted;
    d["combine_in"] = t.combine_in;
    d["peers_posted"] = t.peers_posted;
    return d;
  }

  std::vector<std::uint32_t> expert_begin() { return group().receive_plan().expert_begin; }
  std::vector<std::uint32_t> broken_ranks() { return group().broken_ranks(); }
  std::uint32_t epoch() { return group().epoch(); }

  py::list post_timings() {
    py::list out;
    if (!engine_) return out;
    for (const auto& t : engine_.get().take_post_timings()) {
      py::dict d;
      d["kind"] = static_cast<int>(t.kind);
      d["posts"] = t.posts;
      d["called"] = t.called;
      d["first_post"] = t.first_post;
      d["last_post"] = t.last_post;
      out.append(d);
    }
    return out;
  }

 private:
  WorkloadEngine engine_;
  std::unique_ptr<MoeGroup> group_;
  std::unique_ptr<HostDevice> device_;
};

}  // namespace

namespace fabric::python {

// fabric_lib.moe._moe, a submodule of fabric_lib._native (module.cpp).
void bind_moe(py::module_& m) {
  m.doc() = "One rank of a MoE dispatch/combine group on the host device (docs/moe.md).";
  const EngineConfig engine_defaults;
  py::class_<Group>(m, "Group",
                    "One rank's MoE group on its engine (fabric_lib.moe.Buffer wraps it).")
      .def(py::init<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                    std::uint32_t, py::function, const std::string&, std::uint32_t, std::uint32_t,
                    const std::string&, const std::string&, std::uint32_t, std::uint32_t,
                    std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, bool,
                    bool, const std::string&, const std::string&, std::uint32_t, std::uint32_t,
                    std::uint32_t, py::object>(),
           py::arg("rank"), py::arg("world_size"), py::arg("num_experts"), py::arg("hidden"),
           py::arg("max_tokens_per_rank"), py::arg("top_k"), py::arg("all_gather"),
           py::arg("provider") = "shm", py::arg("dispatch_element_bytes") = 2,
           py::arg("num_scales") = 0, py::arg("combine_input") = "bf16",
           py::arg("combine_output") = "f32", py::arg("max_private_tokens") = 16,
           py::arg("dp_size") = 1, py::arg("node_size") = 1, py::arg("expert_alignment") = 1,
           py::arg("timeout_ms") = 10000, py::arg("host_threads") = 1,
           py::arg("request_timeout_ms") = 5000, py::arg("record_post_timings") = false,
           py::arg("busy_poll") = false, py::arg("bind_address") = "127.0.0.1", py::arg("proxy") = "inline",
           py::arg("idle_spin_us") = static_cast<std::uint32_t>(engine_defaults.idle_spin.count()),
           py::arg("idle_yield_us") = static_cast<std::uint32_t>(engine_defaults.idle_yield.count()),
           py::arg("idle_sleep_us") = static_cast<std::uint32_t>(engine_defaults.idle_sleep.count()),
           py::arg("engine") = py::none())
      .def("dispatch_send", &Group::dispatch_send, py::arg("x"), py::arg("scales"), py::arg("topk_idx"),
           py::arg("tokens"))
      .def("dispatch_recv", &Group::dispatch_recv, py::arg("recv_x"), py::arg("recv_scales"),
           py::arg("recv_count"))
      .def("combine_send", &Group::combine_send, py::arg("x"))
      .def("combine_recv", &Group::combine_recv, py::arg("topk_weights"), py::arg("out"))
      .def("quiesce", &Group::quiesce)
      .def("wait_idle", &Group::wait_idle)
      .def("outstanding_requests", &Group::outstanding_requests)
      .def("close", &Group::close)
      .def("layout", &Group::layout)
      .def("stats", &Group::stats)
      .def("timeline", &Group::timeline)
      .def("post_timings", &Group::post_timings)
      .def("expert_begin", &Group::expert_begin)
      .def("broken_ranks", &Group::broken_ranks)
      .def_property_readonly("epoch", &Group::epoch);
}

}  // namespace fabric::python

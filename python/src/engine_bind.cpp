// The Engine class as Python sees it: names, defaults and docstrings. The
// stub (fabric_lib/_native.pyi) repeats the docstrings; test_stubs.py checks.

#include <string>

#include "engine.hpp"
#include "engine_control.hpp"
#include "engine_ops.hpp"
#include "errors.hpp"
#include "requests.hpp"
#include "transfer.hpp"
#include "watcher.hpp"

namespace py = pybind11;

namespace fabric::python {

void bind_engine(py::module_& m) {
  const EngineConfig d;
  py::class_<PyEngine> engine(m, "Engine",
                              "A TransferEngine: one per process. Use it as a context manager, or "
                              "call stop(), so its threads end before the interpreter does.");
  engine
      .def(py::init(&make_engine), py::arg("provider") = d.provider,
           py::arg("domains_per_group") = d.domains_per_group, py::kw_only(),
           py::arg("bind_address") = d.bind_address,
           py::arg("max_message_size") = d.max_message_size,
           py::arg("max_outstanding_requests") = d.max_outstanding_requests,
           py::arg("send_slots") = d.send_slots,
           py::arg("request_timeout_ms") = d.request_timeout.count(),
           py::arg("control_timeout_ms") = d.control_timeout.count(),
           py::arg("drain_timeout_ms") = d.drain_timeout.count(),
           py::arg("busy_poll") = d.busy_poll, py::arg("delivery_complete") = py::none(),
           py::arg("idle_spin_us") = d.idle_spin.count(),
           py::arg("idle_yield_us") = d.idle_yield.count(),
           py::arg("idle_sleep_us") = d.idle_sleep.count(), py::arg("backend") = "libfabric",
           py::arg("verbs_device") = d.verbs.device, py::arg("groups") = py::none(),
           py::arg("host_group") = d.host_group, py::arg("post_on_submit") = d.post_on_submit,
           py::arg("thread_cpus") = "", py::arg("record_post_timings") = d.record_post_timings,
           py::arg("metrics_peer_labels") = d.metrics_peer_labels,
           "Opens the provider's Domains and starts the worker and callback threads. provider: "
           "\"shm\", \"tcp\", \"sockets\", \"udp\", \"efa\", \"auto\" or any libfabric provider "
           "string. backend: \"libfabric\" or \"verbs\" (RC NICs; verbs_device picks one, empty: "
           "every active port). thread_cpus (cpulist, \"2-3\"): where every thread of the engine "
           "runs; empty: FABRIC_CPUS, else the process's CPUs, never the creating thread's mask. "
           "record_post_timings: stamp each request on its way to the NIC "
           "(take_post_timings()). metrics_peer_labels: peers counted under a peer label of "
           "their own in metrics(), the first resolved; the rest count as 'other' (0..1024). "
           "Raises NotFoundError or UnsupportedError if the provider cannot be used.")
      .def_property_readonly(
          "main_address", [](const PyEngine& e) { return e.address(); },
          "This engine's NetAddr; hand it to peers out of band.")
      .def_property_readonly(
          "num_domains", [](const PyEngine& e) { return e.address().num_domains(); },
          "Domains (NICs) per group.")
      .def_property_readonly(
          "num_groups", [](const PyEngine& e) { return e.address().num_groups(); },
          "DomainGroups: one per GPU of the topology plan unless groups= was given.")
      .def_property_readonly(
          "max_message_size", [](const PyEngine& e) { return e.config().max_message_size; },
          "Largest message send() may carry and submit_recvs() buffers must hold.")
      .def_property_readonly("stopped", &PyEngine::stopped, "True after stop().")
      .def_property_readonly(
          "outstanding_requests",
          [](PyEngine& e) {
            return e.call_released([](TransferEngine& t) { return t.outstanding_requests(); });
          },
          "Requests submitted and not yet completed (a snapshot). Raises ShutdownError after "
          "stop().")
      .def_property_readonly(
          "thread_cpus",
          [](PyEngine& e) {
            return e.call_released(
                [](TransferEngine& t) { return t.thread_cpus().cpus.to_string(); });
          },
          "The CPUs (cpulist) every thread of this engine runs on. Raises ShutdownError after "
          "stop().")
      .def_property_readonly("groups", &group_info,
                             "Every DomainGroup as a dict: gpu (its CUDA device, -1 none), cpus "
                             "(where its worker runs) and nics (each Domain's NIC, in order).")
      .def_property_readonly("domain_nics", &domain_nics,
                             "What each Domain of group 0 opened, Domain i at [i].")
      .def("reg_mrs", &reg_mrs, py::arg("objs"), py::kw_only(), py::arg("remote_read") = false,
           py::arg("group") = py::none(),
           "Registers many objects (as reg_mr's obj) in one pass of the worker and returns a "
           "list of (MrHandle, MrDesc), in order. All or nothing: on an error none stays "
           "registered and the error names the object that failed.")
      .def("fence_peer", &fence_peer, py::arg("peer"),
           "Once it returns, no WRITE or SEND from `peer` lands here any more, not even one it "
           "posted before, and operations to it fail (docs/api.md, \"Fencing a peer\"). "
           "UnsupportedError where the provider cannot stop a peer's writes (shm).")
      .def("progress", &progress,
           "Runs one pass of each group's worker loop on this thread (post, poll, count "
           "immediates), skipping a group whose worker is in a pass; False once stop() began.")
      .def("take_post_timings", &take_post_timings,
           "The posting-path stamps recorded since the last call (record_post_timings=True), as "
           "dicts: kind, posts, called, enqueued, picked_up, first_post, last_post "
           "(steady-clock ns).")
      .def_property_readonly(
          "callback_errors", [](PyEngine& e) { return e.hub().errors(); },
          "How many callbacks raised (each was logged to the \"fabric_lib\" logger).")
      .def("reg_mr", &reg_mr, py::arg("obj"), py::arg("length") = py::none(),
           py::arg("device") = py::none(), py::kw_only(), py::arg("owner") = py::none(),
           py::arg("remote_read") = false, py::arg("group") = py::none(),
           "Registers memory on every Domain of one group (group=, else the device's GPU's "
           "group, else the engine's host_group) and returns (MrHandle, MrDesc). obj is a writable "
           "C-contiguous buffer (numpy array, bytearray, ...), a contiguous torch tensor, or an "
           "int address with length and device (\"cpu\", \"cuda:N\"). The engine keeps obj (and "
           "owner) alive until dereg_mr() or stop(). Peers may only write unless remote_read.")
      .def("dereg_mr", &dereg_mr, py::arg("handle"),
           "Revokes a registration on every Domain once local transfers from it have finished; "
           "later remote writes to it fail on the writer's side.")
      .def("send", &send, py::arg("to"), py::arg("data"), py::kw_only(),
           py::arg("callback") = py::none(),
           "Copies data (bytes-like) and SENDs it to `to`. At most both engines' "
           "max_message_size bytes.")
      .def("submit_recvs", &submit_recvs, py::arg("length"), py::arg("count"), py::arg("callback"),
           "Posts `count` receive buffers of `length` bytes (>= max_message_size). "
           "callback(message: memoryview) runs on the callback thread for every message; the "
           "memoryview is read-only and valid only during the call, so copy what you keep.")
      .def("single_write", &single_write, py::arg("src"), py::arg("dst"), py::arg("length"),
           py::kw_only(), py::arg("src_offset") = 0, py::arg("dst_offset") = 0,
           py::arg("imm") = py::none(), py::arg("num_shards") = 0, py::arg("domain") = py::none(),
           py::arg("callback") = py::none(),
           "WRITEs src[src_offset:+length] to dst[dst_offset:+length], with an optional 32-bit "
           "imm. num_shards (0: one per Domain) shards it; domain pins it to one Domain.")
      .def("paged_writes", &paged_writes, py::arg("src"), py::arg("dst"), py::arg("page_length"),
           py::arg("src_indices"), py::arg("dst_indices"), py::kw_only(),
           py::arg("src_stride") = py::none(), py::arg("dst_stride") = py::none(),
           py::arg("src_offset") = 0, py::arg("dst_offset") = 0, py::arg("imm") = py::none(),
           py::arg("callback") = py::none(),
           "For each i, WRITEs page_length bytes from src_offset + src_indices[i] * src_stride "
           "to dst_offset + dst_indices[i] * dst_stride. Strides default to page_length; indices "
           "are int sequences or uint32 arrays of equal length. P pages carry P immediates.")
      .def("imm", &imm, py::arg("imm"), py::arg("dst"), py::kw_only(),
           py::arg("callback") = py::none(),
           "An immediate-only (zero-length) WRITE against dst: one immediate at the receiver.")
      .def("add_peer_group", &add_peer_group, py::arg("peers"),
           "Resolves a list of NetAddrs once for scatter() and barrier(); valid until stop().")
      .def("scatter", &scatter, py::arg("src"), py::arg("slices"), py::kw_only(),
           py::arg("group") = py::none(), py::arg("imm") = py::none(), py::arg("routing") = "peers",
           py::arg("callback") = py::none(),
           "WRITEs one slice of src per peer. slices: ScatterSlice objects or (dst, length[, "
           "src_offset[, dst_offset]]) tuples, in group order when group is given. routing: "
           "\"peers\" (slice i on Domain i mod K), \"bytes\" (each slice over all Domains) or a "
           "Domain index.")
      .def("barrier", &barrier, py::arg("imm"), py::arg("dsts"), py::kw_only(),
           py::arg("group") = py::none(), py::arg("callback") = py::none(),
           "An immediate-only WRITE to each peer's MrDesc in dsts (one immediate per peer).")
      .def("expect_imm_count", &expect_imm_count, py::arg("imm"), py::arg("count"),
           py::arg("callback"),
           "callback(imm, count) runs on the callback thread once `count` WRITEs carrying imm "
           "have landed. Arrivals before this call count; surplus ones carry over.")
      .def("imm_counter", &imm_counter, py::arg("imm"),
           "A pollable ImmCounter for imm; it takes every arrival not yet consumed. One per imm "
           "value.")
      .def("release_imm_counter", &release_imm_counter, py::arg("imm"),
           "Detaches imm's counter; later arrivals are counted internally again. NotFoundError if "
           "there is none.")
      .def("stop", &PyEngine::stop,
           "Stops accepting work, drains or fails what is outstanding (every Transfer "
           "completes), and joins the engine's threads. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyEngine& self, const py::args&) {
             self.stop();
             return false;
           })
      .def("__repr__", [](const PyEngine& e) {
        return "<fabric_lib.Engine " + e.address().provider() +
               " domains=" + std::to_string(e.address().num_domains()) +
               (e.stopped() ? " stopped>" : ">");
      });
  bind_engine_watcher(engine);
}

}  // namespace fabric::python

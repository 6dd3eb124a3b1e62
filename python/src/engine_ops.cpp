// What each Engine method does: convert the Python arguments with the GIL
// held, then call the engine with it released.

#include "engine_ops.hpp"

#include <string>
#include <vector>

#include "buffer.hpp"
#include "errors.hpp"
#include "requests.hpp"
#include "submit.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

using Ms = std::chrono::milliseconds;
using Us = std::chrono::microseconds;

std::string imm_text(const std::optional<std::uint32_t>& imm) {
  return imm ? ", imm=" + std::to_string(*imm) : "";
}

// The recv callback's memoryview points into an engine buffer that is
// re-posted when the callback returns; releasing the view makes later use of
// it raise instead of reading a message that is no longer there.
void release_view(const py::object& view) {
  PyObject* result = PyObject_CallMethod(view.ptr(), "release", nullptr);
  if (result != nullptr) {
    Py_DECREF(result);
    return;
  }
  PyErr_Clear();
  PyErr_SetString(PyExc_BufferError,
                  "the recv callback kept a buffer export of its message (such as "
                  "pickle.PickleBuffer(msg)) past its return; the engine reuses that buffer "
                  "now. Copy the data instead (bytes(msg), numpy.array(msg))");
  throw py::error_already_set();
}

}  // namespace

void call_with_view(py::handle fn, std::span<const std::byte> data, py::handle sender) {
  auto view = py::reinterpret_steal<py::object>(
      PyMemoryView_FromMemory(const_cast<char*>(reinterpret_cast<const char*>(data.data())),
                              static_cast<Py_ssize_t>(data.size()), PyBUF_READ));
  if (!view) throw py::error_already_set();
  try {
    if (sender) {
      fn(view, sender);
    } else {
      fn(view);
    }
  } catch (py::error_already_set&) {
    PyObject* ignored = PyObject_CallMethod(view.ptr(), "release", nullptr);
    if (ignored == nullptr) PyErr_Clear();
    Py_XDECREF(ignored);
    throw;
  }
  release_view(view);
}

std::unique_ptr<PyEngine> make_engine(
    const std::string& provider, std::int64_t domains_per_group, const std::string& bind_address,
    std::int64_t max_message_size, std::int64_t max_outstanding_requests, std::int64_t send_slots,
    std::int64_t request_timeout_ms, std::int64_t control_timeout_ms, std::int64_t drain_timeout_ms,
    bool busy_poll, std::optional<bool> delivery_complete, std::int64_t idle_spin_us,
    std::int64_t idle_yield_us, std::int64_t idle_sleep_us, const std::string& backend,
    const std::string& verbs_device, std::optional<std::int64_t> groups, std::int64_t host_group,
    bool post_on_submit, const std::string& thread_cpus, bool record_post_timings,
    std::int64_t metrics_peer_labels) {
  EngineConfig c;
  if (!thread_cpus.empty()) c.thread_cpus = take(CpuSet::parse(thread_cpus));
  if (groups) c.groups.assign(to_u32(*groups, "groups"), GroupConfig{});
  c.host_group = to_u32(host_group, "host_group");
  if (backend == "verbs") {
    c.backend = Backend::verbs;
  } else if (backend != "libfabric") {
    throw py::value_error("backend must be \"libfabric\" or \"verbs\", not \"" + backend + "\"");
  }
  c.verbs.device = verbs_device;
  c.provider = provider;
  c.domains_per_group = to_u32(domains_per_group, "domains_per_group");
  c.bind_address = bind_address;
  c.max_message_size = to_u32(max_message_size, "max_message_size");
  c.max_outstanding_requests = to_u32(max_outstanding_requests, "max_outstanding_requests");
  c.send_slots = to_u32(send_slots, "send_slots");
  c.request_timeout = Ms(to_offset(request_timeout_ms, "request_timeout_ms"));
  c.control_timeout = Ms(to_offset(control_timeout_ms, "control_timeout_ms"));
  c.drain_timeout = Ms(to_offset(drain_timeout_ms, "drain_timeout_ms"));
  c.busy_poll = busy_poll;
  c.post_on_submit = post_on_submit;
  c.record_post_timings = record_post_timings;
  c.metrics_peer_labels = to_u32(metrics_peer_labels, "metrics_peer_labels");
  c.delivery_complete = delivery_complete;
  c.idle_spin = Us(to_offset(idle_spin_us, "idle_spin_us"));
  c.idle_yield = Us(to_offset(idle_yield_us, "idle_yield_us"));
  c.idle_sleep = Us(to_offset(idle_sleep_us, "idle_sleep_us"));
  return std::make_unique<PyEngine>(c);
}

py::tuple reg_mr(PyEngine& self, MemoryArg obj, std::optional<std::int64_t> length,
                 DeviceArg device, py::object owner, bool remote_read,
                 std::optional<std::int64_t> group) {
  MemoryTarget t = resolve_memory(obj, length, device, std::move(owner));
  const Access access =
      remote_read ? (Access::remote_write | Access::remote_read) : Access::remote_write;
  std::optional<std::uint32_t> g;
  if (group) g = to_u32(*group, "group");
  Registered r = take(self.call_released(
      [&](TransferEngine& e) { return e.reg_mr(t.ptr, t.length, t.device, access, g); }));
  self.pin(r.handle.registration().get(), t.keeper);
  return py::make_tuple(PyMrHandle{r.handle, t.origin, t.keeper}, r.desc);
}

void dereg_mr(PyEngine& self, const PyMrHandle& handle) {
  MrHandle h = handle.handle;
  check(self.call_released([&](TransferEngine& e) { return e.dereg_mr(h); }));
  // Only now: after a timeout the region is still registered and must stay alive.
  self.unpin(h.registration().get());
}

std::shared_ptr<Transfer> send(PyEngine& self, const NetAddr& to, BufferArg data,
                               const py::object& callback) {
  BytesView view(data, "data");
  const auto bytes = view.bytes();
  return submit(
      self, callback, "send", [&] { return "send(" + std::to_string(bytes.size()) + " bytes)"; },
      [&](TransferEngine& e, OnDone done) { return e.submit_send(to, bytes, std::move(done)); });
}

void submit_recvs(PyEngine& self, std::int64_t length, std::int64_t count,
                  const py::object& callback) {
  if (PyCallable_Check(callback.ptr()) == 0) throw py::type_error("callback must be callable");
  const std::size_t len = to_offset(length, "length");
  const std::uint32_t n = to_u32(count, "count");
  const std::uint64_t id = self.hub().add(
      callback, "recv pool (" + std::to_string(n) + " x " + std::to_string(len) + " bytes)");
  RecvCallback on_recv = [hub = self.hub_ptr(), id](std::span<const std::byte> data) {
    hub->invoke(id, false, [&](py::handle fn) { call_with_view(fn, data); });
  };
  const Status status = self.call_released(
      [&](TransferEngine& e) { return e.submit_recvs(len, n, std::move(on_recv)); });
  if (!status.ok()) {
    self.hub().erase(id);
    raise_status(status);
  }
}

std::shared_ptr<Transfer> single_write(PyEngine& self, const PyMrHandle& src, const MrDesc& dst,
                                       std::int64_t length, std::int64_t src_offset,
                                       std::int64_t dst_offset, std::optional<std::int64_t> imm,
                                       std::int64_t num_shards, std::optional<std::int64_t> domain,
                                       const py::object& callback) {
  SingleWrite w;
  w.length = to_offset(length, "length");
  w.imm = to_imm(imm);
  w.src = {src.handle, to_offset(src_offset, "src_offset")};
  w.dst = {dst, to_offset(dst_offset, "dst_offset")};
  w.routing = to_write_routing(num_shards, domain);
  return submit(
      self, callback, "single_write",
      [&] {
        return "single_write(length=" + std::to_string(w.length) +
               ", src_offset=" + std::to_string(w.src.offset) +
               ", dst_offset=" + std::to_string(w.dst.offset) + imm_text(w.imm) + ")";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_single_write(w, std::move(done)); });
}

std::shared_ptr<Transfer> paged_writes(
    PyEngine& self, const PyMrHandle& src, const MrDesc& dst, std::int64_t page_length,
    IndicesArg src_indices, IndicesArg dst_indices, std::optional<std::int64_t> src_stride,
    std::optional<std::int64_t> dst_stride, std::int64_t src_offset, std::int64_t dst_offset,
    std::optional<std::int64_t> imm, const py::object& callback) {
  PagedWrite w;
  w.page_length = to_offset(page_length, "page_length");
  w.imm = to_imm(imm);
  w.src = src.handle;
  w.dst = dst;
  w.src_pages.indices = to_indices(src_indices, "src_indices");
  w.dst_pages.indices = to_indices(dst_indices, "dst_indices");
  // A stride defaults to the page length: pages packed back to back.
  w.src_pages.stride = src_stride ? to_offset(*src_stride, "src_stride") : w.page_length;
  w.dst_pages.stride = dst_stride ? to_offset(*dst_stride, "dst_stride") : w.page_length;
  w.src_pages.offset = to_offset(src_offset, "src_offset");
  w.dst_pages.offset = to_offset(dst_offset, "dst_offset");
  return submit(
      self, callback, "paged_writes",
      [&] {
        return "paged_writes(" + std::to_string(w.src_pages.indices.size()) + " pages of " +
               std::to_string(w.page_length) + " bytes" + imm_text(w.imm) + ")";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_paged_writes(w, std::move(done)); });
}

std::shared_ptr<Transfer> imm(PyEngine& self, std::int64_t value, const MrDesc& dst,
                              const py::object& callback) {
  const std::uint32_t v = to_u32(value, "imm");
  return submit(
      self, callback, "imm", [&] { return "imm(" + std::to_string(v) + ")"; },
      [&](TransferEngine& e, OnDone done) { return e.submit_imm(v, dst, std::move(done)); });
}

PeerGroupHandle add_peer_group(PyEngine& self, const std::vector<NetAddr>& peers) {
  return take(self.call_released([&](TransferEngine& e) { return e.add_peer_group(peers); }));
}

std::shared_ptr<Transfer> scatter(PyEngine& self, const PyMrHandle& src, SlicesArg slices,
                                  std::optional<PeerGroupHandle> group,
                                  std::optional<std::int64_t> imm, RoutingArg routing,
                                  const py::object& callback) {
  Scatter s;
  s.group = group;
  s.src = src.handle;
  s.slices = to_slices(slices);
  s.imm = to_imm(imm);
  s.routing = to_scatter_routing(routing);
  return submit(
      self, callback, "scatter",
      [&] {
        return "scatter(" + std::to_string(s.slices.size()) + " slices" + imm_text(s.imm) + ")";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_scatter(s, std::move(done)); });
}

std::shared_ptr<Transfer> barrier(PyEngine& self, std::int64_t value,
                                  const std::vector<MrDesc>& dsts,
                                  std::optional<PeerGroupHandle> group,
                                  const py::object& callback) {
  Barrier b;
  b.group = group;
  b.imm = to_u32(value, "imm");
  b.dsts = dsts;
  return submit(
      self, callback, "barrier",
      [&] {
        return "barrier(imm=" + std::to_string(b.imm) + ", " + std::to_string(b.dsts.size()) +
               " peers)";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_barrier(b, std::move(done)); });
}

void expect_imm_count(PyEngine& self, std::int64_t value, std::int64_t count,
                      const py::object& callback) {
  if (PyCallable_Check(callback.ptr()) == 0) throw py::type_error("callback must be callable");
  const std::uint32_t v = to_u32(value, "imm");
  const std::uint64_t n = to_offset(count, "count");
  const std::uint64_t id = self.hub().add(
      callback, "expect_imm_count(imm=" + std::to_string(v) + ", count=" + std::to_string(n) + ")");
  ImmCallback on_reached = [hub = self.hub_ptr(), id](std::uint32_t imm, std::uint64_t reached) {
    hub->invoke(id, true, [&](py::handle fn) { fn(imm, reached); });
  };
  const Status status = self.call_released(
      [&](TransferEngine& e) { return e.expect_imm_count(v, n, std::move(on_reached)); });
  if (!status.ok()) {
    self.hub().erase(id);
    raise_status(status);
  }
}

std::shared_ptr<PyImmCounter> imm_counter(PyEngine& self, std::int64_t value) {
  const std::uint32_t v = to_u32(value, "imm");
  return std::make_shared<PyImmCounter>(
      take(self.call_released([&](TransferEngine& e) { return e.imm_counter(v); })));
}

void release_imm_counter(PyEngine& self, std::int64_t value) {
  const std::uint32_t v = to_u32(value, "imm");
  check(self.call_released([&](TransferEngine& e) { return e.release_imm_counter(v); }));
}

}  // namespace fabric::python

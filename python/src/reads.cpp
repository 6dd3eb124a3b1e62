#include "reads.hpp"

#include <optional>
#include <string>

#include "arg_types.hpp"
#include "engine.hpp"
#include "memory.hpp"
#include "requests.hpp"
#include "submit.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

std::shared_ptr<Transfer> single_read(PyEngine& self, const MrDesc& src, const PyMrHandle& dst,
                                      std::int64_t length, std::int64_t src_offset,
                                      std::int64_t dst_offset, std::int64_t num_shards,
                                      std::optional<std::int64_t> domain,
                                      const py::object& callback) {
  SingleRead r;
  r.length = to_offset(length, "length");
  r.src = {src, to_offset(src_offset, "src_offset")};
  r.dst = {dst.handle, to_offset(dst_offset, "dst_offset")};
  r.routing = to_write_routing(num_shards, domain);
  return submit(
      self, callback, "single_read",
      [&] {
        return "single_read(length=" + std::to_string(r.length) +
               ", src_offset=" + std::to_string(r.src.offset) +
               ", dst_offset=" + std::to_string(r.dst.offset) + ")";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_single_read(r, std::move(done)); });
}

std::shared_ptr<Transfer> paged_reads(PyEngine& self, const MrDesc& src, const PyMrHandle& dst,
                                      std::int64_t page_length, IndicesArg src_indices,
                                      IndicesArg dst_indices,
                                      std::optional<std::int64_t> src_stride,
                                      std::optional<std::int64_t> dst_stride,
                                      std::int64_t src_offset, std::int64_t dst_offset,
                                      const py::object& callback) {
  PagedRead r;
  r.page_length = to_offset(page_length, "page_length");
  r.src = src;
  r.dst = dst.handle;
  r.src_pages.indices = to_indices(src_indices, "src_indices");
  r.dst_pages.indices = to_indices(dst_indices, "dst_indices");
  // A stride defaults to the page length: pages packed back to back.
  r.src_pages.stride = src_stride ? to_offset(*src_stride, "src_stride") : r.page_length;
  r.dst_pages.stride = dst_stride ? to_offset(*dst_stride, "dst_stride") : r.page_length;
  r.src_pages.offset = to_offset(src_offset, "src_offset");
  r.dst_pages.offset = to_offset(dst_offset, "dst_offset");
  return submit(
      self, callback, "paged_reads",
      [&] {
        return "paged_reads(" + std::to_string(r.src_pages.indices.size()) + " pages of " +
               std::to_string(r.page_length) + " bytes)";
      },
      [&](TransferEngine& e, OnDone done) { return e.submit_paged_reads(r, std::move(done)); });
}

}  // namespace

void bind_reads(py::module_& m) {
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("Engine"));
  engine
      .def("single_read", &single_read, py::arg("src"), py::arg("dst"), py::arg("length"),
           py::kw_only(), py::arg("src_offset") = 0, py::arg("dst_offset") = 0,
           py::arg("num_shards") = 0, py::arg("domain") = py::none(),
           py::arg("callback") = py::none(),
           "READs src[src_offset:+length] (a peer's MrDesc, registered there with "
           "remote_read=True) into dst[dst_offset:+length] (a local MrHandle). No immediate: the "
           "Transfer is the only completion, and the bytes are in dst once it is done. "
           "num_shards (0: one per Domain) shards it; domain pins it to one Domain. Raises "
           "InvalidArgumentError if src was registered without remote_read.")
      .def("paged_reads", &paged_reads, py::arg("src"), py::arg("dst"), py::arg("page_length"),
           py::arg("src_indices"), py::arg("dst_indices"), py::kw_only(),
           py::arg("src_stride") = py::none(), py::arg("dst_stride") = py::none(),
           py::arg("src_offset") = 0, py::arg("dst_offset") = 0, py::arg("callback") = py::none(),
           "For each i, READs page_length bytes from src_offset + src_indices[i] * src_stride of "
           "the peer's src (MrDesc, remote_read=True) into dst_offset + dst_indices[i] * "
           "dst_stride of the local dst (MrHandle). Strides default to page_length; no "
           "immediates.");
}

}  // namespace fabric::python

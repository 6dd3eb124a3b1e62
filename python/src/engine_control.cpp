#include "engine_control.hpp"

#include <iterator>
#include <string>
#include <vector>

#include "errors.hpp"
#include "memory.hpp"
#include "requests.hpp"
#include "values.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

// PostKind's values in order; the reads come last.
const char* kind_name(PostKind kind) {
  static constexpr const char* kNames[] = {"send",    "single_write", "paged_write",
                                           "imm",     "scatter",      "barrier",
                                           "single_read", "paged_read"};
  const auto i = static_cast<std::size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace

py::list reg_mrs(PyEngine& self, const py::sequence& objs, bool remote_read,
                 std::optional<std::int64_t> group) {
  std::vector<MemoryTarget> targets;
  std::vector<MemoryRange> ranges;
  std::optional<std::uint32_t> g;
  if (group) g = to_u32(*group, "group");
  for (py::handle obj : objs) {
    targets.push_back(resolve_memory(obj, std::nullopt, py::none(), py::none()));
    ranges.push_back(MemoryRange{targets.back().ptr, targets.back().length,
                                 targets.back().device, g});
  }
  const Access access =
      remote_read ? (Access::remote_write | Access::remote_read) : Access::remote_write;
  std::vector<Registered> registered =
      take(self.call_released([&](TransferEngine& e) { return e.reg_mrs(ranges, access); }));
  py::list out;
  for (std::size_t i = 0; i < registered.size(); ++i) {
    self.pin(registered[i].handle.registration().get(), targets[i].keeper);
    out.append(py::make_tuple(
        PyMrHandle{registered[i].handle, targets[i].origin, targets[i].keeper},
        registered[i].desc));
  }
  return out;
}

void fence_peer(PyEngine& self, const NetAddr& peer) {
  check(self.call_released([&](TransferEngine& e) { return e.fence_peer(peer); }));
}

bool progress(PyEngine& self) {
  return self.call_released([](TransferEngine& e) { return e.progress(); });
}

py::list take_post_timings(PyEngine& self) {
  const std::vector<PostTiming> timings =
      self.call_released([](TransferEngine& e) { return e.take_post_timings(); });
  py::list out;
  for (const PostTiming& t : timings) {
    py::dict d;
    d["kind"] = kind_name(t.kind);
    d["posts"] = t.posts;
    d["called"] = t.called;
    d["enqueued"] = t.enqueued;
    d["picked_up"] = t.picked_up;
    d["first_post"] = t.first_post;
    d["last_post"] = t.last_post;
    out.append(std::move(d));
  }
  return out;
}

py::list group_info(PyEngine& self) {
  const std::vector<GroupInfo> groups =
      self.call_released([](TransferEngine& e) { return e.groups(); });
  py::list out;
  for (const GroupInfo& g : groups) {
    py::list nics;
    for (const DomainNic& n : g.nics) nics.append(n.to_string());
    py::dict d;
    d["gpu"] = g.gpu;
    d["cpus"] = g.cpus.to_string();
    d["nics"] = std::move(nics);
    out.append(std::move(d));
  }
  return out;
}

py::list domain_nics(PyEngine& self) {
  const std::vector<DomainNic> nics =
      self.call_released([](TransferEngine& e) { return e.domain_nics(); });
  py::list out;
  for (const DomainNic& n : nics) out.append(n.to_string());
  return out;
}

}  // namespace fabric::python

// NetAddr and MrDesc: immutable values that cross process boundaries as
// bytes, text or pickles.

#include "values.hpp"

#include "arg_types.hpp"

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "buffer.hpp"
#include "errors.hpp"
#include "fabric/memory.hpp"
#include "fabric/net_addr.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

py::bytes to_bytes(const std::vector<std::byte>& encoded) {
  return {reinterpret_cast<const char*>(encoded.data()), encoded.size()};
}

template <typename T>
T decode_bytes(BufferArg data) {
  BytesView view(data, "data");
  return take(T::decode(view.bytes()));
}

std::size_t hash_bytes(const std::vector<std::byte>& encoded) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
}

}  // namespace

void bind_values(py::module_& m) {
  py::class_<NetAddr>(m, "NetAddr",
                      "An engine's address (Engine.main_address). Exchange it out of band as "
                      "bytes(addr) or str(addr); pickles too.")
      .def_static("from_bytes", &decode_bytes<NetAddr>, py::arg("data"),
                  "Decodes bytes(addr). Raises MalformedError on truncated, oversized or "
                  "inconsistent input.")
      .def_static(
          "parse", [](std::string_view text) { return take(NetAddr::parse(text)); },
          py::arg("text"), "Parses str(addr) (\"fna3:\" + hex). Raises MalformedError.")
      .def("__bytes__", [](const NetAddr& a) { return to_bytes(a.encode()); })
      .def("__str__", &NetAddr::to_string)
      .def("__repr__", [](const NetAddr& a) { return "<fabric_lib." + a.describe() + ">"; })
      .def(
          "__eq__", [](const NetAddr& a, const NetAddr& b) { return a == b; }, py::is_operator())
      .def("__hash__", [](const NetAddr& a) { return hash_bytes(a.encode()); })
      .def(py::pickle([](const NetAddr& a) { return to_bytes(a.encode()); },
                      [](const py::bytes& data) { return decode_bytes<NetAddr>(data); }))
      .def("describe", &NetAddr::describe, "Provider, instance and per-Domain addresses, for logs.")
      .def_property_readonly(
          "backend", [](const NetAddr& a) { return std::string(backend_name(a.backend())); },
          "\"libfabric\" or \"verbs\".")
      .def_property_readonly("provider", &NetAddr::provider, "The fabric provider's name.")
      .def_property_readonly("instance_id", &NetAddr::instance_id,
                             "Random per engine: a restarted peer has a new one.")
      .def_property_readonly("max_message_size", &NetAddr::max_message_size,
                             "Largest message this engine receives (Engine.send checks it).")
      .def_property_readonly("num_domains", &NetAddr::num_domains,
                             "Domains (NICs) per group; peers must agree.")
      .def_property_readonly("num_groups", &NetAddr::num_groups,
                             "DomainGroups of the engine (one per GPU it serves).");

  py::class_<MrDesc>(m, "MrDesc",
                     "The remote side of a registration: where peers may write. Exchange it out "
                     "of band as bytes(desc) or str(desc); pickles too.")
      .def_static("from_bytes", &decode_bytes<MrDesc>, py::arg("data"),
                  "Decodes bytes(desc). Raises MalformedError on truncated, oversized or "
                  "inconsistent input.")
      .def_static(
          "parse", [](std::string_view text) { return take(MrDesc::parse(text)); }, py::arg("text"),
          "Parses str(desc) (\"fmd3:\" + hex). Raises MalformedError.")
      .def("__bytes__", [](const MrDesc& d) { return to_bytes(d.encode()); })
      .def("__str__", &MrDesc::to_string)
      .def("__repr__", [](const MrDesc& d) { return "<fabric_lib." + d.describe() + ">"; })
      .def("describe", &MrDesc::describe, "Size, base and owner, for logs.")
      .def(
          "__eq__", [](const MrDesc& a, const MrDesc& b) { return a == b; }, py::is_operator())
      .def("__hash__", [](const MrDesc& d) { return hash_bytes(d.encode()); })
      .def(py::pickle([](const MrDesc& d) { return to_bytes(d.encode()); },
                      [](const py::bytes& data) { return decode_bytes<MrDesc>(data); }))
      .def_property_readonly("base", &MrDesc::base, "The owner's virtual address of the region.")
      .def_property_readonly("size", &MrDesc::size, "The region's length in bytes.")
      .def_property_readonly("group", &MrDesc::group,
                             "The owner's DomainGroup that registered it; writes land through "
                             "its NICs.")
      .def_property_readonly("owner", &MrDesc::owner, "The NetAddr of the registering engine.")
      .def_property_readonly(
          "keys",
          [](const MrDesc& d) {
            py::list keys;
            for (const RemoteKey& k : d.keys()) keys.append(py::make_tuple(k.addr_base, k.rkey));
            return keys;
          },
          "One (addr_base, rkey) per Domain of the owner.");
}

}  // namespace fabric::python

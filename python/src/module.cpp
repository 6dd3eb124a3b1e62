// fabric_lib._native: the binding of fabric-lib's TransferEngine. The pure
// Python package fabric_lib re-exports it; docs/python.md describes it.

#include <pybind11/pybind11.h>

#include "async_bridge.hpp"
#include "engine.hpp"
#include "errors.hpp"
#include "fabric/requests.hpp"
#include "fabric/threads.hpp"
#include "fabric/version.hpp"
#include "memory.hpp"
#include "reads.hpp"
#include "requests.hpp"
#include "transfer.hpp"
#include "values.hpp"
#include "watcher.hpp"

namespace fabric::python {
void bind_weights(pybind11::module_& m);  // weights.cpp
void bind_counts(pybind11::module_& m);   // counts.cpp
void bind_imm_reservation(pybind11::module_& m);  // imm_reservation.cpp
void bind_metrics(pybind11::module_& m);          // metrics.cpp
void bind_kv(pybind11::module_& m);               // kv_module.cpp
void bind_moe(pybind11::module_& m);              // moe/module.cpp
void bind_channel(pybind11::module_& m);          // channel.cpp
void bind_peer_watch(pybind11::module_& m);       // peer_watch.cpp
void bind_info(pybind11::module_& m);             // info.cpp
}

namespace {
// A submodule of this extension that the package imports under its own name (`from .._kv import`,
// `from . import _moe`, `from .. import _weights`), with its type stub beside it (_kv.pyi, ...): one extension, so the process holds one copy of the engine library
// (its logger, its registries of peers and shm segments) whichever workloads it imports.
pybind11::module_ add_package_module(pybind11::module_& m, const char* attr, const char* name) {
  pybind11::module_ sub = m.def_submodule(attr);
  pybind11::module_::import("sys").attr("modules")[name] = sub;
  return sub;
}
}  // namespace

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  using namespace fabric::python;
  m.doc() = "Native binding of fabric-lib's TransferEngine; import fabric_lib instead.";
  m.attr("__version__") = std::to_string(fabric::kVersionMajor) + "." +
                          std::to_string(fabric::kVersionMinor) + "." +
                          std::to_string(fabric::kVersionPatch);
  m.attr("MAX_WRITE_BYTES") = fabric::kMaxWriteBytes;
  register_errors(m);
  bind_values(m);
  bind_requests(m);
  bind_memory(m);
  bind_transfer(m);
  bind_async_bridge(m);
  bind_watcher(m);
  bind_engine(m);
  bind_reads(m);  // methods of Engine: after bind_engine
  bind_counts(m);
  bind_imm_reservation(m);  // methods of Engine: after bind_engine
  // After ImmReservation, so that reserve_update_imms's signature names the class.
  auto weights = add_package_module(m, "_weights", "fabric_lib._weights");
  bind_weights(weights);
  bind_metrics(m);
  auto kv = add_package_module(m, "_kv", "fabric_lib._kv");
  bind_kv(kv);
  auto moe = add_package_module(m, "_moe", "fabric_lib.moe._moe");
  bind_moe(moe);
  bind_channel(m);  // methods of Engine: after bind_engine
  bind_peer_watch(m);
  bind_info(m);
  m.def(
      "library_threads",
      [] {
        py::list out;
        for (const auto& t : fabric::library_threads()) {
          out.append(py::make_tuple(t.name, t.tid, t.cpus.to_string()));
        }
        return out;
      },
      "Every running thread that fabric-lib started, as (name, tid, cpulist) tuples: where each "
      "placed itself (docs/concepts.md, \"Threads and CPUs\").");
  // Engine threads must be joined while the interpreter can still take their calls.
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { PyEngine::stop_all(); }, py::name("_stop_all_engines")));
}

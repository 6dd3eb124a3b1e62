// Engine.watch_peer and the PeerWatch it returns (fabric/peer_watch.hpp): the engine's liveness
// of a peer, shared by every workload on the engine.

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine.hpp"
#include "errors.hpp"
#include "fabric/peer_watch.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

const char* state_name(PeerState state) { return state == PeerState::alive ? "alive" : "silent"; }

std::chrono::milliseconds to_ms(double seconds, const char* what) {
  if (!(seconds >= 0.0) || seconds > 86400.0 * 365) {
    raise_error(Errc::invalid_argument,
                (std::string(what) + " must be between 0 and a year of seconds").c_str());
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
}

// The C++ watch, the engine it runs on and the hub entry of its callback, which goes with it.
class PyPeerWatch {
 public:
  PyPeerWatch(py::object engine, PeerWatch watch, std::uint64_t callback_id)
      : engine_(std::move(engine)), watch_(std::move(watch)), callback_id_(callback_id) {}
  PyPeerWatch(const PyPeerWatch&) = delete;
  PyPeerWatch& operator=(const PyPeerWatch&) = delete;
  ~PyPeerWatch() { close(); }

  // Without the GIL: close() waits for a callback of this watch, which needs it.
  void close() {
    {
      py::gil_scoped_release release;
      watch_.close();
    }
    if (callback_id_ != 0) {
      engine_.cast<PyEngine&>().hub().erase(callback_id_);
      callback_id_ = 0;
    }
  }

  [[nodiscard]] const PeerWatch& watch() const noexcept { return watch_; }

 private:
  py::object engine_;
  PeerWatch watch_;
  std::uint64_t callback_id_ = 0;
};

std::unique_ptr<PyPeerWatch> watch_peer(py::object engine_obj, const NetAddr& peer,
                                        const py::object& callback, double interval,
                                        double silent_after) {
  if (!callback.is_none() && PyCallable_Check(callback.ptr()) == 0) {
    throw py::type_error("callback must be callable or None");
  }
  PyEngine& self = engine_obj.cast<PyEngine&>();
  const PeerWatchOptions options{to_ms(interval, "interval"), to_ms(silent_after, "silent_after")};
  std::uint64_t id = 0;
  PeerStateCallback on_change = [](const NetAddr&, PeerState) {};
  if (!callback.is_none()) {
    id = self.hub().add(callback, "peer watch of " + peer.describe());
    on_change = [hub = self.hub_ptr(), id](const NetAddr& addr, PeerState state) {
      hub->invoke(id, false, [&](py::handle fn) { fn(py::cast(addr), state_name(state)); });
    };
  }
  auto watched = self.call_released(
      [&](TransferEngine& e) { return e.watch_peer(peer, std::move(on_change), options); });
  if (!watched.ok()) {
    if (id != 0) self.hub().erase(id);
    raise_status(watched.status());
  }
  return std::make_unique<PyPeerWatch>(std::move(engine_obj), std::move(watched).value(), id);
}

}  // namespace

void bind_peer_watch(py::module_& m) {
  py::class_<PyPeerWatch>(m, "PeerWatch",
                          "The engine's liveness of one peer (Engine.watch_peer). Closed by "
                          "close(), on leaving a with block, or when collected.")
      .def_property_readonly(
          "state", [](const PyPeerWatch& w) { return state_name(w.watch().state()); },
          "\"alive\" or \"silent\", as this watch last judged it.")
      .def_property_readonly(
          "last_heard",
          [](const PyPeerWatch& w) {
            return std::chrono::duration<double>(w.watch().last_heard().time_since_epoch()).count();
          },
          "When the engine last heard from the peer (or the watch began), on time.monotonic()'s "
          "clock (CLOCK_MONOTONIC, as the engine's steady clock).")
      .def_property_readonly(
          "silent_after",
          [](const PyPeerWatch& w) { return w.watch().silent_after().count() / 1000.0; },
          "Seconds of silence after which this watch calls the peer silent.")
      .def_property_readonly("is_open", [](const PyPeerWatch& w) { return w.watch().is_open(); })
      .def("close", &PyPeerWatch::close,
           "Stops this watch: its callback is not called again; idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyPeerWatch& w, const py::args&) {
             w.close();
             return false;
           })
      .def("__repr__", [](const PyPeerWatch& w) {
        return std::string("<fabric_lib.PeerWatch ") + state_name(w.watch().state()) +
               (w.watch().is_open() ? "" : " closed") + ">";
      });
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("Engine"));
  engine.def("watch_peer", &watch_peer, py::arg("peer"), py::arg("callback") = py::none(),
             py::kw_only(), py::arg("interval") = 1.0, py::arg("silent_after") = 0.0,
             "Watches whether `peer`'s engine still answers: the engine pings it every `interval` "
             "seconds (one stream per peer for all its watchers) and callback(peer: NetAddr, "
             "state: str) runs on the liveness thread when it turns \"silent\" (nothing heard for "
             "silent_after seconds; 0: 2 intervals + request_timeout) or \"alive\" again. "
             "InvalidArgumentError for this engine itself or an engine on submit_recvs pools.");
}

}  // namespace fabric::python

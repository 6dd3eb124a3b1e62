// Engine.channel and the Channel it returns (fabric/channel.hpp): a named channel whose messages
// reach only its callback, with the sending engine's address.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "buffer.hpp"
#include "engine.hpp"
#include "engine_ops.hpp"
#include "errors.hpp"
#include "fabric/channel.hpp"
#include "requests.hpp"
#include "submit.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

// The C++ Channel, the engine that sends on it and the hub entry of its callback, which goes
// when the channel closes.
class PyChannel {
 public:
  PyChannel(py::object engine, Channel channel, std::uint64_t callback_id)
      : engine_(std::move(engine)), channel_(std::move(channel)), callback_id_(callback_id) {}
  PyChannel(const PyChannel&) = delete;
  PyChannel& operator=(const PyChannel&) = delete;
  ~PyChannel() { close(); }

  // Without the GIL: close() waits for a callback of this channel, which needs it.
  void close() {
    {
      py::gil_scoped_release release;
      channel_.close();
    }
    if (callback_id_ != 0) {
      engine_.cast<PyEngine&>().hub().erase(callback_id_);
      callback_id_ = 0;
    }
  }

  std::shared_ptr<Transfer> send(const NetAddr& to, BufferArg data, const py::object& callback) {
    BytesView view(data, "data");
    const auto bytes = view.bytes();
    return submit(
        engine_.cast<PyEngine&>(), callback, "channel send",
        [&] {
          return "channel '" + channel_.name() + "' send(" + std::to_string(bytes.size()) +
                 " bytes)";
        },
        [&](TransferEngine&, OnDone done) { return channel_.send(to, bytes, std::move(done)); });
  }

  [[nodiscard]] const Channel& channel() const noexcept { return channel_; }

 private:
  py::object engine_;
  Channel channel_;
  std::uint64_t callback_id_ = 0;
};

std::unique_ptr<PyChannel> open_channel(py::object engine_obj, const std::string& name,
                                        const py::object& callback,
                                        std::int64_t max_message_size) {
  if (PyCallable_Check(callback.ptr()) == 0) throw py::type_error("callback must be callable");
  PyEngine& self = engine_obj.cast<PyEngine&>();
  ChannelOptions options;
  options.max_message_size = to_offset(max_message_size, "max_message_size");
  const std::uint64_t id = self.hub().add(callback, "channel '" + name + "'");
  ChannelCallback on_message = [hub = self.hub_ptr(), id](const ChannelMessage& m) {
    hub->invoke(id, false, [&](py::handle fn) { call_with_view(fn, m.data, py::cast(m.sender)); });
  };
  auto opened = self.call_released(
      [&](TransferEngine& e) { return e.channel(name, std::move(on_message), options); });
  if (!opened.ok()) {
    self.hub().erase(id);
    raise_status(opened.status());
  }
  return std::make_unique<PyChannel>(std::move(engine_obj), std::move(opened).value(), id);
}

}  // namespace

void bind_channel(py::module_& m) {
  py::class_<PyChannel>(m, "Channel",
                        "A named channel on an engine (Engine.channel): messages sent on it reach "
                        "only the channel of the same name on the peer. Closed by close(), on "
                        "leaving a with block, or when collected.")
      .def_property_readonly("name", [](const PyChannel& c) { return c.channel().name(); })
      .def_property_readonly("id", [](const PyChannel& c) { return c.channel().id(); },
                             "The id on the wire: FNV-1a (64-bit) of the name.")
      .def_property_readonly(
          "max_message_size", [](const PyChannel& c) { return c.channel().max_message_size(); },
          "Largest payload send() takes.")
      .def_property_readonly("is_open", [](const PyChannel& c) { return c.channel().is_open(); })
      .def("send", &PyChannel::send, py::arg("to"), py::arg("data"), py::kw_only(),
           py::arg("callback") = py::none(),
           "Copies data (bytes-like) and sends it to the channel of this name on `to`; "
           "InvalidArgumentError naming the channel when it exceeds max_message_size or the "
           "channel is closed.")
      .def("close", &PyChannel::close,
           "Closes the channel: its callback is not called again and its name is free; "
           "idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyChannel& c, const py::args&) {
             c.close();
             return false;
           })
      .def("__repr__", [](const PyChannel& c) {
        return "<fabric_lib.Channel '" + c.channel().name() + "'" +
               (c.channel().is_open() ? "" : " closed") + ">";
      });
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("Engine"));
  engine.def("channel", &open_channel, py::arg("name"), py::arg("callback"), py::kw_only(),
             py::arg("max_message_size") = 0,
             "Opens the channel `name`: callback(message: memoryview, sender: NetAddr) runs on "
             "the callback thread for each message sent to it (the memoryview is valid only "
             "during the call); channel.send(sender, ...) answers. max_message_size 0: the most "
             "the engine's max_message_size leaves after the channel header. "
             "InvalidArgumentError naming the channel when it is open already.");
}

}  // namespace fabric::python

// fabric_lib._native._fabric_info: the fabric-info command's run (tools/info/run.hpp), for the
// Python package's `fabric-info` (fabric_lib/info.py). The report is returned, not printed, so
// Python's sys.stdout (redirected or captured) receives it.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <vector>

#include "run.hpp"

namespace fabric::python {

void bind_info(pybind11::module_& m) {
  m.def(
      "_fabric_info",
      [](const std::vector<std::string>& args) {
        std::ostringstream out;
        std::ostringstream err;
        int status = 0;
        {
          // The probes open no endpoint but walk sysfs and libfabric's providers: let other
          // Python threads run meanwhile.
          pybind11::gil_scoped_release unlocked;
          status = info::run(args, out, err);
        }
        return pybind11::make_tuple(status, out.str(), err.str());
      },
      pybind11::arg("args"),
      "Runs fabric-info with these command-line arguments (args[0] the program's name): "
      "(exit status, report, errors). Sets FI_TCP_IFACE and FI_SOCKETS_IFACE to lo for the "
      "process, so call it from a process of its own (python -m fabric_lib.info).");
}

}  // namespace fabric::python

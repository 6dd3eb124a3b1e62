// fabric-demo: one real transfer between two processes, every byte verified.

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "common/rendezvous.hpp"
#include "options.hpp"
#include "target.hpp"
#include "writer.hpp"

int main(int argc, char** argv) {
  demo::Options options;
  CLI::App app{"fabric-demo: single and paged RDMA writes between two processes, "
               "timed and verified byte for byte"};
  app.add_option("--provider", options.provider,
                 "libfabric provider: shm, tcp (tcp;ofi_rxm), sockets, efa, auto")
      ->capture_default_str();
  auto* bind = app.add_option("--bind", options.bind,
                              "IP providers bind here (default 127.0.0.1; with --listen, its HOST)");
  app.add_option("--iface", options.iface,
                 "interface for IP providers (FI_TCP_IFACE; default lo for a loopback --bind)");
  auto* listen = app.add_option("--listen", options.listen,
                                "two hosts: be the target, waiting for one writer on HOST:PORT "
                                "(docs/two-hosts.md)");
  app.add_option("--connect", options.connect,
                 "two hosts: be the writer, driving the target at HOST:PORT")
      ->excludes(listen);
  app.add_option("--json", options.json_path, "also write the results to this JSON file");
  app.add_flag("--quick", options.quick, "small volumes, for smoke tests");
  app.add_option("--seed", options.seed, "seed of the test data")->capture_default_str();
  // Internal plumbing between the two processes; hidden from --help.
  app.add_option("--role", options.role)
      ->check(CLI::IsMember({"writer", "target"}))
      ->group("");
  app.add_option("--bootstrap-fd", options.bootstrap_fd)->group("");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!options.listen.empty()) {
      options.role = "target";
      // The target's engine binds where it listens unless told otherwise.
      if (bind->count() == 0) options.bind = tools::parse_host_port(options.listen).host;
      return demo::serve(options);
    }
    return options.role == "target" ? demo::run_target(options) : demo::run_writer(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fabric-demo ({}): error: {}\n", options.role, e.what());
    return 1;
  }
}

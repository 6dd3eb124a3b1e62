// A process with one shm engine, for shm_leftovers_test.cpp: a fresh program rather than a fork
// of the test (a fork of a multi-threaded test process, under TSan above all, cannot start
// threads safely). Prints 'y' once its engine is up ('n' and exits 1 if it cannot open one);
// with "stay" it then waits to be killed, otherwise it stops the engine and exits 0.

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "fabric/engine.hpp"

int main(int argc, char** argv) {
  const bool stay = argc > 1 && std::strcmp(argv[1], "stay") == 0;
  auto engine = fabric::TransferEngine::create(fabric::EngineConfig{});
  std::fputc(engine.ok() ? 'y' : 'n', stdout);
  std::fflush(stdout);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().to_string().c_str());
    return 1;
  }
  if (stay) {
    for (;;) ::pause();
  }
  (*engine)->stop();
  return 0;
}

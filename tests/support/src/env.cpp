#include "fabric_test/env.hpp"

#include <cstdlib>

namespace fabric::test {

void use_loopback_environment() {
  ::setenv("FI_TCP_IFACE", "lo", 1);
  ::setenv("FI_SOCKETS_IFACE", "lo", 1);
  ::unsetenv("FI_PROVIDER");
}

}  // namespace fabric::test

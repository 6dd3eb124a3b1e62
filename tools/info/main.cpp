// fabric-info: what fabric-lib would find and use on this host (or on the
// machine an hwloc XML file describes). Read-only: opens no endpoint.

#include <iostream>
#include <string>
#include <vector>

#include "run.hpp"

int main(int argc, char** argv) {
  return info::run(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}

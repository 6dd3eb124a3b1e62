// The definition of the seam that open_domains.hpp only declares (weak), and its setter.

#include "doubles/domain_decorator.hpp"

#include <mutex>
#include <utility>

#include "backends/open_domains.hpp"

namespace fabric::domain {

namespace {
std::mutex g_decorator_mutex;
DomainDecorator g_decorator;
}  // namespace

void set_test_decorator(DomainDecorator decorator) {
  std::lock_guard lock(g_decorator_mutex);
  g_decorator = std::move(decorator);
}

std::unique_ptr<Domain> decorate_for_test(std::unique_ptr<Domain> opened) {
  // Copied under the lock so a test resetting the hook cannot race an opening engine.
  DomainDecorator decorate;
  {
    std::lock_guard lock(g_decorator_mutex);
    decorate = g_decorator;
  }
  return decorate ? decorate(std::move(opened)) : std::move(opened);
}

}  // namespace fabric::domain

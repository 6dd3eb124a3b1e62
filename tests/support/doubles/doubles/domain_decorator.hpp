#pragma once
// Wrapping the Domains that engines open, for tests: set_test_decorator(f) makes every engine
// created after it pass each Domain it opens through f and use what f returns (a
// ReorderingDomain around it, a FakeDomain in its place). Process-wide, and inherited by
// children forked after the call; an empty function (the default) turns it off. Linking this
// library is what gives src/backends/open_domains.cpp its decorate_for_test() seam.

#include <functional>
#include <memory>

#include "domain/domain.hpp"

namespace fabric::domain {

using DomainDecorator = std::function<std::unique_ptr<Domain>(std::unique_ptr<Domain>)>;
void set_test_decorator(DomainDecorator decorator);

}  // namespace fabric::domain

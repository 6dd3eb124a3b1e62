#pragma once
// Process environment for tests that must stay on this machine.

namespace fabric::test {

// Pins libfabric's IP providers to the loopback interface and clears any
// FI_PROVIDER filter inherited from the shell, so the provider a test asks for
// is the one it gets. libfabric reads these when an engine is first created,
// so call this before creating any engine (and before forking children, which
// inherit it). The engine additionally binds to EngineConfig::bind_address.
void use_loopback_environment();

}  // namespace fabric::test

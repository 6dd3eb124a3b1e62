#include "outbox.hpp"

#include <spdlog/spdlog.h>

namespace fabric::kv {

void Outbox::deliver(Link& link, const StateCallback& on_state) {
  for (auto& [to, body] : sends) {
    if (auto st = link.send(to, body); !st.ok()) {
      spdlog::warn("fabric kv: send to {} failed: {}", to.describe(), st.to_string());
    }
  }
  for (auto& [id, s] : notes) {
    if (on_state) on_state(id, s);
  }
}

}  // namespace fabric::kv

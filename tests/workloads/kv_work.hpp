#pragma once
// The KV share of a run: ranks 0 and 1 prefill, rank 2 decodes from both in turn; every request
// covers every page and is checked byte for byte against the pattern its id names.

#include <memory>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"
#include "outcome.hpp"
#include "plan.hpp"

namespace fabric::workloads::test {

class KvSenderWork {
 public:
  static Result<std::unique_ptr<KvSenderWork>> create(TransferEngine& engine);
  ~KvSenderWork();
  // Serves requests "s<sender>-0" .. "s<sender>-<count - 1>" in order.
  Outcome run(std::uint32_t sender, std::uint32_t count, std::chrono::milliseconds bound);

  struct State;

 private:
  KvSenderWork() = default;
  std::vector<std::vector<std::byte>> memory_;
  std::shared_ptr<State> state_;
  std::unique_ptr<kv::Sender> sender_;
};

class KvReceiverWork {
 public:
  static Result<std::unique_ptr<KvReceiverWork>> create(TransferEngine& engine, const Plan& plan);
  Status connect(const std::vector<NetAddr>& senders, std::chrono::milliseconds bound);
  // Asks each sender in turn for its requests; with a victim, its first request past
  // kv_before_death must fail, and the rest go to the other sender only.
  Outcome run(const Plan& plan);

 private:
  KvReceiverWork() = default;
  std::vector<std::vector<std::byte>> memory_;
  std::unique_ptr<kv::Receiver> receiver_;
  std::vector<std::uint32_t> sources_;
};

}  // namespace fabric::workloads::test

#pragma once
// The control conversation, writer → target (target's reply in brackets):
//   hello {addr}                       [ready]
//   prepare {workload, seed}           [prepared]   target zeroes its region
//   arm {workload, imm, expected}      [armed] ... [reached] once `expected`
//                                       immediates carrying `imm` have landed
//   verify {workload, seed}            [verified {ok, offset, expected, actual}]
//   bye                                [bye]        target exits
// Either side may send fail {error} instead of a reply.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "demo_error.hpp"
#include "workloads.hpp"

namespace demo {

inline nlohmann::json to_json(const Workload& w) {
  return {{"op", std::string(op_name(w.op))}, {"size", w.size}, {"count", w.count}};
}

inline Workload workload_from(const nlohmann::json& message) {
  const nlohmann::json& j = message.at("workload");
  const std::string op = j.at("op").get<std::string>();
  if (op != op_name(Op::single_write) && op != op_name(Op::paged_write)) {
    throw DemoError("unknown op '" + op + "' in control message");
  }
  return {op == op_name(Op::single_write) ? Op::single_write : Op::paged_write,
          j.at("size").get<std::uint64_t>(), j.at("count").get<std::uint32_t>()};
}

}  // namespace demo

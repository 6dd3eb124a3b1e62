// RequestTable: the request bookkeeping the Sender and Receiver share.

#include "request_table.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fabric::kv {
namespace {

struct Entry {
  RequestStatus status;
};

TEST(KvRequestTable, ARunningRequestIsNotReleased) {
  RequestTable<Entry> table("KV sender");
  table.add("r");
  int released = 0;
  const auto count = [&](const std::string&, const Entry&) { ++released; };
  Status st = table.release("r", count);
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_EQ(st.message(), "KV sender: request r is still waiting");
  EXPECT_EQ(released, 0);
  ASSERT_NE(table.find("r"), nullptr);

  table.find("r")->status.state = State::failed;
  EXPECT_TRUE(table.release("r", count).ok());
  EXPECT_EQ(released, 1);
  EXPECT_EQ(table.find("r"), nullptr);
  EXPECT_EQ(table.release("r", count).code(), Errc::not_found);
  EXPECT_EQ(released, 1);
}

TEST(KvRequestTable, AnIdNamesOneRequestUntilReleased) {
  RequestTable<Entry> table("KV receiver");
  EXPECT_TRUE(table.check_new("r").ok());
  table.add("r");
  const Status taken = table.check_new("r");
  EXPECT_EQ(taken.code(), Errc::invalid_argument);
  EXPECT_EQ(taken.message(), "KV receiver: request r exists");
  table.find("r")->status.state = State::done;
  ASSERT_TRUE(table.release("r", [](const std::string&, const Entry&) {}).ok());
  EXPECT_TRUE(table.check_new("r").ok());
}

TEST(KvRequestTable, UnknownIdsAreNotFoundNamingTheSide) {
  RequestTable<Entry> table("KV receiver");
  auto got = table.get("x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Errc::not_found);
  EXPECT_EQ(got.status().message(), "KV receiver: no request x");
  EXPECT_EQ(table.status("x").status().code(), Errc::not_found);
}

TEST(KvRequestTable, ActiveCountsRequestsThatHaveNotEnded) {
  RequestTable<Entry> table("KV sender");
  const State states[] = {State::waiting, State::transferring, State::done, State::failed,
                          State::cancelled};
  for (State s : states) table.add(std::string(state_name(s))).status.state = s;
  EXPECT_EQ(table.active(), 2u);
  auto st = table.status("transferring");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, State::transferring);
}

}  // namespace
}  // namespace fabric::kv

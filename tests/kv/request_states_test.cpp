// The pure state transitions of both sides: when a request ends, in which state, and what the
// decoder is told, decided from the records alone.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "receiver_impl.hpp"
#include "sender_impl.hpp"

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;
using SenderSide = Sender::Impl;
using ReceiverSide = Receiver::Impl;

template <typename Body>
bool says(const std::optional<msg::Body>& reply) {
  return reply && std::holds_alternative<Body>(*reply);
}

TEST(KvSenderStates, ATransferEndsOnlyOnceItsTailIsPosted) {
  SenderSide::Transfer t;
  EXPECT_FALSE(SenderSide::transfer_end("r", t, false).has_value());
  t.tail_posted = true;
  auto end = SenderSide::transfer_end("r", t, false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, State::done);
  ASSERT_TRUE(says<msg::SenderDone>(end->reply));
  EXPECT_TRUE(std::get<msg::SenderDone>(*end->reply).status.ok());
}

TEST(KvSenderStates, TheDecodersCancelWinsAndADeadDecoderIsToldNothing) {
  SenderSide::Transfer t;
  t.error = Status(Errc::provider, "write failed");
  t.cancel_requested = true;
  auto cancelled = SenderSide::transfer_end("r", t, true);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->state, State::cancelled);
  EXPECT_TRUE(says<msg::CancelAck>(cancelled->reply));

  t.cancel_requested = false;
  t.peer_dead = true;
  auto dead = SenderSide::transfer_end("r", t, false);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->state, State::failed);
  EXPECT_FALSE(dead->reply.has_value());

  t.peer_dead = false;
  auto failed = SenderSide::transfer_end("r", t, false);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->state, State::failed);
  ASSERT_TRUE(says<msg::SenderDone>(failed->reply));
  EXPECT_EQ(std::get<msg::SenderDone>(*failed->reply).status.code(), Errc::provider);

  t.error = Status::success();
  auto local = SenderSide::transfer_end("r", t, true);
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->state, State::cancelled);
  ASSERT_TRUE(says<msg::SenderDone>(local->reply));
  EXPECT_EQ(std::get<msg::SenderDone>(*local->reply).status.code(), Errc::cancelled);
}

SenderSide::Transfer& ended(SenderSide::Entry& e, State state, bool peer_dead = false) {
  auto& t = *e.transfers.emplace_back(std::make_unique<SenderSide::Transfer>());
  t.ended = true;
  t.end = state;
  t.peer_dead = peer_dead;
  return t;
}

TEST(KvSenderStates, ARequestWaitsForEveryDecoderToAskOrDecline) {
  SenderSide::Entry e;
  e.receivers = 2;
  ended(e, State::done);
  EXPECT_FALSE(SenderSide::request_end("r", e).has_value());
  e.declined = 1;
  auto end = SenderSide::request_end("r", e);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, State::done);

  e.status.state = State::done;  // reported once
  EXPECT_FALSE(SenderSide::request_end("r", e).has_value());
}

TEST(KvSenderStates, ARequestWaitsForItsRunningTransfersEvenWhenCancelled) {
  SenderSide::Entry e;
  e.local_cancel = true;
  e.transfers.emplace_back(std::make_unique<SenderSide::Transfer>());  // still writing
  EXPECT_FALSE(SenderSide::request_end("r", e).has_value());
  e.transfers.front()->ended = true;
  auto end = SenderSide::request_end("r", e);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, State::cancelled);
}

TEST(KvSenderStates, DecodersThatNeverAskedFailTheRequestByTimeout) {
  SenderSide::Entry e;
  e.receivers = 3;
  ended(e, State::done);
  e.missing_failed = true;
  auto end = SenderSide::request_end("r", e);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, State::failed);
  EXPECT_EQ(end->error.code(), Errc::timeout);
  EXPECT_EQ(end->error.message(), "1 of 3 decoders asked for request r in time");
}

TEST(KvSenderStates, AFailedTransferFailsTheRequestOverACancelledOne) {
  SenderSide::Entry e;
  e.receivers = 2;
  ended(e, State::done);
  ended(e, State::cancelled);
  auto cancelled = SenderSide::request_end("r", e);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->state, State::cancelled);
  e.receivers = 3;
  ended(e, State::failed, true);
  auto failed = SenderSide::request_end("r", e);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->state, State::failed);
  EXPECT_EQ(failed->error.message(), "the decoder died");
}

TEST(KvReceiverStates, AStoppingRequestEndsOnceEveryLegIsQuietAndItsQuarantineIsOver) {
  const auto now = Clock::now();
  ReceiverSide::Entry e;
  e.legs.resize(2);
  e.legs[0].quiet = true;
  EXPECT_FALSE(ReceiverSide::quiet_end(e, now).has_value());  // not stopping: its count ends it
  e.stopping = true;
  e.error = Status(Errc::timeout, "prefill rank 1 was silent");
  EXPECT_FALSE(ReceiverSide::quiet_end(e, now).has_value());  // leg 1 may still write
  e.legs[1].quiet = true;
  e.quarantine_until = now + 1s;
  EXPECT_FALSE(ReceiverSide::quiet_end(e, now).has_value());
  auto end = ReceiverSide::quiet_end(e, now + 1s);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, State::failed);
  EXPECT_EQ(end->error.message(), "prefill rank 1 was silent");
  e.user_cancel = true;
  auto cancelled = ReceiverSide::quiet_end(e, now + 1s);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->state, State::cancelled);
}

}  // namespace
}  // namespace fabric::kv

// record_post_timings: one record per fully posted request, its stamps in
// order (called ≤ enqueued ≤ picked up ≤ first post ≤ last post), its post
// count right; nothing recorded when off.
#include <gtest/gtest.h>

#include <vector>

#include "fabric/fabric.hpp"

namespace fabric {
namespace {

std::unique_ptr<TransferEngine> engine_with(bool record) {
  EngineConfig config;
  config.provider = "shm";
  config.record_post_timings = record;
  auto engine = TransferEngine::create(config);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// 20 single writes and 5 paged writes of 8 pages, into the engine's own region.
void submit_writes(TransferEngine& engine, std::vector<std::byte>& buf) {
  auto reg = engine.reg_mr(buf.data(), buf.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  auto done = std::make_shared<CompletionCounter>();
  for (int i = 0; i < 20; ++i) {
    SingleWrite w;
    w.length = 4096;
    w.src = {reg->handle, 0};
    w.dst = {reg->desc, 8192};
    ASSERT_TRUE(engine.submit_single_write(w, done).ok());
  }
  for (int i = 0; i < 5; ++i) {
    PagedWrite p;
    p.page_length = 512;
    p.src = reg->handle;
    p.dst = reg->desc;
    p.src_pages = {{0, 1, 2, 3, 4, 5, 6, 7}, 512, 0};
    p.dst_pages = {{7, 6, 5, 4, 3, 2, 1, 0}, 512, 16384};
    ASSERT_TRUE(engine.submit_paged_writes(p, done).ok());
  }
  ASSERT_TRUE(done->wait(25, std::chrono::seconds(20)).ok());
}

TEST(PostTimings, EachPostedRequestIsRecordedOnceWithOrderedStamps) {
  auto engine = engine_with(true);
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> buf(64 * 1024);
  submit_writes(*engine, buf);
  const auto timings = engine->take_post_timings();
  ASSERT_EQ(timings.size(), 25u);
  int singles = 0;
  int paged = 0;
  for (const PostTiming& t : timings) {
    EXPECT_GT(t.called, 0u);
    EXPECT_LE(t.called, t.enqueued);
    EXPECT_LE(t.enqueued, t.picked_up);
    EXPECT_LE(t.picked_up, t.first_post);
    EXPECT_LE(t.first_post, t.last_post);
    if (t.kind == PostKind::single_write) {
      ++singles;
      EXPECT_EQ(t.posts, 1u);
    } else if (t.kind == PostKind::paged_write) {
      ++paged;
      EXPECT_EQ(t.posts, 8u);
    }
  }
  EXPECT_EQ(singles, 20);
  EXPECT_EQ(paged, 5);
  EXPECT_TRUE(engine->take_post_timings().empty()) << "records are handed out once";
  engine->stop();
}

TEST(PostTimings, NothingIsRecordedWhenOff) {
  auto engine = engine_with(false);
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> buf(64 * 1024);
  submit_writes(*engine, buf);
  EXPECT_TRUE(engine->take_post_timings().empty());
  engine->stop();
}

}  // namespace
}  // namespace fabric

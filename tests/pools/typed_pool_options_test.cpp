// typed_pool_options and detail::job_type_ranks
// (include/thread_system/pools/typed_pool_options.hpp): the documented
// defaults, and the map from a job type to its priority rank - by the
// priority order when one is given, else by the underlying value in [0, 63] -
// with every refusal the header lists, and the names used in errors and
// statistics.
#include "thread_system/pools/typed_pool_options.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_system/pools/job_types.hpp"

namespace ts = thread_system;
using ts::job_types;

namespace {

enum class lane : std::uint8_t { fast, slow };  // no to_string(): named "type <n>"
enum class signed_lane : int { below = -1, zero = 0 };

TEST(TypedPoolOptions, TheDefaultsAreTheDocumentedOnes) {
  const ts::typed_pool_options<job_types> o;
  EXPECT_EQ(o.name, "typed_thread_pool");
  EXPECT_TRUE(o.priority_order.empty()) << "by underlying value";
  EXPECT_EQ(o.queue, ts::pool_queue::adaptive);
  EXPECT_EQ(o.aging_bound, std::chrono::nanoseconds(0)) << "strict priority";
  EXPECT_EQ(o.latency_sample_every, 32U);
  EXPECT_EQ(o.backpressure.capacity, 0U) << "unbounded";
  EXPECT_FALSE(o.on_error);
  EXPECT_EQ(o.worker_stack_size, 0U);
  EXPECT_EQ(o.idle_wait, std::chrono::microseconds(100));
}

TEST(TypedPoolOptions, JobTypeStatisticsStartAtZero) {
  const ts::job_type_statistics s;
  EXPECT_TRUE(s.type_name.empty());
  EXPECT_EQ(s.rank + s.accepted + s.executed + s.failed + s.cancelled + s.waiting, 0U);
  EXPECT_EQ(s.wait.count, 0U);
}

TEST(JobTypeRanks, WithoutAnOrderTheUnderlyingValueIsTheRank) {
  const ts::detail::job_type_ranks<job_types> ranks({});
  EXPECT_EQ(ranks.rank_of(job_types::RealTime, "p").value(), 0U);
  EXPECT_EQ(ranks.rank_of(job_types::Batch, "p").value(), 1U);
  EXPECT_EQ(ranks.rank_of(job_types::Background, "p").value(), 2U);
  EXPECT_EQ(ranks.valid_mask(), ~std::uint64_t{0});
  EXPECT_EQ(ranks.name_of_rank(1), "Batch");

  const ts::detail::job_type_ranks<int> ints({});
  EXPECT_EQ(ints.rank_of(63, "p").value(), 63U);
  const auto too_high = ints.rank_of(64, "pool-x");
  ASSERT_FALSE(too_high);
  EXPECT_EQ(too_high.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(too_high.error().to_string().find("pool-x"), std::string::npos) << too_high.error().to_string();
  EXPECT_NE(too_high.error().to_string().find("type 64"), std::string::npos) << too_high.error().to_string();
  EXPECT_FALSE(ints.rank_of(-1, "p")) << "a negative value has no rank";

  const ts::detail::job_type_ranks<signed_lane> signed_ranks({});
  EXPECT_EQ(signed_ranks.rank_of(signed_lane::zero, "p").value(), 0U);
  EXPECT_FALSE(signed_ranks.rank_of(signed_lane::below, "p"));
}

TEST(JobTypeRanks, WithAnOrderThePlaceInItIsTheRank) {
  const ts::detail::job_type_ranks<job_types> ranks({job_types::Background, job_types::RealTime});
  EXPECT_EQ(ranks.rank_of(job_types::Background, "p").value(), 0U);
  EXPECT_EQ(ranks.rank_of(job_types::RealTime, "p").value(), 1U);
  const auto unlisted = ranks.rank_of(job_types::Batch, "mine");
  ASSERT_FALSE(unlisted);
  EXPECT_EQ(unlisted.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(unlisted.error().to_string().find("Batch"), std::string::npos) << unlisted.error().to_string();
  EXPECT_NE(unlisted.error().to_string().find("mine"), std::string::npos) << unlisted.error().to_string();
  EXPECT_EQ(ranks.valid_mask(), 0b11U);
  EXPECT_EQ(ranks.name_of_rank(0), "Background");
  EXPECT_EQ(ranks.name_of_rank(2), "rank 2") << "no type has it";
  EXPECT_EQ(ranks.name_of_rank(64), "rank 64");
}

TEST(JobTypeRanks, MasksSetOneBitPerRankAndAllForNoTypes) {
  const ts::detail::job_type_ranks<job_types> ranks({});
  EXPECT_EQ(ranks.mask_of({}, "p").value(), ~std::uint64_t{0}) << "a universal worker";
  EXPECT_EQ(ranks.mask_of({job_types::RealTime, job_types::Background}, "p").value(), 0b101U);
  const ts::detail::job_type_ranks<job_types> ordered({job_types::Batch});
  EXPECT_FALSE(ordered.mask_of({job_types::Batch, job_types::RealTime}, "p")) << "one type without a rank";
}

TEST(JobTypeRanks, AnOrderWithADuplicateOrMoreThan64TypesIsRefused) {
  try {
    const ts::detail::job_type_ranks<lane> ranks({lane::fast, lane::slow, lane::fast});
    FAIL() << "a duplicate was accepted";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("type 0"), std::string::npos) << e.what();
  }
  std::vector<int> many(65);
  for (int i = 0; i < 65; ++i) many[static_cast<std::size_t>(i)] = i;
  EXPECT_THROW(ts::detail::job_type_ranks<int>{many}, ts::error_exception);
  many.pop_back();
  const ts::detail::job_type_ranks<int> sixty_four(many);
  EXPECT_EQ(sixty_four.valid_mask(), ~std::uint64_t{0});
  EXPECT_EQ(sixty_four.rank_of(63, "p").value(), 63U);
}

TEST(JobTypeRanks, ATypeWithoutToStringIsNamedByItsValue) {
  EXPECT_EQ(ts::detail::job_type_ranks<lane>::type_name(lane::slow), "type 1");
  EXPECT_EQ(ts::detail::job_type_ranks<signed_lane>::type_name(signed_lane::below), "type -1");
  EXPECT_EQ(ts::detail::job_type_ranks<job_types>::type_name(job_types::RealTime), "RealTime");
}

}  // namespace

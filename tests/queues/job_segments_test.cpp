// job_segments (include/thread_system/queues/job_segments.hpp): the segment
// storage of job_queue and two_lock_job_queue - its sizes for any requested
// capacity, its allocation, its entry markers, the tail's packing, the spare
// stack and the head's unpacking.
#include "thread_system/queues/job_segments.hpp"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"

namespace ts = thread_system;
namespace td = thread_system::detail;

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

// A segment's size is a power of two in [min, max] for every capacity a
// caller can pass, and holds the jobs asked for up to the maximum. (A
// capacity near SIZE_MAX once made 4 * capacity wrap, which gave one-word
// segments that no entry fits in.)
TEST(JobSegments, SegmentWordsForGivesAValidSizeForAnyCapacity) {
  constexpr std::array<std::size_t, 12> capacities{0,
                                                   1,
                                                   16,
                                                   17,
                                                   1024,
                                                   std::size_t{1} << 19,
                                                   (std::size_t{1} << 19) + 1,
                                                   size_max / 4,
                                                   size_max / 4 + 1,
                                                   (std::size_t{1} << 62) - 1,
                                                   std::size_t{1} << 63,
                                                   size_max};
  for (const std::size_t capacity : capacities) {
    const std::size_t words = td::segment_words_for(capacity);
    EXPECT_TRUE(std::has_single_bit(words)) << capacity;
    EXPECT_GE(words, td::min_segment_words) << capacity;
    EXPECT_LE(words, td::max_segment_words) << capacity;
    EXPECT_GE(words, std::min(capacity, td::max_segment_words / 4) * 4) << capacity;
  }
  EXPECT_EQ(td::segment_words_for(1024), 4096U);
  EXPECT_EQ(td::segment_words_for(size_max), td::max_segment_words);
}

// A size whose byte count does not fit in size_t is refused before any
// allocation, like memory that cannot be had.
TEST(JobSegments, AllocateRefusesASizeThatOverflows) {
  EXPECT_THROW((void)td::job_segment::allocate(size_max), std::bad_alloc);
  EXPECT_THROW((void)td::job_segment::allocate(size_max / sizeof(td::job_word)), std::bad_alloc);
}

// The header and the words start on cache lines whatever the allocator
// returned; free_chain frees a linked list (LeakSanitizer checks the rest).
TEST(JobSegments, SegmentsStartOnACacheLineAndAChainIsFreed) {
  td::job_segment* first = td::job_segment::allocate(td::min_segment_words);
  td::job_segment* s = first;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s) % 64, 0U);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s->words()) % 64, 0U);
    EXPECT_EQ(s->next, nullptr);
    std::memset(s->words(), 0xab, td::min_segment_words * sizeof(td::job_word));  // every word is usable
    if (i < 2) s = s->next = td::job_segment::allocate(td::min_segment_words);
  }
  td::job_segment::free_chain(first);
  td::job_segment::free_chain(nullptr);
}

// end_segment() leaves a skip marker where words remain, and writes nothing
// past a full segment.
TEST(JobSegments, EndSegmentWritesASkipMarkerOnlyWhereWordsRemain) {
  td::job_segment* s = td::job_segment::allocate(td::min_segment_words);
  td::job_word* words = s->words();
  std::memset(words, 0xab, td::min_segment_words * sizeof(td::job_word));
  EXPECT_FALSE(td::is_skip_marker(words[5]));
  td::end_segment(*s, 5, td::min_segment_words);
  EXPECT_TRUE(td::is_skip_marker(words[5]));
  EXPECT_FALSE(td::is_skip_marker(words[6])) << "only the first free word";
  td::end_segment(*s, td::min_segment_words, td::min_segment_words);  // full: nothing to write
  EXPECT_FALSE(td::is_skip_marker(words[td::min_segment_words - 1]));
  td::job_segment::free_chain(s);
}

// The spare stack is last in, first out, and a segment comes off it
// unlinked (it becomes the list's new last segment).
TEST(JobSegments, SpareSegmentsAreAStackAndComeOffUnlinked) {
  td::spare_segments spares;
  td::job_segment* a = td::job_segment::allocate(td::min_segment_words);
  td::job_segment* b = td::job_segment::allocate(td::min_segment_words);
  spares.push(a);
  spares.push(b);
  EXPECT_EQ(spares.count, 2U);
  EXPECT_EQ(spares.top, b);
  EXPECT_EQ(b->next, a);
  td::job_segment* first = spares.pop();
  EXPECT_EQ(first, b);
  EXPECT_EQ(first->next, nullptr);
  EXPECT_EQ(spares.count, 1U);
  td::job_segment* second = spares.pop();
  EXPECT_EQ(second, a);
  EXPECT_EQ(spares.count, 0U);
  EXPECT_EQ(spares.top, nullptr);
  td::job_segment::free_chain(first);
  td::job_segment::free_chain(second);
}

// fits() and room() count what every entry may leave unused at a segment's
// end (segment_waste words), so a run of entries they admit never needs a
// segment the caller did not provide.
TEST(JobSegments, TailRoomCountsTheWordsAnEntryMayLeaveUnused) {
  constexpr std::size_t words = td::min_segment_words;
  constexpr std::size_t waste = td::segment_waste;
  td::segment_tail tail;
  tail.used = 0;
  EXPECT_TRUE(tail.fits(words - waste, words));
  EXPECT_FALSE(tail.fits(words - waste + 1, words));
  EXPECT_EQ(tail.room(words, 0), words - waste);
  EXPECT_EQ(tail.room(words, 2), 3 * (words - waste));
  tail.used = words - waste;  // nothing left that counts
  EXPECT_EQ(tail.room(words, 0), 0U);
  EXPECT_EQ(tail.room(words, 1), words - waste);
  tail.used = words;  // full
  EXPECT_EQ(tail.room(words, 0), 0U);
  EXPECT_FALSE(tail.fits(1, words));
}

// Entries packed at the tail move on to a spare segment where the next one
// does not fit, with a skip marker ending the segment; the head side reads
// them back in order across it (used_up(), unpack_entry()).
TEST(JobSegments, EntriesCrossToASpareSegmentAndComeBackInOrder) {
  constexpr std::size_t words = td::min_segment_words;
  td::job_segment* first = td::job_segment::allocate(words);
  td::spare_segments spares;
  spares.push(td::job_segment::allocate(words));
  td::segment_tail tail{first, 0};
  std::array<std::uint64_t, 5> payload{1, 2, 3, 4, 5};  // a callable of several words
  std::vector<int> ran;
  int pushed = 0;
  // Fill the first segment, then one more entry: it goes to the spare.
  while (tail.segment == first) {
    const int id = pushed++;
    ts::job_function job([&ran, id, payload] { ran.push_back(id + static_cast<int>(payload[0]) - 1); });
    ASSERT_LE(job.packed_words(), words);
    tail.put(job, words, spares);
    EXPECT_FALSE(static_cast<bool>(job)) << "packed: the job moved into the segment";
  }
  EXPECT_EQ(spares.count, 0U);
  EXPECT_EQ(first->next, tail.segment);
  EXPECT_GT(pushed, 1);
  // The head side: every entry in order, the first segment used up where it
  // ends (its last word or the skip marker).
  td::job_segment* head_segment = first;
  std::size_t head = 0;
  for (int i = 0; i < pushed; ++i) {
    if (td::used_up(*head_segment, head, words)) {
      ASSERT_NE(head_segment->next, nullptr) << i;
      head_segment = head_segment->next;
      head = 0;
    }
    ts::job_function out;
    head += td::unpack_entry(*head_segment, head, out);
    ASSERT_TRUE(static_cast<bool>(out)) << i;
    out();
  }
  EXPECT_EQ(head_segment, tail.segment);
  EXPECT_EQ(head, tail.used);
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(pushed));
  for (int i = 0; i < pushed; ++i) EXPECT_EQ(ran[static_cast<std::size_t>(i)], i);
  td::job_segment::free_chain(first);
}

// Both segmented queues work when built with the largest capacities: jobs
// of every packed size go in and come out in order.
template <typename Queue>
void run_jobs_through(std::size_t capacity) {
  Queue queue{capacity};
  constexpr int jobs = 3000;  // several 64-word segments' worth if the size were the minimum
  int next = 0;
  std::array<std::uint64_t, 5> payload{1, 2, 3, 4, 5};  // a callable of several words
  for (int i = 0; i < jobs; ++i) {
    const bool ok = i % 2 == 0 ? static_cast<bool>(queue.try_push(ts::job_function([&next, i] {
      EXPECT_EQ(next, i);
      ++next;
    })))
                               : static_cast<bool>(queue.try_push(ts::job_function([&next, i, payload] {
                                   EXPECT_EQ(next, i);
                                   next += static_cast<int>(payload[0]);
                                 })));
    ASSERT_TRUE(ok) << "push " << i;
  }
  ts::job_function job;
  while (queue.try_pop(job)) job();
  EXPECT_EQ(next, jobs);
}

TEST(JobSegments, QueuesBuiltWithTheLargestCapacitiesWork) {
  for (const std::size_t capacity : {size_max, size_max / 4 + 1, std::size_t{1} << 61}) {
    SCOPED_TRACE(capacity);
    run_jobs_through<ts::job_queue>(capacity);
    run_jobs_through<ts::two_lock_job_queue>(capacity);
  }
}

}  // namespace

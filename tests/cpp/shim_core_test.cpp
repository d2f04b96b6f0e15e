// Unit tests of the shim's C++ layers (the golden harness compares against upstream).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "core/coalesce.h"
#include "core/overlap.h"
#include "core/tensor.h"
#include "ops.h"
#include "random.h"
#include "settings.h"
#include "typed_ops.h"

namespace tn {

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h;
    h.bits = uint16_t(bits);
    float f = float(h);
    if (f != f) continue;  // NaN payloads are not preserved bit for bit
    EXPECT_EQ(Half(f).bits, h.bits) << bits;
  }
}

TEST(Promotion, MixedSignIntegersWiden) {
  EXPECT_EQ(promote_types(ScalarType::Byte, ScalarType::Char), ScalarType::Short);
  EXPECT_EQ(promote_types(ScalarType::Half, ScalarType::BFloat16), ScalarType::Float);
  EXPECT_EQ(promote_types(ScalarType::Bool, ScalarType::Int), ScalarType::Int);
}

TEST(Schema, ParsesOutOverloadAndPrintsItBack) {
  const char* text =
      "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)";
  Schema s = parse_schema(text);
  EXPECT_EQ(s.full_name(), "aten::add.out");
  EXPECT_EQ(s.out_count(), 1u);
  EXPECT_EQ(s.str(), text);
}

TEST(Dispatcher, UnimplementedOperatorRefusesByName) {
  Operator* op = Dispatcher::instance().find("aten::cholesky", "");
  ASSERT_NE(op, nullptr);
  Stack stack{Tensor::empty({2, 2}, ScalarType::Float), false};
  try {
    Dispatcher::instance().call(*op, stack);
    FAIL() << "expected a refusal";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("aten::cholesky"), std::string::npos);
  }
}

TEST(Generator, MatchesTheReferenceMt19937Stream) {
  // std::mt19937 is the reference the upstream generator also follows.
  Generator g(5489);
  std::mt19937 reference(5489);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(g.random(), reference());
}

TEST(Tensor, ViewsShareStorageAndCopiesBroadcast) {
  Tensor base = Tensor::empty({2, 3}, ScalarType::Float);
  for (int i = 0; i < 6; ++i) base.data_as<float>()[i] = float(i);
  Tensor transposed = base.view_as_strided({3, 2}, {1, 3}, 0);
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(transposed.storage(), base.storage());
  Tensor copy = transposed.contiguous();
  EXPECT_EQ(copy.data_as<float>()[1], 3.0f);  // element (0, 1) of the transpose
  Tensor row = Tensor::empty({3}, ScalarType::Int);
  for (int i = 0; i < 3; ++i) row.data_as<int32_t>()[i] = 10 * i;
  base.copy_from(row);  // broadcast over the 2 rows, converting int32 -> float
  EXPECT_EQ(base.data_as<float>()[4], 10.0f);
  Tensor expanded = row.view_as_strided({2, 3}, {0, 1}, 0);
  // Writes into overlapping memory are refused at the door, by copy_'s overlap rules.
  EXPECT_THROW(ops::copy_(expanded, base), Error);
}

// Every element's offsets, in row-major order, over the elements [first, last) of `layout`.
std::vector<std::array<int64_t, 2>> offsets_in_range(const Coalesced<2>& layout, int64_t first,
                                                     int64_t last) {
  std::vector<std::array<int64_t, 2>> seen;
  rows_in_range<2>(layout, first, last,
                   [&](const std::array<int64_t, 2>& at, int64_t length, const auto& step) {
                     for (int64_t i = 0; i < length; ++i)
                       seen.push_back({at[0] + i * step[0], at[1] + i * step[1]});
                   });
  return seen;
}

TEST(Coalesce, RowsInRangeVisitEachElementOnceWhereverTheRangeSplits) {
  // A (3, 4, 5) loop: a transposed operand beside a contiguous one, so rows are 5 long.
  Coalesced<2> layout = coalesce<2>({3, 4, 5}, {Shape{1, 3, 12}, Shape{20, 5, 1}});
  ASSERT_EQ(layout.sizes.back(), 5);
  std::vector<std::array<int64_t, 2>> expected;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 5; ++c) expected.push_back({a + 3 * b + 12 * c, 20 * a + 5 * b + c});
  EXPECT_EQ(offsets_in_range(layout, 0, 60), expected);
  for (int64_t first = 0; first <= 60; ++first)
    for (int64_t last = first; last <= 60; ++last) {
      std::vector<std::array<int64_t, 2>> part(expected.begin() + first, expected.begin() + last);
      ASSERT_EQ(offsets_in_range(layout, first, last), part) << first << ".." << last;
    }
}

TEST(Tensor, CopiesAndFillsSplitBetweenThreadsAsOnOne) {
  int threads = intra_op_threads();
  set_intra_op_threads(2);
  // 300 x 401 float32, read transposed and converted to float64; then a fill; each past a grain.
  Tensor base = Tensor::empty({300, 401}, ScalarType::Float);
  for (int64_t i = 0; i < base.numel(); ++i) base.data_as<float>()[i] = float(i % 1000) - 0.5f;
  Tensor out = Tensor::empty({401, 300}, ScalarType::Double);
  out.copy_from(base.view_as_strided({401, 300}, {1, 401}, 0));
  Tensor filled = Tensor::empty({3, 40000}, ScalarType::Int);
  Tensor seven = Tensor::empty({}, ScalarType::Int);
  *seven.data_as<int32_t>() = 7;
  filled.copy_from(seven);
  Tensor same = Tensor::empty({300, 401}, ScalarType::Float);
  same.copy_from(base);
  set_intra_op_threads(threads);
  for (int64_t r = 0; r < 401; ++r)
    for (int64_t c = 0; c < 300; ++c)
      ASSERT_EQ(out.data_as<double>()[r * 300 + c], double(base.data_as<float>()[c * 401 + r]))
          << r << "," << c;
  for (int64_t i = 0; i < filled.numel(); ++i) ASSERT_EQ(filled.data_as<int32_t>()[i], 7) << i;
  EXPECT_EQ(std::memcmp(same.data(), base.data(), size_t(base.numel()) * sizeof(float)), 0);
}

TEST(Overlap, ClassifiesAsUpstreamsTensorIterator) {
  Tensor base = Tensor::empty({4, 3}, ScalarType::Float);
  Tensor transposed = base.view_as_strided({3, 4}, {1, 3}, 0);
  Tensor rows = base.view_as_strided({3, 3}, {3, 1}, 3);  // base[1:]
  Tensor column = base.view_as_strided({4}, {3}, 1);      // base[:, 1]: not dense
  Tensor expanded = base.view_as_strided({2, 3}, {0, 1}, 0);
  EXPECT_TRUE(is_non_overlapping_and_dense(transposed));
  EXPECT_EQ(internal_overlap(expanded), InternalOverlap::Yes);
  EXPECT_EQ(internal_overlap(column), InternalOverlap::TooHard);
  EXPECT_EQ(overlap(base, base), Overlap::Full);
  EXPECT_EQ(overlap(base, transposed), Overlap::Partial);  // same bytes, other strides
  EXPECT_EQ(overlap(base, rows), Overlap::Partial);
  EXPECT_EQ(overlap(base, column), Overlap::TooHard);
  EXPECT_EQ(overlap(rows, Tensor::empty({3, 3}, ScalarType::Float)), Overlap::No);
  EXPECT_THROW(assert_no_partial_overlap(rows, base), Error);
  EXPECT_NO_THROW(assert_no_partial_overlap(base, base));
  EXPECT_THROW(assert_no_overlap(base, base), Error);
}

TEST(Storage, ResizeGrowsInPlaceForEveryTensorSharingIt) {
  Tensor a = Tensor::empty({2}, ScalarType::Int);
  a.data_as<int32_t>()[0] = 11;
  a.data_as<int32_t>()[1] = 22;
  Tensor b = a.view_as_strided({1}, {1}, 1);
  a.resize({4});
  ASSERT_EQ(a.storage(), b.storage());
  EXPECT_EQ(a.storage()->nbytes(), 16u);
  EXPECT_EQ(b.data_as<int32_t>()[0], 22);  // the view reads the moved bytes, not freed memory
  b.data_as<int32_t>()[0] = 33;
  EXPECT_EQ(a.data_as<int32_t>()[1], 33);
  EXPECT_THROW(a.resize({-1}), Error);
}

TEST(Storage, BorrowedMemoryRefusesToResize) {
  int32_t owned_elsewhere[2] = {1, 2};
  auto storage = std::make_shared<Storage>(owned_elsewhere, sizeof owned_elsewhere, std::function<void()>());
  EXPECT_FALSE(storage->resizable());
  Tensor t = Tensor::from_storage(storage, {2}, {1}, 0, ScalarType::Int);
  EXPECT_THROW(t.resize({3}), Error);
  t.resize({1});  // shrinking needs no new memory
  EXPECT_EQ(t.numel(), 1);
}

TEST(Storage, AWindowKeepsItsBytesWhenTheOwnerResizes) {
  auto owner = std::make_shared<Storage>(8);
  std::memset(owner->data(), 5, 8);
  Storage window(static_cast<char*>(owner->data()) + 2, 4, owner->memory());
  owner->resize(1 << 20);  // frees the old allocation as far as the owner is concerned
  EXPECT_EQ(static_cast<unsigned char*>(window.data())[3], 5);
}

// Resident memory of this process, in bytes.
size_t resident_bytes() {
  size_t pages = 0, resident = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  EXPECT_EQ(std::fscanf(statm, "%zu %zu", &pages, &resident), 2);
  std::fclose(statm);
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

TEST(Storage, ALargeBlockFreedIsReusedForTheSameSize) {
  const size_t bytes = (size_t(3) << 20) + 12345;
  void* first = nullptr;
  {
    Storage storage(bytes);
    first = storage.data();
    std::memset(first, 1, bytes);
  }
  Storage again(bytes);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again.data()) % 64, 0u);
}

// Freed large blocks are kept only while the mapped total stays within the most ever live at
// once and 64 MiB: a run of ever-larger tensors, each freed before the next, keeps about one
// resident and the slack.
TEST(Storage, CachedLargeBlocksStayWithinThePeakOfLiveOnes) {
  size_t before = resident_bytes();
  for (size_t mib = 21; mib <= 40; ++mib) {
    Storage storage(mib << 20);
    std::memset(storage.data(), 1, mib << 20);
  }
  EXPECT_LT(resident_bytes(), before + (size_t(150) << 20));  // kept all: 610 MiB more
}

TEST(Dispatcher, InPlaceAndOutOverloadsDeriveFromTheFunctionalKernel) {
  Dispatcher& d = Dispatcher::instance();
  Tensor a = Tensor::empty({2}, ScalarType::Long), b = Tensor::empty({2}, ScalarType::Long);
  for (int i = 0; i < 2; ++i) {
    a.data_as<int64_t>()[i] = i + 1;
    b.data_as<int64_t>()[i] = 5;
  }
  Stack inplace{a, b, Scalar(int64_t{2})};
  d.call(*d.find("aten::add_", "Tensor"), inplace);
  EXPECT_TRUE(std::get<Tensor>(inplace[0].value).same(a));
  EXPECT_EQ(a.data_as<int64_t>()[1], 12);  // 2 + 2 * 5
  Tensor out = Tensor::empty({0}, ScalarType::Double);
  Stack with_out{a, b, Scalar(int64_t{1}), out};
  d.call(*d.find("aten::add", "out"), with_out);
  EXPECT_EQ(out.sizes(), Shape{2});  // resized like upstream's resize_output
  EXPECT_EQ(out.data_as<double>()[0], 16.0);
  Tensor float_input = Tensor::empty({2}, ScalarType::Float);
  Stack narrowing{a, float_input, Scalar(int64_t{1})};
  EXPECT_THROW(d.call(*d.find("aten::add_", "Tensor"), narrowing), Error);  // Float can't be cast to Long
}

TEST(Promotion, WrappedNumbersRankBelowTensors) {
  Tensor ints = Tensor::empty({2}, ScalarType::Int);
  Tensor half = Tensor::empty({2}, ScalarType::Half);
  std::memset(half.data(), 0, 2 * sizeof(Half));
  Stack int_plus_float{ints, Scalar(2.5), Scalar(int64_t{1})};
  Dispatcher& d = Dispatcher::instance();
  for (int i = 0; i < 2; ++i) ints.data_as<int32_t>()[i] = i;
  d.call(*d.find("aten::add", "Scalar"), int_plus_float);
  EXPECT_EQ(std::get<Tensor>(int_plus_float[0].value).dtype(), ScalarType::Float);  // the default dtype
  Stack half_plus_float{half, Scalar(2.5), Scalar(int64_t{1})};
  d.call(*d.find("aten::add", "Scalar"), half_plus_float);
  EXPECT_EQ(std::get<Tensor>(half_plus_float[0].value).dtype(),
            ScalarType::Half);  // same category: the tensor wins
}

}  // namespace tn

// The meta device: storages made under a MetaAllocation have a size and no bytes; any element
// access throws, a copy into one writes nothing, and views and overlap checks still work.
TEST(MetaDevice, StoragesHaveSizesAndNoBytes) {
  tn::Tensor meta;
  {
    tn::MetaAllocation allocation;
    meta = tn::Tensor::empty({1 << 20, 1 << 12}, tn::ScalarType::Float);  // 16 GiB if it were allocated
  }
  EXPECT_TRUE(meta.is_meta());
  EXPECT_EQ(meta.storage()->nbytes(), size_t(1) << 34);
  EXPECT_THROW(meta.data(), tn::MetaDataAccess);
  EXPECT_FALSE(tn::Tensor::empty({2}, tn::ScalarType::Float).is_meta());  // the guard is gone
  tn::Tensor row = meta.view_as_strided({1 << 12}, {1}, 1 << 12);
  EXPECT_TRUE(row.is_meta());
  EXPECT_EQ(tn::overlap(meta, row), tn::Overlap::Partial);  // from offsets: a meta storage has no addresses
  EXPECT_EQ(tn::overlap(meta.view_as_strided({1 << 12}, {1}, 0), row), tn::Overlap::No);
  tn::Tensor values = tn::Tensor::empty({1 << 12}, tn::ScalarType::Float);
  EXPECT_NO_THROW(row.copy_from(values));
  EXPECT_THROW(values.copy_from(row), tn::MetaDataAccess);
  meta.storage()->resize(16);
  EXPECT_EQ(meta.storage()->nbytes(), 16u);
  EXPECT_THROW(meta.data(), tn::MetaDataAccess);
}

// A kernel's own temporaries that must hold values are made with MetaAllocation(false).
TEST(MetaDevice, AnInnerGuardAllocatesBytesAgain) {
  tn::MetaAllocation allocation;
  tn::Tensor meta = tn::Tensor::empty({3}, tn::ScalarType::Float);
  tn::MetaAllocation with_bytes(false);
  tn::Tensor values = tn::Tensor::empty({3}, tn::ScalarType::Float);
  EXPECT_TRUE(meta.is_meta());
  EXPECT_FALSE(values.is_meta());
  EXPECT_NO_THROW(values.data());
}

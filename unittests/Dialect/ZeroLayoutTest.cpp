//===- ZeroLayoutTest.cpp - the ZeRO flat-buffer layout policy ------------===//

#include "ds/Dialect/DS/Analysis/ZeroLayout.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::ds;

namespace {

class DialectZeroLayoutTest : public ::testing::Test {
protected:
  MLIRContext context;
  Type f32 = Float32Type::get(&context);
  Type bf16 = BFloat16Type::get(&context);

  /// Parameters of `sizes`, each with a gradient at its position.
  static SmallVector<LayoutParam> params(ArrayRef<int64_t> sizes) {
    SmallVector<LayoutParam> result;
    for (auto [i, numel] : llvm::enumerate(sizes)) {
      LayoutParam param;
      param.numel = numel;
      param.gradPosition = {int64_t(i), 0};
      result.push_back(param);
    }
    return result;
  }

  static ZeroLayoutPolicy policy(int64_t stage, int64_t world,
                                 int64_t capacity) {
    ZeroLayoutPolicy p;
    p.stage = stage;
    p.worldSize = world;
    p.capacity = capacity;
    return p;
  }

  /// "offset+numel" of every bucket.
  static std::vector<std::string> spans(const ZeroLayout &layout) {
    std::vector<std::string> result;
    for (const LayoutBucket &b : layout.buckets)
      result.push_back(std::to_string(b.offset) + "+" +
                       std::to_string(b.numel));
    return result;
  }
};

TEST_F(DialectZeroLayoutTest, CapacityIsTheSmallerBucketSizeFromStage1) {
  EXPECT_EQ(bucketCapacity(0, 20, 10).first, 20);
  EXPECT_EQ(bucketCapacity(0, 20, 10).second,
            "zero_optimization.reduce_bucket_size");
  EXPECT_EQ(bucketCapacity(1, 20, 10).first, 10);
  EXPECT_EQ(bucketCapacity(1, 20, 10).second,
            "zero_optimization.allgather_bucket_size");
  EXPECT_EQ(bucketCapacity(3, 10, 20).first, 10);
}

TEST_F(DialectZeroLayoutTest, OrderFollowsTheBackwardWithoutGradientsLast) {
  SmallVector<LayoutParam> ps = params({1, 1, 1, 1});
  ps[0].gradPosition = {5, 0};
  ps[1].gradPosition.reset();
  ps[2].gradPosition = {2, 1};
  ps[3].gradPosition = {2, 0};
  EXPECT_EQ(layoutOrder(ps), (SmallVector<unsigned>{3, 2, 0, 1}));
}

// The worked example of zero-partition-buckets.mlir: 3 | 12 | 5 4 with
// capacity 10, each bucket padded to the world size.
TEST_F(DialectZeroLayoutTest, PacksInOrderNeverSplitsAndPads) {
  SmallVector<LayoutParam> ps = params({3, 12, 5, 4});
  ZeroLayout w2 = layOutParams(ps, layoutOrder(ps), policy(1, 2, 10));
  EXPECT_EQ(spans(w2), (std::vector<std::string>{"0+4", "4+12", "16+10"}));
  EXPECT_EQ(w2.numel, 26);
  EXPECT_EQ(w2.padding, 2);
  ASSERT_EQ(w2.offsets.size(), 4u);
  EXPECT_EQ(w2.offsets[3], (std::pair<unsigned, int64_t>{3, 21}));
  ZeroLayout w4 = layOutParams(ps, layoutOrder(ps), policy(1, 4, 10));
  EXPECT_EQ(w4.numel, 28);
  EXPECT_EQ(w4.padding, 4);
}

// Each dtype fills buckets of its own; a bucket takes its place when it
// closes.
TEST_F(DialectZeroLayoutTest, DtypesNeverShareABucket) {
  SmallVector<LayoutParam> ps = params({4, 4, 4, 4});
  ps[0].dtype = bf16;
  ps[1].dtype = f32;
  ps[2].dtype = bf16;
  ps[3].dtype = f32;
  ZeroLayout layout = layOutParams(ps, layoutOrder(ps), policy(2, 1, 6));
  ASSERT_EQ(layout.buckets.size(), 4u);
  // bf16 {0} closes when 2 arrives, f32 {1} when 3 arrives, then the open
  // ones in the order they were started.
  EXPECT_EQ(layout.buckets[0].params, (SmallVector<unsigned>{0}));
  EXPECT_EQ(layout.buckets[1].params, (SmallVector<unsigned>{1}));
  EXPECT_EQ(layout.buckets[2].params, (SmallVector<unsigned>{2}));
  EXPECT_EQ(layout.buckets[3].params, (SmallVector<unsigned>{3}));
  EXPECT_EQ(layout.buckets[0].dtype, bf16);
  EXPECT_EQ(layout.buckets[1].dtype, f32);
}

// Stage 3: sharded buckets, then one bucket per leaf (whatever its size),
// then the persistent parameters (at most the threshold).
TEST_F(DialectZeroLayoutTest, Stage3GroupsShardedLeafAndPersistent) {
  SmallVector<LayoutParam> ps = params({2, 20, 3, 30, 8});
  ps[2].leaf = 0;
  ps[3].leaf = 0;
  ps[2].dtype = bf16;
  ps[3].dtype = f32;
  ZeroLayoutPolicy p = policy(3, 2, 16);
  p.persistenceThreshold = 4;
  p.numLeaves = 1;
  p.wideDtype = f32;
  ZeroLayout layout = layOutParams(ps, layoutOrder(ps), p);
  ASSERT_EQ(layout.buckets.size(), 4u);
  EXPECT_EQ(layout.buckets[0].params, (SmallVector<unsigned>{1}));
  EXPECT_EQ(layout.buckets[1].params, (SmallVector<unsigned>{4}));
  EXPECT_EQ(layout.buckets[2].params, (SmallVector<unsigned>{2, 3}));
  EXPECT_EQ(layout.buckets[2].leaf, 0);
  EXPECT_TRUE(layout.buckets[2].mixedLeaf);
  EXPECT_EQ(layout.buckets[2].dtype, f32);
  EXPECT_EQ(layout.buckets[3].params, (SmallVector<unsigned>{0}));
  EXPECT_TRUE(layout.buckets[3].persistent);
  EXPECT_FALSE(layout.buckets[0].persistent);
  EXPECT_EQ(spans(layout),
            (std::vector<std::string>{"0+20", "20+8", "28+34", "62+2"}));
}

} // namespace

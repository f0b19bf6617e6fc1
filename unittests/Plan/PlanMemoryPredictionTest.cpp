//===- PlanMemoryPredictionTest.cpp - Peak live bytes from a plan ---------===//

#include "TestUtil.h"

#include "ds/Plan/MemoryPrediction.h"
#include "ds/Plan/PlanFormat.h"

using namespace ds::plan;

TEST(PlanMemoryPredictionTest, ChainWithFrees) {
  ds::test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {8, 8}); // 256 bytes
  ValueId y = b.tensor(DType::Float32, {8, 8}); // 256
  ValueId z = b.tensor(DType::Float64, {8, 8}); // 512
  ValueId s = b.tensor(DType::Float64, {});     // 8
  b.add(Op::input(0, x));
  b.call("aten::relu", {x}, {y});             // 512 live
  b.call("aten::to.dtype", {y}, {z}, {x, y}); // 1024, then 512
  b.call("aten::sum", {z}, {s}, {z});         // 520, then 8
  b.program.results = {s};
  EXPECT_EQ(predictPeakBytes(b.program), 1024);
}

TEST(PlanMemoryPredictionTest, StateIsNotCountedAndDynamicCountsZero) {
  ds::test::ProgramBuilder b;
  ValueId w = b.tensor(DType::Float32, {100});
  ValueId n = b.tensor(DType::Int64, {-1, 1});
  ValueId r = b.tensor(DType::Float32, {100});
  b.add(Op::state("w", w));
  b.call("aten::nonzero", {w}, {n});
  b.call("aten::relu", {w}, {r}, {w, n});
  b.program.results = {r};
  EXPECT_EQ(predictPeakBytes(b.program), 400);
}

TEST(PlanMemoryPredictionTest, IfCountsTheLargerBranch) {
  ds::test::ProgramBuilder b;
  ValueId c = b.scalar(ValueType::Bool);
  ValueId big = b.tensor(DType::Float32, {1000});
  ValueId small = b.tensor(DType::Float32, {10});
  ValueId other = b.tensor(DType::Float32, {10});
  ValueId out = b.tensor(DType::Float32, {10});
  Branch then, otherwise;
  then.body.push_back(Op::call("aten::zeros", {}, {big}));
  then.body.push_back(Op::call("aten::zeros", {}, {small}));
  then.yields = {small};
  otherwise.body.push_back(Op::call("aten::zeros", {}, {other}));
  otherwise.yields = {other};
  b.add(Op::constant(Constant::ofBool(true), c));
  b.add(Op::ifOp(c, then, otherwise, {out}));
  b.program.results = {out};
  EXPECT_EQ(predictPeakBytes(b.program), 4040);
  EXPECT_EQ(staticValueBytes(b.program.values[big]), 4000);
  EXPECT_EQ(staticValueBytes(b.program.values[c]), std::nullopt);
}

TEST(PlanMemoryPredictionTest, GradOpsProduceNothing) {
  Plan plan = readPlan(ds::test::fixture("plans/linear_mse_train.json"));
  // The slots of the forward persist into the backward. The peak is at
  // mse_loss_backward, before its frees: x 64 + t 48 + y 48 + loss 4 +
  // seed 4 + dy 48 = 216 bytes (grad ops add nothing; state counts 0).
  EXPECT_EQ(predictPeakBytes(*plan.findProgram("train")), 216);
}

TEST(PlanMemoryPredictionTest, DynamicTensorsCountTheirBound) {
  ds::test::ProgramBuilder b;
  ValueId m = b.tensor(DType::Bool, {100});
  ValueId n = b.tensor(DType::Int64, {-1, 1});
  ValueId r = b.tensor(DType::Float32, {-1, 4});
  ValueId s = b.tensor(DType::Float32, {});
  b.program.values[n].bound = std::vector<int64_t>{100, 1}; // 800 bytes
  b.add(Op::input(0, m));
  b.call("aten::nonzero", {m}, {n});        // 900 live
  b.call("aten::repeat", {n}, {r}, {m, n}); // r unbounded: counts 0
  b.call("aten::sum", {r}, {s}, {r});
  b.program.results = {s};
  EXPECT_EQ(predictPeakBytes(b.program), 900);
  EXPECT_EQ(valueBytesBound(b.program.values[n]), 800);
  EXPECT_EQ(valueBytesBound(b.program.values[r]), std::nullopt);
  EXPECT_EQ(staticValueBytes(b.program.values[n]), std::nullopt);
  SizeBasis basis = sizeBasis(b.program);
  EXPECT_TRUE(basis.usesBounds);
  EXPECT_EQ(basis.unboundedValues, 1);

  // Bounded throughout: an upper bound, nothing left out.
  b.program.values[r].bound = std::vector<int64_t>{100, 4};
  EXPECT_EQ(predictPeakBytes(b.program), 100 + 800 + 1600);
  basis = sizeBasis(b.program);
  EXPECT_TRUE(basis.usesBounds);
  EXPECT_EQ(basis.unboundedValues, 0);
}

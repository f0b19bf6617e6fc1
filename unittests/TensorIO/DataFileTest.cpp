//===- DataFileTest.cpp - Data files for ds-run ---------------------------===//

#include "TestUtil.h"

#include "ds/TensorIO/DataFile.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

using namespace ds;
using ds::runtime::DataFile;
using ds::runtime::RuntimeError;
using ds::test::TempDir;

namespace {

/// Inputs x: float32 [2, 3] (batched) and table: int64 [5] (unbatched);
/// micro-batch 2 per rank on `worldSize` ranks.
plan::Plan dataPlan(int64_t worldSize = 1) {
  plan::Plan plan;
  plan.worldSize = worldSize;
  plan.microBatchPerRank = 2;
  plan.inputs.push_back({"x", plan::DType::Float32, {2, 3}, true});
  plan.inputs.push_back({"table", plan::DType::Int64, {5}, false});
  return plan;
}

/// What Python's torch.save writes (C++ pickle_save writes the same format).
void saveDict(const std::string &path,
              const std::vector<std::pair<std::string, at::Tensor>> &items) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto &[key, tensor] : items)
    dict.insert(key, tensor);
  std::vector<char> bytes = torch::jit::pickle_save(dict);
  test::writeText(path, std::string(bytes.begin(), bytes.end()));
}

} // namespace

TEST(TensorIODataFileTest, SlicesRanksAndMicroSteps) {
  TempDir dir;
  at::Tensor x = torch::arange(5 * 4 * 3, torch::kFloat).reshape({5, 4, 3});
  at::Tensor table = torch::arange(5 * 5).reshape({5, 5});
  saveDict(dir.file("d.pt"), {{"x", x}, {"in1", table}});
  runtime::DataOptions options;
  options.unbatched = {"table"};
  DataFile data = DataFile::load(dir.file("d.pt"), dataPlan(2), options);
  EXPECT_EQ(data.numMicroSteps(), 5);
  std::vector<at::Tensor> rank1 = data.sliceMicroStep(3, 1, 2);
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_TRUE(rank1[0].equal(x[3].slice(0, 2, 4)));
  EXPECT_TRUE(rank1[1].equal(table[3]));
  // Views, not copies.
  std::vector<at::Tensor> again = data.sliceMicroStep(3, 1, 2);
  EXPECT_EQ(rank1[0].data_ptr(), again[0].data_ptr());
  EXPECT_THROW_WITH(data.requireMicroSteps(6, "3 steps x 2"), RuntimeError,
                    "d.pt has S = 5 micro-steps, but 6 are needed (3 steps x "
                    "2)");
}

TEST(TensorIODataFileTest, SafetensorsData) {
  TempDir dir;
  at::Tensor x = torch::randn({3, 2, 3});
  runtime::writeSafetensors(
      dir.file("d.safetensors"),
      {{"in0", x}, {"table", torch::zeros({3, 5}, torch::kLong)}});
  DataFile data = DataFile::load(dir.file("d.safetensors"), dataPlan());
  EXPECT_TRUE(data.sliceMicroStep(2, 0, 1)[0].equal(x[2]));
}

TEST(TensorIODataFileTest, PythonTorchSaveFiles) {
  // Written by Python's torch.save (data/make_fixtures.py); a one-key dict is
  // pickled with SETITEM, two keys with SETITEMS.
  plan::Plan plan;
  plan.microBatchPerRank = 4;
  plan.inputs.push_back({"x", plan::DType::Float32, {4, 3}, true});
  DataFile one = DataFile::load(test::fixture("data/one_key.pt"), plan);
  EXPECT_EQ(one.numMicroSteps(), 2);
  EXPECT_TRUE(one.sliceMicroStep(1, 0, 1)[0].equal(
      torch::arange(24, torch::kFloat).reshape({2, 4, 3})[1]));

  plan.inputs.push_back({"y", plan::DType::Int64, {4}, true});
  DataFile two = DataFile::load(test::fixture("data/two_keys.pt"), plan);
  EXPECT_TRUE(two.sliceMicroStep(0, 0, 1)[1].equal(torch::arange(4)));
}

TEST(TensorIODataFileTest, ErrorsNameTheFileAndKey) {
  TempDir dir;
  std::string path = dir.file("d.pt");
  at::Tensor x = torch::zeros({4, 2, 3});
  at::Tensor table = torch::zeros({4, 5}, torch::kLong);
  auto load = [&](const std::vector<std::pair<std::string, at::Tensor>> &items,
                  plan::Plan plan = dataPlan()) {
    saveDict(path, items);
    return DataFile::load(path, plan);
  };

  EXPECT_THROW_WITH(load({{"x", x}}), RuntimeError,
                    "data file " + path +
                        ": missing forward argument 1 (no key \"table\" or "
                        "\"in1\")");
  EXPECT_THROW_WITH(load({{"x", x}, {"table", table}, {"mask", x}}),
                    RuntimeError,
                    "unknown key \"mask\" (forward arguments: x (or in0), "
                    "table (or in1))");
  EXPECT_THROW_WITH(load({{"x", x}, {"in0", x}, {"table", table}}),
                    RuntimeError,
                    "keys \"x\" and \"in0\" both name forward argument 0");
  EXPECT_THROW_WITH(load({{"x", torch::zeros({4, 2, 4})}, {"table", table}}),
                    RuntimeError,
                    "key \"x\" has shape [4, 2, 4], expected [S, B, 3] (the "
                    "plan's argument \"x\" is float32 [2, 3] per rank)");
  EXPECT_THROW_WITH(load({{"x", x.to(torch::kDouble)}, {"table", table}}),
                    RuntimeError,
                    "key \"x\" is float64, the plan's argument \"x\" is "
                    "float32");
  EXPECT_THROW_WITH(load({{"x", torch::zeros({4, 6, 3})}, {"table", table}}),
                    RuntimeError,
                    "key \"x\" has B = 6 rows per micro-step (shape [4, 6, "
                    "3]), but micro_batch_per_rank * world_size = 2 * 1 = 2");
  EXPECT_THROW_WITH(
      load({{"x", x}, {"table", torch::zeros({3, 5}, torch::kLong)}}),
      RuntimeError, "key \"table\" has S = 3 micro-steps, key \"x\" has 4");
  EXPECT_THROW_WITH(
      load({{"x", x}, {"table", torch::zeros({4, 2, 5}, torch::kLong)}}),
      RuntimeError,
      "expected [S, 5] (the plan's argument \"table\" is int64 "
      "[5], unbatched)");

  runtime::DataOptions options;
  options.unbatched = {"x"};
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan(), options), RuntimeError,
                    "--unbatched x: the plan was compiled with \"x\" batched");
  options.unbatched = {"z"};
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan(), options), RuntimeError,
                    "--unbatched z: the plan has no forward argument of that "
                    "name");

  test::writeText(path, "not a data file");
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan()), RuntimeError,
                    "data file " + path +
                        ": not a torch.save file or a .safetensors file");
  std::vector<char> list = torch::jit::pickle_save(c10::List<int64_t>({1, 2}));
  test::writeText(path, std::string(list.begin(), list.end()));
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan()), RuntimeError,
                    "micro-step 0: expected a dict of str -> Tensor, found "
                    "Int");
  std::vector<char> number = torch::jit::pickle_save(c10::IValue(int64_t(3)));
  test::writeText(path, std::string(number.begin(), number.end()));
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan()), RuntimeError,
                    "expected a dict of str -> Tensor (torch.save({...})) or "
                    "a list of such dicts, one per micro-step, found Int");
}

/// torch.save([{...}, {...}]): one dict per micro-step.
static void saveSteps(
    const std::string &path,
    const std::vector<std::vector<std::pair<std::string, at::Tensor>>> &steps) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (const auto &items : steps) {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto &[key, tensor] : items)
      dict.insert(key, tensor);
    list.push_back(dict);
  }
  std::vector<char> bytes = torch::jit::pickle_save(list);
  test::writeText(path, std::string(bytes.begin(), bytes.end()));
}

TEST(TensorIODataFileTest, ListOfMicroStepsSplitsEachOverTheRanks) {
  TempDir dir;
  std::vector<at::Tensor> xs, tables;
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> steps;
  for (int64_t s = 0; s < 3; ++s) {
    xs.push_back(torch::rand({4, 3}));
    tables.push_back(torch::arange(5) + s);
    steps.push_back({{"x", xs.back()}, {"in1", tables.back()}});
  }
  saveSteps(dir.file("l.pt"), steps);
  DataFile data = DataFile::load(dir.file("l.pt"), dataPlan(2));
  EXPECT_EQ(data.numMicroSteps(), 3);
  std::vector<at::Tensor> rank1 = data.sliceMicroStep(2, 1, 2);
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_TRUE(rank1[0].equal(xs[2].slice(0, 2, 4)));
  EXPECT_TRUE(rank1[1].equal(tables[2]));
  EXPECT_THROW_WITH(data.requireMicroSteps(4, "2 steps x 2"), RuntimeError,
                    "l.pt has S = 3 micro-steps, but 4 are needed");
}

TEST(TensorIODataFileTest, ListMicroStepOfAnotherShapeNamesBoth) {
  TempDir dir;
  std::string path = dir.file("l.pt");
  at::Tensor table = torch::zeros({5}, torch::kLong);
  saveSteps(path, {{{"x", torch::zeros({4, 3})}, {"table", table}},
                   {{"x", torch::zeros({6, 3})}, {"table", table}}});
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan(2)), RuntimeError,
                    "data file " + path +
                        ": micro-step 1 has shapes x [6, 3], table [5] (per "
                        "rank of 2: x [3, 3], table [5]), which match no "
                        "compiled program (compiled, per rank: x [2, 3], "
                        "table [5])");
  saveSteps(path,
            {{{"x", torch::zeros({4, 3})}, {"table", table}},
             {{"x", torch::zeros({4, 3}, torch::kDouble)}, {"table", table}}});
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan(2)), RuntimeError,
                    "micro-step 1: key \"x\" is float64, the plan's "
                    "argument \"x\" is float32");
  saveSteps(path, {{{"x", torch::zeros({4, 3})}}});
  EXPECT_THROW_WITH(DataFile::load(path, dataPlan(2)), RuntimeError,
                    "micro-step 0: missing forward argument 1");
}

// Found by review of the fuzz targets: a BINUNICODE8 length near 2^64 made the
// unpickler's bounds check wrap around and step backwards (a loop until out of
// memory); it is the end of the data.
TEST(TensorIODataFileTest, HugeStringLengthIsTheEndOfTheData) {
  TempDir dir;
  std::string path = dir.file("huge.pt");
  std::string pickle = "\x80\x02\x8d";
  pickle += std::string(8, '\xff');
  pickle += ".";
  std::vector<char> archive;
  {
    caffe2::serialize::PyTorchStreamWriter writer(
        [&](const void *bytes, size_t size) {
          const char *begin = static_cast<const char *>(bytes);
          archive.insert(archive.end(), begin, begin + size);
          return size;
        });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    writer.writeEndOfFile();
  }
  test::writeText(path, std::string(archive.begin(), archive.end()));
  EXPECT_THROW_WITH(runtime::readTensorFile(path), RuntimeError,
                    "unexpected end of data");
}

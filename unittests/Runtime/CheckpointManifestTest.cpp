//===- CheckpointManifestTest.cpp - Checksummed checkpoints ---------------===//
//
// The pieces of checkpoint manifests (lib/Runtime/CheckpointManifest.h,
// docs/checkpoint.md "Manifest"): XXH64 against xxhsum's published
// vectors, the manifest's text both ways with every kind of malformed
// manifest a clear error (repeated keys too), verification refusing a
// changed, cut, missing or unlisted file by name and a folder it cannot list,
// the ranks' digest lines, `latest` kept inside the folder, the hash taken
// while writing, the full-disk error of the write layer (no descriptor or
// temporary file left on any error), and the ranks' exchange. The whole path
// under mpirun: test/mpi/checkpoint_check.py --case integrity.
//
//===----------------------------------------------------------------------===//

#include "CheckpointManifest.h"
#include "CheckpointFiles.h"
#include "CheckpointHash.h"
#include "CheckpointRanks.h"
#include "TestUtil.h"
#include "ThreadCommunicator.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace ds::runtime::detail;
using ds::runtime::RuntimeError;
using ds::test::TempDir;

/// The error text of `body`, which must throw RuntimeError.
template <typename F> std::string errorOf(F body) {
  try {
    body();
  } catch (const RuntimeError &error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a RuntimeError";
  return "";
}

/// xxhsum's sanity buffer (its BMK_sanityCheck): 101 bytes from a 32-bit
/// generator squared at each step.
std::string sanityBuffer() {
  std::string bytes(101, '\0');
  uint32_t generator = 2654435761U;
  for (char &byte : bytes) {
    byte = char(generator >> 24);
    generator *= generator;
  }
  return bytes;
}

TEST(CheckpointXxh64, MatchesTheReferenceVectors) {
  // xxhsum's own sanity check (Cyan4973/xxHash, BMK_sanityCheck): lengths 0,
  // 1, 14 and 101 of its buffer (under one 32-byte stripe, and three
  // stripes plus a tail), seeds 0 and 2654435761.
  const std::string buffer = sanityBuffer();
  const uint64_t prime = 2654435761U;
  struct Vector {
    size_t length;
    uint64_t seed;
    uint64_t hash;
  };
  const Vector vectors[] = {
      {0, 0, 0xEF46DB3751D8E999ULL},   {0, prime, 0xAC75FDA2929B17EFULL},
      {1, 0, 0x4FCE394CC88952D8ULL},   {1, prime, 0x739840CB819FA723ULL},
      {14, 0, 0xCFFA8DB881BC3A3DULL},  {14, prime, 0x5B9611585EFCC9CBULL},
      {101, 0, 0x0EAB543384F878ADULL}, {101, prime, 0xCAA65939306F1E21ULL}};
  for (const Vector &v : vectors)
    EXPECT_EQ(xxh64(std::string_view(buffer).substr(0, v.length), v.seed),
              v.hash)
        << "length " << v.length << ", seed " << v.seed;
  // Strings whose XXH64 (seed 0) other implementations publish.
  EXPECT_EQ(xxh64("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxh64("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxh64("Nobody inspects the spammish repetition"),
            0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(hexDigest(0xEF46DB3751D8E999ULL), "ef46db3751d8e999");
  EXPECT_EQ(hexDigest(0x0EAB543384F878ADULL), "0eab543384f878ad");
}

TEST(CheckpointXxh64, PiecesOfAnySizeGiveTheOneShotHash) {
  // The write path hashes whatever runs write() took.
  std::string bytes;
  for (int i = 0; i < 1000; ++i)
    bytes += char((i * 131 + 7) & 0xFF);
  const uint64_t whole = xxh64(bytes);
  for (size_t cut = 0; cut <= 200; ++cut) {
    Xxh64 hash;
    hash.update(std::string_view(bytes).substr(0, cut));
    hash.update(std::string_view(bytes).substr(cut));
    ASSERT_EQ(hash.digest(), whole) << "cut at " << cut;
  }
  Xxh64 bytewise;
  for (char byte : bytes)
    bytewise.update(&byte, 1);
  EXPECT_EQ(bytewise.digest(), whole);
  EXPECT_EQ(bytewise.size(), bytes.size());
  // One flipped bit anywhere changes it.
  for (size_t at : {size_t(0), size_t(31), size_t(500), bytes.size() - 1}) {
    std::string flipped = bytes;
    flipped[at] ^= 1;
    EXPECT_NE(xxh64(flipped), whole) << "bit flipped at " << at;
  }
}

TEST(CheckpointManifest, TextRoundTrips) {
  Manifest manifest = {
      {"mp_rank_00_model_states.pt", {9672, 0x0E2C3BC16E271738ULL}},
      {"zero_pp_rank_1_mp_rank_00_optim_states.pt", {0, 0}},
      {"big.pt", {uint64_t(1) << 40, ~uint64_t(0)}}};
  const std::string text = manifestText(manifest);
  EXPECT_NE(text.find("\"format\": \"ds-checkpoint-manifest\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"xxh64\": \"0e2c3bc16e271738\""), std::string::npos)
      << text;
  Manifest parsed = parseManifest(text, "m.json");
  ASSERT_EQ(parsed.size(), manifest.size());
  for (const auto &[name, entry] : manifest) {
    EXPECT_EQ(parsed.at(name).size, entry.size) << name;
    EXPECT_EQ(parsed.at(name).xxh64, entry.xxh64) << name;
  }
}

TEST(CheckpointManifest, MalformedManifestsAreClearErrors) {
  // A manifest of `files` with the header fields given as JSON values.
  auto with = [](const std::string &files,
                 const std::string &format = "\"ds-checkpoint-manifest\"",
                 const std::string &version = "1",
                 const std::string &hash = "\"xxh64\"") {
    return "{\"format\": " + format + ", \"version\": " + version +
           ", \"hash\": " + hash + ", \"files\": " + files + "}";
  };
  const std::string ours = "\"ds-checkpoint-manifest\"";
  const std::string good = R"({"size": 3, "xxh64": "0123456789abcdef"})";
  const std::pair<std::string, std::string> cases[] = {
      {"", "bad JSON"},
      {"{\"format\": ", "bad JSON"},
      {"[1, 2]", "expected a JSON object"},
      {R"({"version": 1, "hash": "xxh64", "files": {}})", "no key 'format'"},
      {with("{}", "\"zip\""), "'format' is \"zip\""},
      {with("{}", ours, "2"), "version 2 is newer"},
      {with("{}", ours, "\"1\""), "'version' is \"1\""},
      {with("{}", ours, "1", "\"crc32\""), "'hash' is \"crc32\""},
      {R"({"format": "ds-checkpoint-manifest", "version": 1, "files": {}})",
       "no key 'hash'"},
      {with("[]"), "'files' is not an object"},
      {with(R"({"a.pt": 3})"), "file 'a.pt': expected {"},
      {with(R"({"a.pt": {"xxh64": "0123456789abcdef"}})"), "file 'a.pt'"},
      {with(R"({"a.pt": {"size": -1, "xxh64": "0123456789abcdef"}})"),
       "size -1 is not a non-negative integer"},
      {with(R"({"a.pt": {"size": 1.5, "xxh64": "0123456789abcdef"}})"),
       "size 1.5"},
      {with(R"({"a.pt": {"size": "3", "xxh64": "0123456789abcdef"}})"),
       "size \"3\""},
      {with(R"({"a.pt": {"size": 3, "xxh64": "0123"}})"),
       "xxh64 \"0123\" is not 16 lowercase hex digits"},
      {with(R"({"a.pt": {"size": 3, "xxh64": "0123456789ABCDEF"}})"),
       "not 16 lowercase hex digits"},
      {with(R"({"a.pt": {"size": 3, "xxh64": 81985529216486895}})"),
       "not 16 lowercase hex digits"},
      {with("{\"../a.pt\": " + good + "}"),
       "file '../a.pt' is not a file name"},
      {with("{\"sub/a.pt\": " + good + "}"), "is not a file name"},
      {with("{\"\": " + good + "}"), "is not a file name"},
      {with("{\"ds_manifest.json\": " + good + "}"), "is not a file name"},
      // A repeated key: nlohmann would keep its last value, silently.
      {R"({"format": "ds-checkpoint-manifest", "version": 1, "hash": "xxh64", )"
       R"("files": {}, "files": {"a.pt": )" +
           good + "}}",
       "the key 'files' at the top level appears twice"},
      {with("{}").insert(1, "\"version\": 1, "),
       "the key 'version' at the top level appears twice"},
      {with("{\"a.pt\": " + good + ", \"b.pt\": " + good +
            ", \"a.pt\": " + good + "}"),
       "the key 'a.pt' in 'files' appears twice"},
      {with(R"({"a.pt": {"size": 3, "xxh64": "0123456789abcdef", "size": 4}})"),
       "the key 'size' in 'a.pt' appears twice"},
  };
  for (const auto &[text, needle] : cases) {
    std::string error =
        errorOf([&] { parseManifest(text, "ck/ds_manifest.json"); });
    EXPECT_NE(error.find("ck/ds_manifest.json: not a checkpoint manifest: "),
              std::string::npos)
        << text << "\n -> " << error;
    EXPECT_NE(error.find(needle), std::string::npos)
        << text << "\n -> " << error << "\n (expected '" << needle << "')";
  }
  // An empty folder's manifest is valid; keys it does not know (added
  // later without a new version) are ignored.
  EXPECT_EQ(parseManifest(with("{\"a.pt\": " + good + "}"), "m").size(), 1u);
  std::string later = with("{}");
  later.insert(1, "\"later\": 1, ");
  EXPECT_TRUE(parseManifest(later, "m").empty());
}

/// A checkpoint-like folder: three files and their manifest.
struct Folder {
  TempDir dir;
  Manifest manifest;

  Folder() {
    for (const auto &[name, text] :
         std::vector<std::pair<std::string, std::string>>{
             {"mp_rank_00_model_states.pt", std::string(5000, 'm')},
             {"zero_pp_rank_0_mp_rank_00_optim_states.pt", sanityBuffer()},
             {"zero_pp_rank_1_mp_rank_00_optim_states.pt", "one"}}) {
      ds::test::writeText(dir.file(name), text);
      manifest[name] = hashFile(dir.file(name));
    }
    writeManifest(dir.path(), manifest);
  }
  std::string file(const std::string &name) const { return dir.file(name); }
};

TEST(CheckpointManifest, VerifiesTheFilesItDescribes) {
  Folder folder;
  EXPECT_EQ(
      folder.manifest.at("zero_pp_rank_1_mp_rank_00_optim_states.pt").xxh64,
      xxh64("one"));
  EXPECT_EQ(verifyFolder(folder.dir.path()), "");
  std::optional<Manifest> read = readManifest(folder.dir.path());
  ASSERT_TRUE(read);
  EXPECT_EQ(read->size(), 3u);
  // Files that are not torch files (a README) are not its business.
  ds::test::writeText(folder.file("notes.txt"), "mine");
  EXPECT_EQ(verifyFolder(folder.dir.path()), "");
}

TEST(CheckpointManifest, RefusesAChangedByteNamingTheFile) {
  Folder folder;
  const std::string name = "zero_pp_rank_0_mp_rank_00_optim_states.pt";
  std::string bytes = sanityBuffer();
  bytes[50] ^= 0x10; // Same size: only the hash can tell.
  ds::test::writeText(folder.file(name), bytes);
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find("checkpoint file " + folder.file(name) + ": xxh64 " +
                       hexDigest(xxh64(bytes)) +
                       ", but ds_manifest.json says "
                       "101 bytes, xxh64 " +
                       hexDigest(xxh64(sanityBuffer()))),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("refusing to load the checkpoint"), std::string::npos);
  // The hash in the manifest may be what changed: neither is blamed alone.
  EXPECT_NE(error.find("the file or ds_manifest.json changed after the save"),
            std::string::npos)
      << error;
}

TEST(CheckpointManifest, RefusesACutFileNamingBothSizes) {
  Folder folder;
  const std::string name = "mp_rank_00_model_states.pt";
  ds::test::writeText(folder.file(name), std::string(4096, 'm'));
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find(folder.file(name) + ": 4096 bytes, but "
                                           "ds_manifest.json says 5000 bytes"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("cut short"), std::string::npos) << error;
}

TEST(CheckpointManifest, RefusesAMissingFile) {
  Folder folder;
  const std::string name = "zero_pp_rank_1_mp_rank_00_optim_states.pt";
  std::remove(folder.file(name).c_str());
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find(folder.file(name) +
                       ": no such file, but ds_manifest.json lists it (3 "
                       "bytes"),
            std::string::npos)
      << error;
}

TEST(CheckpointManifest, RefusesAManifestOfOtherSizes) {
  // The manifest is what is wrong (or the files are): either way refused.
  Folder folder;
  Manifest wrong = folder.manifest;
  wrong["mp_rank_00_model_states.pt"].size = 5001;
  writeManifest(folder.dir.path(), wrong);
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find("mp_rank_00_model_states.pt: 5000 bytes, but "
                       "ds_manifest.json says 5001 bytes"),
            std::string::npos)
      << error;
}

TEST(CheckpointManifest, RefusesATorchFileItDoesNotList) {
  Folder folder;
  ds::test::writeText(
      folder.file("bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"), "extra");
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find("bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt: not "
                       "listed in ds_manifest.json"),
            std::string::npos)
      << error;
}

TEST(CheckpointManifest, RefusesAFolderItCannotList) {
  // Unlisted *.pt files cannot be ruled out: refused, not skipped. (A
  // folder that is not there, with nothing listed: only the listing fails.)
  TempDir dir;
  const std::string gone = dir.file("gone");
  std::string error = errorOf([&] { verifyFiles(gone, Manifest{}); });
  EXPECT_NE(error.find("checkpoint folder " + gone +
                       ": cannot list it (No such file or directory) to "
                       "check for *.pt files ds_manifest.json does not list"),
            std::string::npos)
      << error;
  ds::test::writeText(gone, "a file");
  error = errorOf([&] { verifyFiles(gone, Manifest{}); });
  EXPECT_NE(error.find("cannot list it (Not a directory)"), std::string::npos)
      << error;
}

TEST(CheckpointManifest, DigestLinesMustBeWholeLines) {
  // What each rank sends rank 0 after its writes: every line or an error.
  std::string text = digestLine(0, "mp_rank_00_model_states.pt",
                                {9672, 0x0E2C3BC16E271738ULL}) +
                     digestLine(1, "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                                {uint64_t(1) << 40, ~uint64_t(0)});
  EXPECT_EQ(text, "0 mp_rank_00_model_states.pt 9672 0e2c3bc16e271738\n"
                  "1 zero_pp_rank_1_mp_rank_00_optim_states.pt 1099511627776 "
                  "ffffffffffffffff\n");
  std::map<size_t, Manifest> manifests;
  addDigestLines(manifests, text, "rank 1");
  addDigestLines(manifests, "", "rank 2"); // A rank that wrote nothing.
  ASSERT_EQ(manifests.size(), 2u);
  EXPECT_EQ(manifests[0].at("mp_rank_00_model_states.pt").size, 9672u);
  EXPECT_EQ(manifests[1].at("zero_pp_rank_1_mp_rank_00_optim_states.pt").xxh64,
            ~uint64_t(0));

  const std::string line = "0 a.pt 3 0123456789abcdef\n";
  const std::pair<std::string, std::string> cases[] = {
      {line + "0 b.pt 3 0123456789abcdef", "not ended by a newline"},
      {line + "0 b.pt 3 0123456789abcdef junk\n", "5 fields"},
      {line + "0 b.pt 3\n", "3 fields"},
      {line + "\n", "1 fields"},
      {line + "0 b.pt -3 0123456789abcdef\n", "size '-3' is not"},
      {line + "0 b.pt 3x 0123456789abcdef\n", "size '3x' is not"},
      {line + "x b.pt 3 0123456789abcdef\n", "engine 'x' is not"},
      {line + "0 ../b.pt 3 0123456789abcdef\n", "'../b.pt' is not a file name"},
      {line + "0 b.pt 3 0123\n", "xxh64 '0123' is not 16"},
      {line + "0 b.pt  3 0123456789abcdef\n", "5 fields"},
      {line + line, "file 'a.pt' of engine 0 listed twice"},
  };
  for (const auto &[bad, needle] : cases) {
    std::map<size_t, Manifest> some;
    std::string error = errorOf([&] { addDigestLines(some, bad, "rank 1"); });
    EXPECT_NE(error.find("the file digests from rank 1, line 2 '"),
              std::string::npos)
        << bad << "\n -> " << error;
    EXPECT_NE(error.find(needle), std::string::npos)
        << bad << "\n -> " << error << "\n (expected '" << needle << "')";
  }
}

TEST(CheckpointManifest, LatestNamesAFolderInside) {
  // `latest` is read as the manifest is (readSmallFile); its tag must not
  // lead out of the checkpoint folder.
  TempDir dir;
  const std::string latest = dir.file("latest");
  EXPECT_NE(
      errorOf([&] { readLatest(dir.path()); }).find(latest + " does not exist"),
      std::string::npos);
  ds::test::writeText(latest, "global_step2\n");
  EXPECT_EQ(readLatest(dir.path()), "global_step2");
  for (const std::string bad :
       {"../other", "a/b", ".global_step2.partial", "..", "/abs"}) {
    ds::test::writeText(latest, bad);
    std::string error = errorOf([&] { readLatest(dir.path()); });
    EXPECT_NE(error.find(latest + ": checkpoint tag '" + bad +
                         "' is not a folder name"),
              std::string::npos)
        << error;
  }
  ds::test::writeText(latest, "");
  EXPECT_NE(errorOf([&] { readLatest(dir.path()); }).find(latest + ": empty"),
            std::string::npos);
  ds::test::writeText(latest, std::string(5000, 'g'));
  EXPECT_NE(errorOf([&] {
              readLatest(dir.path());
            }).find(latest + ": larger than 4096 bytes"),
            std::string::npos);
  // Not "does not exist" when it is there but unreadable.
  std::remove(latest.c_str());
  makeDirectories(latest);
  EXPECT_NE(errorOf([&] {
              readLatest(dir.path());
            }).find("cannot read " + latest + ": Is a directory"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { checkTag("../x"); }).find("not a folder name"),
            std::string::npos);
}

TEST(CheckpointManifest, ReadSmallFileStopsPastTheCap) {
  TempDir dir;
  const std::string path = dir.file("text");
  EXPECT_FALSE(readSmallFile(path, 10));
  ds::test::writeText(path, std::string(100000, 'x'));
  EXPECT_EQ(readSmallFile(path, 100000)->size(), 100000u);
  EXPECT_EQ(readSmallFile(path, 99999)->size(), 100000u); // Cap + 1: larger.
  EXPECT_EQ(readSmallFile(path, 10)->size(), 11u);
  EXPECT_EQ(readSmallFile(path, 0)->size(), 1u);
}

TEST(CheckpointManifest, WithoutAManifestAFolderIsReadWithARemark) {
  Folder folder;
  std::remove(folder.file(kManifestFile).c_str());
  std::string remark = verifyFolder(folder.dir.path());
  EXPECT_NE(remark.find(folder.dir.path() + " has no ds_manifest.json"),
            std::string::npos)
      << remark;
  // A manifest that is there but broken is not "no manifest".
  ds::test::writeText(folder.file(kManifestFile), "{\"format\"");
  std::string error = errorOf([&] { verifyFolder(folder.dir.path()); });
  EXPECT_NE(error.find(folder.file(kManifestFile) +
                       ": not a checkpoint manifest: bad JSON"),
            std::string::npos)
      << error;
}

TEST(CheckpointManifest, RanksSplitTheHashingButAllCheckSizes) {
  Folder folder;
  // In name order: mp_rank_00 (0), zero_pp_rank_0 (1), zero_pp_rank_1 (2).
  std::string bytes = sanityBuffer();
  bytes[0] ^= 1;
  ds::test::writeText(folder.file("zero_pp_rank_0_mp_rank_00_optim_states.pt"),
                      bytes);
  EXPECT_EQ(verifyFolder(folder.dir.path(), 0, 2), "");
  EXPECT_NE(errorOf([&] {
              verifyFolder(folder.dir.path(), 1, 2);
            }).find("zero_pp_rank_0_mp_rank_00_optim_states.pt: xxh64"),
            std::string::npos);
  ds::test::writeText(folder.file("mp_rank_00_model_states.pt"), "short");
  EXPECT_NE(errorOf([&] {
              verifyFolder(folder.dir.path(), 1, 2);
            }).find("mp_rank_00_model_states.pt: 5 bytes"),
            std::string::npos);
}

TEST(CheckpointManifest, WriteTorchFileHashesWhatItWrites) {
  TempDir dir;
  c10::impl::GenericDict dict = newDict();
  dict.insert("weights", at::arange(1000, at::kFloat));
  dict.insert("step", int64_t(3));
  const std::string path = dir.file("mp_rank_00_model_states.pt");
  ManifestEntry written = writeTorchFile(path, dict, 0);
  ManifestEntry read = hashFile(path);
  EXPECT_EQ(written.size, read.size);
  EXPECT_GT(written.size, 4000u);
  EXPECT_EQ(written.xxh64, read.xxh64);
}

TEST(CheckpointManifest, AFullDiskFailsTheWriteNamingTheFile) {
  // WriteTap::failAfter is the layer DS_TEST_CHECKPOINT_ENOSPC drives: the
  // bytes that fit go out, then write() fails with ENOSPC.
  TempDir dir;
  const std::string path =
      dir.file("zero_pp_rank_1_mp_rank_00_optim_states.pt");
  ds::test::writeText(path, "previous");
  std::string seen;
  ds::plan::WriteTap tap;
  tap.written = [&](std::string_view bytes) { seen += bytes; };
  tap.failAfter = 6;
  try {
    ds::plan::writeFileAtomic(path, "0123456789", tap);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot write " + path +
                  ": write failed: No space left on device");
  }
  EXPECT_EQ(seen, "012345");
  // The old file stands and no temporary file is left.
  EXPECT_EQ(ds::test::readText(path), "previous");
  EXPECT_EQ(
      ds::test::listDir(dir.path()),
      std::vector<std::string>{"zero_pp_rank_1_mp_rank_00_optim_states.pt"});
}

/// This process's open file descriptors.
size_t openDescriptors() { return ds::test::listDir("/proc/self/fd").size(); }

TEST(CheckpointManifest, AFailedWriteLeavesNoDescriptorOrTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("latest");
  ds::test::writeText(path, "previous");
  const size_t before = openDescriptors();
  // The tap's callback throws: its exception passes through, the temporary
  // file and its descriptor go.
  ds::plan::WriteTap throwing;
  throwing.written = [](std::string_view) {
    throw std::logic_error("the tap gave up");
  };
  try {
    ds::plan::writeFileAtomic(path, "0123456789", throwing);
    ADD_FAILURE() << "expected the tap's exception";
  } catch (const std::logic_error &error) {
    EXPECT_EQ(std::string(error.what()), "the tap gave up");
  }
  EXPECT_EQ(openDescriptors(), before);
  EXPECT_EQ(ds::test::listDir(dir.path()), std::vector<std::string>{"latest"});
  // A simulated failure is final, whatever its errno (EINTR would
  // otherwise be retried forever: on a thread, so that a loop fails the
  // test instead of hanging it).
  auto interrupted = std::make_shared<std::promise<std::string>>();
  std::future<std::string> outcome = interrupted->get_future();
  std::thread([interrupted, path] {
    ds::plan::WriteTap tap;
    tap.failAfter = 4;
    tap.failErrno = EINTR;
    try {
      ds::plan::writeFileAtomic(path, "0123456789", tap);
      interrupted->set_value("no error");
    } catch (const std::runtime_error &error) {
      interrupted->set_value(error.what());
    }
  }).detach();
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)),
            std::future_status::ready)
      << "writeFileAtomic retries a simulated EINTR forever";
  EXPECT_EQ(outcome.get(),
            "cannot write " + path + ": write failed: Interrupted system call");
  ds::plan::WriteTap full;
  full.failAfter = 0;
  EXPECT_THROW(ds::plan::writeFileAtomic(path, "0123456789", full),
               std::runtime_error);
  EXPECT_EQ(openDescriptors(), before);
  EXPECT_EQ(ds::test::listDir(dir.path()), std::vector<std::string>{"latest"});
  EXPECT_EQ(ds::test::readText(path), "previous");
  // And a write that succeeds leaves no descriptor either.
  ds::plan::writeFileAtomic(path, "next");
  EXPECT_EQ(openDescriptors(), before);
  EXPECT_EQ(ds::test::readText(path), "next");
}

TEST(CheckpointRanks, EveryRankGetsEveryTextAndTheFirstError) {
  ds::test::ThreadGroup group(3);
  std::vector<std::vector<std::string>> texts(3);
  std::vector<std::string> errors(3), none(3, "x");
  group.run([&](int64_t rank) {
    auto communicator = group.member(rank);
    texts[size_t(rank)] = gatherText(
        communicator.get(),
        rank == 1 ? "" : std::string(size_t(rank) + 2, 'a' + char(rank)));
    errors[size_t(rank)] =
        firstError(communicator.get(), rank == 2 ? "disk full" : "");
    none[size_t(rank)] = firstError(communicator.get(), "");
  });
  for (int64_t rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(texts[size_t(rank)],
              (std::vector<std::string>{"aa", "", "cccc"}));
    EXPECT_EQ(errors[size_t(rank)],
              rank == 2 ? "disk full" : "on rank 2: disk full");
    EXPECT_EQ(none[size_t(rank)], "");
  }
  EXPECT_EQ(gatherText(nullptr, "alone"), std::vector<std::string>{"alone"});
}

} // namespace

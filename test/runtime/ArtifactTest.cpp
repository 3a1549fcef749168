// The writer and the loader/verifier together: a small artifact with weights
// loads and runs correctly; every truncation, every single-bit flip, zeroed
// ranges, a wrong identifier/version/trailer and semantically wrong tables
// are refused with a status, never a crash.
#include "TestUtil.h"
#include "modelc/model.h"
#include "modelc/version.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

using namespace mc;
using namespace mc::test;
using rt::Model;
using rt::Session;
using rt::Status;

namespace {

Status load(const std::vector<uint8_t> &b,
            std::unique_ptr<Model> *m = nullptr) {
  std::unique_ptr<Model> local;
  return Model::loadMemory(b.data(), b.size(), "t.mcpk", m ? m : &local);
}

/// Runs the mlp artifact on mlpInput() and checks it against the reference.
void expectMlpRuns(const Model &model) {
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(model, &s));
  std::vector<float> x = mlpInput();
  ASSERT_TRUE(
      s->setInput(0, rt::DType::F32, {kBatch, kIn}, x.data(), x.size() * 4));
  MlpResult ref = mlpReference(x);
  for (int run = 0; run < 2; ++run) { // inputs stay set across runs
    Status st = s->run();
    ASSERT_TRUE(st) << st.message();
    const void *p;
    size_t n;
    ASSERT_TRUE(s->output(0, &p, &n));
    EXPECT_EQ(n, ref.probs.size() * 4);
    EXPECT_LT(relError(static_cast<const float *>(p), ref.probs), 1e-5);
    ASSERT_TRUE(s->output(1, &p, &n));
    EXPECT_LT(relError(static_cast<const float *>(p), ref.mean), 1e-5);
    ASSERT_TRUE(s->output(2, &p, &n));
    EXPECT_FLOAT_EQ(*static_cast<const float *>(p), ref.max);
  }
}

codegen::Plan plannedMlp() {
  codegen::Plan p = mlpPlan();
  EXPECT_TRUE(codegen::planMemory(p));
  return p;
}

void expectRefused(const codegen::Plan &plan, const std::string &what) {
  Status st = load(writeUnchecked(plan));
  ASSERT_FALSE(st) << "expected: " << what;
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  EXPECT_EQ(st.message().rfind("t.mcpk: ", 0), 0u) << st.message();
}

} // namespace

TEST(Artifact, LayoutMatchesTheSpec) {
  std::vector<uint8_t> b = mlpArtifact();
  ASSERT_FALSE(b.empty());
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
               uint32_t(b[3]) << 24;
  EXPECT_EQ(std::string(b.begin() + 8, b.begin() + 12), "MCPK");
  EXPECT_EQ(std::string(b.end() - 8, b.end() - 1), "MCPKEND");
  const fb::Model *m = fb::GetSizePrefixedModel(b.data());
  EXPECT_EQ(m->schema_version_major(), 2u);
  EXPECT_EQ(m->schema_version_minor(), rt::kSchemaVersionMinor);
  EXPECT_EQ(m->producer()->str(), "modelc");
  EXPECT_EQ(m->data_offset() % 64, 0u);
  EXPECT_GE(m->data_offset(), 4u + n);
  EXPECT_EQ(m->data_size(), 512u + 64u); // w (512 B), b (64 B) at offset 512
  for (const fb::Buffer *buf : *m->buffers())
    EXPECT_EQ(buf->offset() % 64, 0u);
  std::unique_ptr<Model> model;
  ASSERT_TRUE(load(b, &model));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(model->constantData()) % 64, 0u);
}

TEST(Artifact, LoadsAndRunsCorrectly) {
  std::unique_ptr<Model> model;
  Status st = load(mlpArtifact(), &model);
  ASSERT_TRUE(st) << st.message();
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->outputs()[2].shape, rt::Shape{});
  expectMlpRuns(*model);
}

TEST(Artifact, WriteFileIsAtomicAndLoads) {
  char dir[] = "/tmp/modelc-artifact-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/m.mcpk";
  ASSERT_TRUE(codegen::writeArtifact(plannedMlp(), path));
  std::unique_ptr<Model> model;
  Status st = Model::loadFile(path, &model);
  ASSERT_TRUE(st) << st.message();
  expectMlpRuns(*model);
  // Only the artifact is left: no temporary file.
  int entries = 0;
  DIR *d = opendir(dir);
  while (dirent *e = readdir(d))
    entries += e->d_name[0] != '.';
  closedir(d);
  EXPECT_EQ(entries, 1);
  // A plan the runtime would reject is not published.
  codegen::Plan bad = plannedMlp();
  bad.steps[0].inputs = {0, 99};
  std::string badPath = std::string(dir) + "/bad.mcpk";
  st = codegen::writeArtifact(bad, badPath);
  EXPECT_NE(st.message().find("refers to buffer 99"), std::string::npos)
      << st.message();
  EXPECT_NE(access(badPath.c_str(), F_OK), 0);
  st = Model::loadFile(std::string(dir) + "/missing.mcpk", &model);
  EXPECT_NE(st.message().find("missing.mcpk: cannot open"), std::string::npos);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(Artifact, EveryTruncationIsRefused) {
  std::vector<uint8_t> b = mlpArtifact();
  for (size_t len = 0; len < b.size(); ++len) {
    std::vector<uint8_t> t(b.begin(), b.begin() + len);
    ASSERT_FALSE(load(t)) << "length " << len;
  }
}

TEST(Artifact, EverySingleBitFlipIsRefused) {
  std::vector<uint8_t> b = mlpArtifact();
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < b.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      b[i] ^= uint8_t(1 << bit);
      ASSERT_FALSE(load(b)) << "byte " << i << " bit " << bit;
      b[i] ^= uint8_t(1 << bit);
    }
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(s, 5.0 * kSanitizerSlowdown); // the sweep is a few hundred ms
}

TEST(Artifact, ZeroedRangesAreRefused) {
  std::vector<uint8_t> b = mlpArtifact();
  for (size_t width : {1, 4, 16, 64})
    for (size_t i = 0; i + width <= b.size(); i += width / 2 + 1) {
      std::vector<uint8_t> z = b;
      std::fill(z.begin() + i, z.begin() + i + width, 0);
      if (z == b)
        continue; // already zero (padding): nothing changed
      ASSERT_FALSE(load(z)) << "zeroed [" << i << ", +" << width << ")";
    }
}

TEST(Artifact, WrongIdentifierVersionAndTrailer) {
  std::vector<uint8_t> b = mlpArtifact();
  std::vector<uint8_t> id = b;
  std::memcpy(&id[8], "ONNX", 4);
  Status st = load(id);
  EXPECT_NE(
      st.message().find(
          "not a modelc artifact: file identifier is 'ONNX', expected 'MCPK'"),
      std::string::npos)
      << st.message();

  // A well-formed file (correct checksums) from a future major version.
  codegen::WriteOptions o;
  o.schemaVersionMajorForTesting = 3;
  std::vector<uint8_t> v2;
  ASSERT_TRUE(codegen::writeArtifactToBytes(plannedMlp(), &v2, o));
  st = load(v2);
  EXPECT_NE(st.message().find("schema version 3." + std::to_string(rt::kSchemaVersionMinor) +
                              " is not supported: this "
                              "runtime reads major version 2"),
            std::string::npos)
      << st.message();

  std::vector<uint8_t> tr = b;
  tr[tr.size() - 3] = 'X';
  st = load(tr);
  EXPECT_NE(st.message().find("trailer magic"), std::string::npos)
      << st.message();
  std::vector<uint8_t> crc = b;
  crc[crc.size() - 16] ^= 1;
  st = load(crc);
  EXPECT_NE(st.message().find("table checksum mismatch"), std::string::npos)
      << st.message();
  std::vector<uint8_t> data = b;
  data[fb::GetSizePrefixedModel(b.data())->data_offset() + 5] ^= 0x10;
  st = load(data);
  EXPECT_NE(st.message().find("data section checksum mismatch"),
            std::string::npos)
      << st.message();
  st = load(std::vector<uint8_t>(10, 0));
  EXPECT_NE(st.message().find("too small"), std::string::npos) << st.message();
}

TEST(Artifact, SemanticErrorsNameStepBufferAndExpectation) {
  codegen::Plan p = plannedMlp();
  p.steps[2].inputs = {3, 42};
  expectRefused(p, "step 2 (mc.add at mlp.py:3): input 1 refers to buffer 42");

  p = plannedMlp();
  p.buffers[1].shape = {9, 16}; // w: K no longer matches x
  p.buffers[1].data = std::vector<uint8_t>(9 * 16 * 4);
  expectRefused(p, "step 0 (mc.matmul at mlp.py:1)");

  p = plannedMlp();
  setBool(p.steps[0], "transpose_b", true);
  expectRefused(p, "contracting dimensions differ");

  p = plannedMlp();
  setInts(p.steps[1], "dims", {0});
  expectRefused(p, "cannot broadcast to result dimension 0");

  p = plannedMlp();
  setInt(p.steps[4], "axis", 2);
  expectRefused(p, "step 4 (mc.softmax at mlp.py:5): axis 2 is out of range");

  p = plannedMlp();
  setInts(p.steps[5], "dims", {1, 0});
  expectRefused(p, "must be sorted, unique");

  p = plannedMlp();
  setBool(p.steps[5], "keepdim", false);
  expectRefused(p, "expected shape [4]");

  p = plannedMlp();
  p.steps[3].op = rt::OpId::Transpose;
  setInts(p.steps[3], "permutation", {1, 1});
  expectRefused(p, "is not a permutation");

  p = plannedMlp();
  p.steps[3].op = rt::OpId::Constant; // in the registry, but not a step
  expectRefused(p, "step 3 (mc.constant at mlp.py:4): unknown op 'constant'");

  { // An op name no registry knows, forged into the table.
    std::vector<uint8_t> b = writeUnchecked(plannedMlp());
    uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
                 uint32_t(b[3]) << 24;
    auto it = std::search(b.begin(), b.begin() + 4 + n, std::begin("relu"),
                          std::end("relu") - 1);
    ASSERT_NE(it, b.begin() + 4 + n);
    it[3] = 'x';
    fixTableCrc(b);
    Status st = load(b);
    EXPECT_NE(st.message().find("step 3 (mc.relx at mlp.py:4): unknown op "
                                "'relx'"),
              std::string::npos)
        << st.message();
  }

  p = plannedMlp();
  p.steps[2].outputs = {1};
  expectRefused(p, "is a Constant buffer; step outputs must be Arena");

  p = plannedMlp();
  p.arenaSize = 64;
  expectRefused(p, "exceed the arena_size 64");

  p = plannedMlp();
  p.buffers[3].offset += 32;
  expectRefused(p, "is not 64-byte aligned");

  p = plannedMlp();
  p.buffers[5].dtype = rt::DType::I32; // h2, the result of the add
  expectRefused(p, "must have the dtype and shape of input 0");

  p = plannedMlp();
  p.inputs[0].buffer = 1; // a constant as an input
  expectRefused(p, "inputs and outputs must be Arena buffers");

  p = plannedMlp();
  p.outputs[1].name = "probs";
  expectRefused(p, "name is used by output 0 too");

  p = plannedMlp();
  p.buffers[5].offset = p.buffers[3].offset + 64; // h2 partly overlaps h
  p.arenaSize += 1024;
  expectRefused(p, "overlaps input");

  p = plannedMlp();
  p.buffers[3].shape = {4, 1, 1, 1, 1, 1, 1, 1, 16};
  expectRefused(p, "rank 9 exceeds the maximum 8");
}

TEST(Artifact, TableFuzzWithFixedChecksumNeverCrashes) {
  // Flip bits in the table and repair the checksum, so the flatbuffers
  // Verifier and the semantic checks see the damage. Whatever still loads
  // must run without touching memory outside its buffers.
  std::vector<uint8_t> b = mlpArtifact();
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
               uint32_t(b[3]) << 24;
  int loaded = 0;
  for (size_t i = 4; i < 4 + n; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> m = b;
      m[i] ^= uint8_t(1 << bit);
      fixTableCrc(m);
      std::unique_ptr<Model> model;
      if (!load(m, &model))
        continue;
      ++loaded;
      if (model->table().arena_size() > (1u << 20))
        continue;
      std::unique_ptr<Session> s;
      Status created = Session::create(*model, &s);
      ASSERT_TRUE(created) << created.message();
      for (size_t k = 0; k < model->inputs().size(); ++k) {
        const rt::TensorInfo &info = model->inputs()[k];
        std::vector<uint8_t> zeros(info.byteSize);
        ASSERT_TRUE(
            s->setInput(k, info.dtype, info.shape, zeros.data(), zeros.size()));
      }
      (void)s->run(); // may fail (e.g. integer division by zero), not crash
    }
  // Some flips are harmless (names, locations), so some must load.
  EXPECT_GT(loaded, 0);
}

TEST(Artifact, RandomTableMutationsWithFixedChecksumNeverCrash) {
  // Several random bytes at once, so a damaged field can reach the semantic
  // checks together with others.
  std::vector<uint8_t> b = mlpArtifact();
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8;
  std::mt19937 rng(7);
  int accepted = 0, ran = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> m = b;
    for (int k = 0, count = 1 + iter % 4; k < count; ++k)
      m[4 + rng() % n] = uint8_t(rng());
    fixTableCrc(m);
    std::unique_ptr<Model> model;
    if (!load(m, &model) || model->table().arena_size() > (1u << 20))
      continue;
    ++accepted;
    std::unique_ptr<Session> s;
    Status created = Session::create(*model, &s);
    ASSERT_TRUE(created) << created.message();
    for (size_t k = 0; k < model->inputs().size(); ++k) {
      const rt::TensorInfo &info = model->inputs()[k];
      std::vector<uint8_t> zeros(info.byteSize);
      ASSERT_TRUE(
          s->setInput(k, info.dtype, info.shape, zeros.data(), zeros.size()));
    }
    ran += s->run() ? 1 : 0;
  }
  // The test means something only if mutants reach the session and run:
  // mutations of names, locations, unused bytes and some values keep the
  // file valid (241 of the 4000 here, 6%). If the verifier refused them
  // all, the crash-freedom above would be vacuous.
  EXPECT_GT(accepted, 100) << "mutants accepted: " << accepted;
  EXPECT_GT(ran, 50) << "accepted mutants that ran: " << ran;
}

// modelc-run as a subprocess: a run writes correct .npy outputs, --inspect
// and --compare report, and every bad input (corrupted artifact, wrong
// shape, unknown or missing input, unreadable npy) exits 1 with a message,
// never by a signal.
#include "TestUtil.h"
#include "modelc/npy.h"

#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace mc;
using namespace mc::test;

namespace {

using Result = ProcessResult;

class Cli : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/modelc-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    model = dir + "/mlp.mcpk";
    codegen::Plan p = mlpPlan();
    ASSERT_TRUE(codegen::planMemory(p));
    ASSERT_TRUE(codegen::writeArtifact(p, model));
    x = mlpInput();
    ASSERT_TRUE(
        rt::writeNpy(dir + "/x.npy", rt::DType::F32, {kBatch, kIn}, x.data()));
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), MODELC_RUN_PATH);
    return runProcess(std::move(args), dir);
  }

  /// Exit code 1 (not a signal) and a "modelc-run: error: ..." message
  /// containing `what`.
  void expectError(const Result &r, const std::string &what) {
    ASSERT_TRUE(r.exited()) << "killed by signal " << WTERMSIG(r.status);
    EXPECT_EQ(r.code(), 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("modelc-run: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }

  std::string dir, model;
  std::vector<float> x;
};

} // namespace

TEST_F(Cli, RunWritesOutputs) {
  Result r = run(
      {model, "--input", "x=" + dir + "/x.npy", "--output-dir", dir + "/out"});
  ASSERT_TRUE(r.exited());
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("probs f32[4, 16] -> " + dir + "/out/probs.npy"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("max f32[] -> "), std::string::npos) << r.out;
  rt::NpyArray probs;
  ASSERT_TRUE(rt::readNpy(dir + "/out/probs.npy", &probs));
  EXPECT_LT(relError(reinterpret_cast<const float *>(probs.data.data()),
                     mlpReference(x).probs),
            1e-5);
  // compare: identical -> 0; against another output -> 1.
  r = run({"--compare", dir + "/out/probs.npy", dir + "/out/probs.npy"});
  EXPECT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("rel_err 0.000e+00"), std::string::npos) << r.out;
  std::vector<float> other(probs.data.size() / 4, 0.5f);
  ASSERT_TRUE(rt::writeNpy(dir + "/other.npy", rt::DType::F32, probs.shape,
                           other.data()));
  r = run({"--compare", dir + "/out/probs.npy", dir + "/other.npy", "--rtol",
           "1e-3"});
  expectError(r, "exceeds rtol");
  r = run({"--compare", dir + "/out/probs.npy", dir + "/x.npy"});
  expectError(r, "is f32[4, 16] but");
}

TEST_F(Cli, Bench) {
  Result r = run({model, "--input", "x=" + dir + "/x.npy", "--bench", "20"});
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("bench: 20 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median"), std::string::npos);
  EXPECT_NE(r.out.find("p90"), std::string::npos);
}

TEST_F(Cli, Inspect) {
  Result r = run({"--inspect", model});
  ASSERT_EQ(r.code(), 0) << r.err;
  for (const char *s :
       {"producer:   modelc", "schema:     2.1", "entry:      mlp",
        "targets:    cpu", "f32[4, 8]", "steps:      7 (", "matmul 1",
        "weights:    576 bytes in 2 constant buffers"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST_F(Cli, CorruptedArtifactExitsOneWithoutSignal) {
  std::string bytes = slurp(model);
  for (size_t at : {size_t(20), bytes.size() / 2, bytes.size() - 10}) {
    std::string bad = bytes;
    bad[at] ^= 0x5a;
    std::ofstream(dir + "/bad.mcpk", std::ios::binary) << bad;
    expectError(run({dir + "/bad.mcpk", "--input", "x=" + dir + "/x.npy"}),
                "bad.mcpk");
    expectError(run({"--inspect", dir + "/bad.mcpk"}), "bad.mcpk");
  }
  std::ofstream(dir + "/short.mcpk", std::ios::binary) << bytes.substr(0, 100);
  expectError(run({dir + "/short.mcpk"}), "short.mcpk");
}

TEST_F(Cli, BadInputsNameTheInput) {
  std::vector<float> wrong(4 * 9);
  ASSERT_TRUE(
      rt::writeNpy(dir + "/w.npy", rt::DType::F32, {4, 9}, wrong.data()));
  expectError(run({model, "--input", "x=" + dir + "/w.npy"}),
              "input 'x': expected f32[4, 8], got f32[4, 9] from " + dir +
                  "/w.npy");
  std::vector<int32_t> ints(32);
  ASSERT_TRUE(
      rt::writeNpy(dir + "/i.npy", rt::DType::I32, {4, 8}, ints.data()));
  expectError(run({model, "--input", "x=" + dir + "/i.npy"}),
              "input 'x': expected f32[4, 8], got i32[4, 8]");
  expectError(run({model, "--input", "y=" + dir + "/x.npy"}),
              "no input named 'y' (known: 'x')");
  expectError(run({model}), "input 'x' (f32[4, 8]) is not given");
  expectError(run({model, "--input", "x=" + dir + "/missing.npy"}),
              "input 'x': " + dir + "/missing.npy: cannot open");
  std::ofstream(dir + "/junk.npy") << "junk";
  expectError(run({model, "--input", "x=" + dir + "/junk.npy"}),
              "not a .npy file");
  expectError(run({model, "--bogus"}), "unknown option '--bogus'");
  expectError(run({model, "--bench", "zero"}),
              "--bench needs a positive count");
  Result r = run({"--help"});
  EXPECT_EQ(r.code(), 0);
  EXPECT_NE(r.out.find("usage: modelc-run"), std::string::npos);
}

TEST_F(Cli, OutputNamesCannotEscapeTheDirectory) {
  codegen::Plan p = mlpPlan();
  p.outputs[0].name = "../../evil";
  p.outputs[1].name = "..";
  ASSERT_TRUE(codegen::planMemory(p));
  ASSERT_TRUE(codegen::writeArtifact(p, dir + "/evil.mcpk"));
  Result r = run(
      {dir + "/evil.mcpk", "-i", "x=" + dir + "/x.npy", "-o", dir + "/out"});
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_EQ(access((dir + "/out/_.._.._evil.npy").c_str(), F_OK), 0) << r.out;
  EXPECT_EQ(access((dir + "/out/_...npy").c_str(), F_OK), 0) << r.out;
  EXPECT_NE(access((dir + "/evil.npy").c_str(), F_OK), 0);
}

// modelc-run as a subprocess: a run writes correct .npy outputs, --inspect
// and --compare report, and every bad input (corrupted artifact, wrong
// shape, unknown or missing input, unreadable npy) exits 1 with a message,
// never by a signal.
#include "TestUtil.h"
#include "modelc/npy.h"

#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <numeric>
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
       {"producer:   modelc", "schema:     2.7", "entry:      mlp",
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

// A dynamic batch: --inspect shows the batch dim as "?" and the bounds; a
// run takes inputs of any batch within them and writes outputs at it;
// --bench --batch times a given size (default opt), and refuses a size
// outside the bounds, or other than a static artifact's own.
TEST_F(Cli, DynamicBatch) {
  codegen::Plan p = batchMlpPlan(0, true);
  ASSERT_TRUE(codegen::planMemory(p));
  std::string dyn = dir + "/dyn.mcpk";
  ASSERT_TRUE(codegen::writeArtifact(p, dyn));
  Result r = run({"--inspect", dyn});
  ASSERT_EQ(r.code(), 0) << r.err;
  for (const char *s : {"batch:      1..64 (opt 32)\n", "x  ", "f32[?, 8]\n",
                        "f32[?, 16]\n", "colmean", "f32[16]\n"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  r = run({"--inspect", model});
  EXPECT_EQ(r.out.find("batch:"), std::string::npos) << r.out; // static

  // An f32 .npy of `shape` in the test's directory (values in [-1, 1]).
  auto npy = [&](const std::string &name, rt::Shape shape) {
    std::string path = dir + "/" + name + ".npy";
    std::vector<float> v = randomFloats(size_t(rt::numElements(shape)), 3);
    EXPECT_TRUE(rt::writeNpy(path, rt::DType::F32, shape, v.data()));
    return path;
  };
  std::string x7 = npy("x7", {7, kDIn}), y7 = npy("y7", {7, kDHidden});
  std::vector<std::string> args{dyn, "-i", "x=" + x7, "-i", "y=" + y7};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = args;
    a.insert(a.end(), more.begin(), more.end());
    return run(a);
  };
  r = with({"-o", dir + "/out"});
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("probs f32[7, 16] -> "), std::string::npos) << r.out;
  rt::NpyArray probs;
  ASSERT_TRUE(rt::readNpy(dir + "/out/probs.npy", &probs));
  EXPECT_EQ(probs.shape, (rt::Shape{7, kDHidden}));
  const float *pr = reinterpret_cast<const float *>(probs.data.data());
  for (int i = 0; i < 7; ++i) // the 7 rows of a softmax, not 7 of 64
    EXPECT_NEAR(
        std::accumulate(pr + i * kDHidden, pr + (i + 1) * kDHidden, 0.0), 1.0,
        1e-5)
        << "row " << i;

  r = with({"--bench", "5", "--batch", "64"});
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("bench: 5 runs at batch 64 after"), std::string::npos)
      << r.out;
  r = with({"--bench", "5"});
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.out.find("bench: 5 runs at batch 32 after"), std::string::npos)
      << r.out;
  expectError(with({"--bench", "5", "--batch", "65"}),
              "--batch 65 is outside the artifact's batch bounds [1, 64]");
  expectError(with({"--batch", "8"}), "--batch sets the batch size --bench "
                                      "times; pass --bench N too");

  // Inputs outside the bounds, or disagreeing, name the input and the file.
  expectError(
      run({dyn, "-i", "x=" + x7, "-i", "y=" + npy("y8", {8, kDHidden})}),
      "inputs 'x' (batch 7) and 'y' (batch 8) disagree on the batch "
      "size");
  std::string x65 = npy("x65", {65, kDIn});
  expectError(run({dyn, "-i", "x=" + x65, "-i", "y=" + y7}),
              "input 'x': dimension 0 is the batch, which must be in [1, 64]; "
              "got 65 from " +
                  x65);

  // A static artifact times only its own batch.
  std::vector<std::string> mlp{model,     "-i", "x=" + dir + "/x.npy",
                               "--bench", "3",  "--batch"};
  mlp.push_back("4");
  r = run(mlp);
  EXPECT_EQ(r.code(), 0) << r.err;
  mlp.back() = "8";
  expectError(run(mlp), "--batch 8: the artifact was compiled for batch 4 "
                        "(input 'x' is f32[4, 8]) and has no dynamic batch");
}

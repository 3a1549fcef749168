// The C API: signature queries, and the messages for wrong dtype/shape/byte
// size, a missing input and an unknown name.
#include "TestUtil.h"
#include "modelc/runtime.h"

#include <gtest/gtest.h>
#include <string>

using namespace mc::test;

namespace {

/// The status message (then frees the status); "" on success.
std::string msg(mc_status_t s) {
  std::string m = s ? mc_status_message(s) : "";
  mc_status_free(s);
  return m;
}

class CApi : public ::testing::Test {
protected:
  void SetUp() override {
    std::vector<uint8_t> b = mlpArtifact();
    ASSERT_EQ(msg(mc_model_load_memory(b.data(), b.size(), "mlp.mcpk", &model)),
              "");
    ASSERT_EQ(msg(mc_session_create(model, &session)), "");
  }
  void TearDown() override {
    mc_session_free(session);
    mc_model_free(model);
  }
  mc_model_t *model = nullptr;
  mc_session_t *session = nullptr;
  std::vector<float> x = mlpInput();
  int64_t dims[2] = {kBatch, kIn};
};

} // namespace

TEST_F(CApi, SignatureAndRun) {
  ASSERT_EQ(mc_model_num_inputs(model), 1u);
  ASSERT_EQ(mc_model_num_outputs(model), 3u);
  mc_tensor_info_t info;
  ASSERT_EQ(msg(mc_model_input_info(model, 0, &info)), "");
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, MC_DTYPE_F32);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[1], kIn);
  EXPECT_EQ(info.byte_size, size_t(kBatch * kIn * 4));
  size_t index = 9;
  ASSERT_EQ(msg(mc_model_find_output(model, "mean", &index)), "");
  EXPECT_EQ(index, 1u);
  EXPECT_NE(msg(mc_model_output_info(model, 3, &info)).find("out of range"),
            std::string::npos);

  ASSERT_EQ(msg(mc_session_set_input(session, 0, MC_DTYPE_F32, 2, dims,
                                     x.data(), x.size() * 4)),
            "");
  ASSERT_EQ(msg(mc_session_run(session)), "");
  const void *data;
  size_t bytes;
  ASSERT_EQ(msg(mc_session_output(session, 0, &data, &bytes)), "");
  EXPECT_LT(relError(static_cast<const float *>(data), mlpReference(x).probs),
            1e-5);
}

TEST_F(CApi, WrongDTypeShapeAndByteSize) {
  std::string m = msg(mc_session_set_input(session, 0, MC_DTYPE_I32, 2, dims,
                                           x.data(), x.size() * 4));
  EXPECT_EQ(m, "input 'x': expected f32[4, 8], got i32[4, 8]");
  int64_t wrong[2] = {4, 9};
  m = msg(
      mc_session_set_input(session, 0, MC_DTYPE_F32, 2, wrong, x.data(), 144));
  EXPECT_EQ(m, "input 'x': expected f32[4, 8], got f32[4, 9]");
  m = msg(
      mc_session_set_input(session, 0, MC_DTYPE_F32, 1, dims, x.data(), 128));
  EXPECT_EQ(m, "input 'x': expected f32[4, 8], got f32[4]");
  m = msg(
      mc_session_set_input(session, 0, MC_DTYPE_F32, 2, dims, x.data(), 100));
  EXPECT_EQ(m, "input 'x': expected 128 bytes for f32[4, 8], got 100");
  m = msg(
      mc_session_set_input(session, 0, MC_DTYPE_F32, 99, dims, x.data(), 128));
  EXPECT_NE(m.find("rank 99 is invalid"), std::string::npos) << m;
  m = msg(
      mc_session_set_input(session, 3, MC_DTYPE_F32, 2, dims, x.data(), 128));
  EXPECT_NE(m.find("input index 3 is out of range"), std::string::npos) << m;
}

TEST_F(CApi, RunWithMissingInputNamesIt) {
  std::string m = msg(mc_session_run(session));
  EXPECT_EQ(m, "input 'x' was never set (expected f32[4, 8])");
}

TEST_F(CApi, FindInputOfUnknownNameListsKnownOnes) {
  size_t index;
  std::string m = msg(mc_model_find_input(model, "nope", &index));
  EXPECT_EQ(m, "mlp.mcpk: no input named 'nope' (known: 'x')");
}

TEST(CApiLoad, BadFilesAndNullArguments) {
  mc_model_t *model = reinterpret_cast<mc_model_t *>(1);
  std::string m = msg(mc_model_load_file("/nonexistent.mcpk", &model));
  EXPECT_NE(m.find("/nonexistent.mcpk: cannot open"), std::string::npos) << m;
  EXPECT_EQ(model, nullptr);
  const char junk[] = "this is not an artifact, just some text";
  m = msg(mc_model_load_memory(junk, sizeof junk, "junk.bin", &model));
  EXPECT_NE(m.find("junk.bin: not a modelc artifact"), std::string::npos) << m;
  EXPECT_NE(msg(mc_model_load_file(nullptr, &model)), "");
  EXPECT_NE(msg(mc_session_run(nullptr)), "");
  EXPECT_EQ(mc_model_num_inputs(nullptr), 0u);
}

// A dynamic batch through the C API: the bounds, -1 at the batch dims of
// the model's info, and an output's concrete shape after a run at batch 7.
TEST(CApiDynamicBatch, BoundsAndOutputShapeOfARun) {
  mc::codegen::Plan p = batchMlpPlan(0, true);
  ASSERT_TRUE(mc::codegen::planMemory(p));
  std::vector<uint8_t> b;
  ASSERT_TRUE(mc::codegen::writeArtifactToBytes(p, &b));
  mc_model_t *model = nullptr;
  ASSERT_EQ(msg(mc_model_load_memory(b.data(), b.size(), "dyn.mcpk", &model)),
            "");
  int64_t lo = 0, hi = 0, opt = 0;
  EXPECT_EQ(mc_model_batch_bounds(model, &lo, &hi, &opt), 1);
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 64);
  EXPECT_EQ(opt, 32);
  mc_tensor_info_t info;
  ASSERT_EQ(msg(mc_model_input_info(model, 0, &info)), "");
  EXPECT_EQ(info.dims[0], -1);
  EXPECT_EQ(info.dims[1], kDIn);
  EXPECT_EQ(info.byte_size, size_t(64 * kDIn * 4)); // at max
  ASSERT_EQ(msg(mc_model_output_info(model, 1, &info)), "");
  EXPECT_EQ(info.dims[0], kDHidden); // colmean: reduced over the batch

  mc_session_t *session = nullptr;
  ASSERT_EQ(msg(mc_session_create(model, &session)), "");
  std::vector<float> x = randomFloats(7 * kDIn, 1), y(7 * kDHidden, 0.f);
  int64_t xd[2] = {7, kDIn}, yd[2] = {7, kDHidden};
  ASSERT_EQ(msg(mc_session_set_input(session, 0, MC_DTYPE_F32, 2, xd, x.data(),
                                     x.size() * 4)),
            "");
  ASSERT_EQ(msg(mc_session_set_input(session, 1, MC_DTYPE_F32, 2, yd, y.data(),
                                     y.size() * 4)),
            "");
  ASSERT_EQ(msg(mc_session_run(session)), "");
  ASSERT_EQ(msg(mc_session_output_info(session, 0, &info)), "");
  EXPECT_STREQ(info.name, "probs");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[0], 7);
  EXPECT_EQ(info.dims[1], kDHidden);
  EXPECT_EQ(info.byte_size, size_t(7 * kDHidden * 4));
  std::vector<float> probs(7 * kDHidden);
  ASSERT_EQ(
      msg(mc_session_copy_output(session, 0, probs.data(), info.byte_size)),
      "");
  for (int i = 0; i < 7; ++i) { // softmax rows sum to 1
    float sum = 0;
    for (int j = 0; j < kDHidden; ++j)
      sum += probs[i * kDHidden + j];
    EXPECT_NEAR(sum, 1.f, 1e-5f) << "row " << i;
  }
  int64_t big[2] = {65, kDIn};
  EXPECT_EQ(msg(mc_session_set_input(session, 0, MC_DTYPE_F32, 2, big, x.data(),
                                     65 * kDIn * 4)),
            "input 'x': dimension 0 is the batch, which must be in [1, 64]; "
            "got 65");
  EXPECT_NE(msg(mc_session_output_info(session, 3, &info)).find("out of range"),
            std::string::npos);
  mc_session_free(session);
  mc_model_free(model);
}

TEST_F(CApi, StaticModelHasNoBatchBounds) {
  int64_t lo = 5, hi = 5, opt = 5;
  EXPECT_EQ(mc_model_batch_bounds(model, &lo, &hi, &opt), 0);
  EXPECT_EQ(lo + hi + opt, 0);
  EXPECT_EQ(mc_model_batch_bounds(nullptr, nullptr, nullptr, nullptr), 0);
  mc_tensor_info_t info;
  ASSERT_EQ(msg(mc_session_output_info(session, 0, &info)), "");
  EXPECT_EQ(info.dims[0], kBatch); // the signature's, run or not
  EXPECT_EQ(info.byte_size, size_t(kBatch * kHidden * 4));
}

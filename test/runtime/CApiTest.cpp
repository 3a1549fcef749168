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

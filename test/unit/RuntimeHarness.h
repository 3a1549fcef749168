// Test helper: run a compiled artifact through the runtime's C API (as a
// deployment would) and get its outputs back as frontend tensors. Any C API
// error becomes a test failure that quotes the runtime's message.
#ifndef MODELC_TEST_UNIT_RUNTIMEHARNESS_H
#define MODELC_TEST_UNIT_RUNTIMEHARNESS_H

#include "frontend/Tensor.h"
#include "modelc/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mc::test {

/// The status's message ("" for success); frees the status.
inline std::string take(mc_status_t s) {
  if (!s)
    return "";
  std::string m = mc_status_message(s);
  mc_status_free(s);
  return m;
}

/// Runs `artifact` on `inputs` (signature order); returns (name, output) in
/// signature order.
inline std::vector<std::pair<std::string, Tensor>>
runArtifactNamed(const std::vector<uint8_t>& artifact,
                 const std::vector<Tensor>& inputs) {
  std::vector<std::pair<std::string, Tensor>> outs;
  mc_model_t* model = nullptr;
  EXPECT_EQ(take(mc_model_load_memory(artifact.data(), artifact.size(),
                                      "test artifact", &model)),
            "");
  if (!model)
    return outs;
  mc_session_t* session = nullptr;
  EXPECT_EQ(take(mc_session_create(model, &session)), "");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    EXPECT_EQ(take(mc_session_set_input(
                  session, i, static_cast<mc_dtype_t>(t.dtype()),
                  static_cast<int32_t>(t.rank()), t.shape().data(),
                  t.rawData(), t.byteSize())),
              "");
  }
  EXPECT_EQ(take(mc_session_run(session)), "");
  for (size_t i = 0; i < mc_model_num_outputs(model); ++i) {
    // The session's shape: a dynamic batch's is the run's.
    mc_tensor_info_t info;
    EXPECT_EQ(take(mc_session_output_info(session, i, &info)), "");
    Tensor t = Tensor::empty(Shape(info.dims, info.dims + info.rank),
                             static_cast<DType>(info.dtype));
    const void* data = nullptr;
    size_t bytes = 0;
    EXPECT_EQ(take(mc_session_output(session, i, &data, &bytes)), "");
    EXPECT_EQ(bytes, t.byteSize());
    std::memcpy(t.rawData(), data, std::min(bytes, t.byteSize()));
    outs.emplace_back(info.name, t);
  }
  mc_session_free(session);
  mc_model_free(model);
  return outs;
}

/// The outputs alone, in signature order.
inline std::vector<Tensor> runArtifact(const std::vector<uint8_t>& artifact,
                                       const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  for (auto& [name, t] : runArtifactNamed(artifact, inputs))
    outs.push_back(t);
  return outs;
}

/// The outputs by signature name.
inline std::map<std::string, Tensor>
runArtifactByName(const std::vector<uint8_t>& artifact,
                  const std::vector<Tensor>& inputs) {
  std::map<std::string, Tensor> outs;
  for (auto& [name, t] : runArtifactNamed(artifact, inputs))
    outs[name] = t;
  return outs;
}

} // namespace mc::test

#endif // MODELC_TEST_UNIT_RUNTIMEHARNESS_H

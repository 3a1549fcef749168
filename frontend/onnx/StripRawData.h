// ONNX import reads each initializer's raw data straight from the model
// file into its tensor: protobuf parses only the rest. Parsing the whole
// ModelProto held every weight in a std::string first, grown in chunks
// (protobuf reserves at most 50 MB of a long bytes field ahead), so a
// 411 MB weight briefly took up to three times its size: VGG-11's import
// peaked at 1.8x its weights.
#ifndef MODELC_FRONTEND_ONNX_STRIPRAWDATA_H
#define MODELC_FRONTEND_ONNX_STRIPRAWDATA_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::onnx_wire {

/// Where a field's bytes lie in the serialized model.
struct Span {
  uint64_t offset = 0, length = 0;
};

/// A ModelProto without its graph initializers' raw data.
struct StrippedModel {
  /// The serialized ModelProto, every field kept but the `raw_data` of the
  /// main graph's initializers (ModelProto.graph.initializer[i].raw_data),
  /// which is empty instead.
  std::string bytes;
  /// For each initializer of the main graph, in order: where its raw data
  /// lies in the original bytes (nothing when it has none).
  std::vector<std::optional<Span>> rawData;
};

/// Walks the protobuf wire format of a serialized ModelProto (DATA, SIZE
/// bytes) and leaves out the raw data of the main graph's initializers
/// without reading it (only the bytes around it are touched, so DATA can be
/// a mapped file whose weights stay on disk). Nothing when the bytes are not
/// well-formed wire format; protobuf's own parse then reports them.
std::optional<StrippedModel> stripInitializerData(const uint8_t* data,
                                                  size_t size);

} // namespace mc::onnx_wire

#endif // MODELC_FRONTEND_ONNX_STRIPRAWDATA_H

// ONNX import: traces an ONNX graph through the eager frontend's ops (so the
// mc module computes what the frontend's ops, the runtime's kernels, compute)
// without running it: graph inputs are shape-only tensors, so only shape
// rules run on them; only constant subgraphs are evaluated.
#ifndef MODELC_FRONTEND_ONNX_ONNXIMPORTER_H
#define MODELC_FRONTEND_ONNX_ONNXIMPORTER_H

#include "frontend/jit/Trace.h"

#include "modelc/checkpoint.h"

#include <functional>
#include <map>
#include <set>
#include <string>

namespace mc {

struct OnnxImportOptions {
  /// Static shapes of graph inputs, by ONNX input name. Required for an
  /// input with a dynamic (symbolic or unknown) dimension; where the model
  /// fixes a dimension, the shape given must agree with it.
  std::map<std::string, Shape> inputShapes;
  std::string functionName = "forward";
  /// A dynamic batch: the symbolic leading dim of every input (not fixed by
  /// inputShapes) becomes the function's `?` batch with these bounds (see
  /// jit::TraceOptions::dynamicBatch); each input must have one.
  std::optional<jit::DynamicBatch> batch;
  /// Told what the import changed that its user should know: DOUBLE (f64)
  /// tensors and casts, which become f32 (modelc has no f64). The driver
  /// prints it as a warning; null: nothing is said.
  std::function<void(const std::string&)> warn;
  /// For a training step (modelc compile --train): the running statistics
  /// of training-mode batch norms become module buffers the step updates
  /// as PyTorch does. Otherwise they are constants like every initializer
  /// (an inference run must not change them).
  bool trainingState = false;
  /// `modelc compile --weights`: a checkpoint whose tensors replace the
  /// initializers of the same name as they are read, before any node
  /// computes from them (a weight's Transpose, folded at import, is then
  /// the trained weight's), and the values of nodes evaluated at import
  /// whose output has a checkpoint tensor's name (an exporter's Identity
  /// of a merged initializer: `bn.running_mean` from `bn.bias`). A dtype
  /// or shape that differs throws. The names used go to `weightsUsed`.
  const rt::Checkpoint* weights = nullptr;
  std::set<std::string>* weightsUsed = nullptr;
};

/// Parses "NAME=1x3x224x224" (the argument of --input-shape) into
/// `options.inputShapes`; throws mc::Error on a malformed spec.
void parseOnnxInputShape(const std::string& spec, OnnxImportOptions& options);

/// Imports an ONNX model (opsets 13 to 17) as an mc module: graph inputs
/// become the function's arguments and graph outputs its results (both
/// named as in the model), initializers become parameters named as in the
/// model (with trainingState, batch norms' running statistics become
/// buffers). Import is structural: each node's handler calls frontend ops on
/// shape-only tensors (Tensor::shapeOnly) for the graph inputs, so shape
/// rules give every value's shape, the tracer records the ops, and no kernel
/// runs on made-up data (nothing like a division by a zero example, and no
/// activation memory). Nodes whose inputs are all compile-time constants
/// (initializers, Constant, Shape of anything, and what is computed from
/// those only) are evaluated, and their results enter the graph as
/// mc.constant where traced ops use them.
/// Throws mc::Error on an unreadable or invalid file, an unsupported opset or
/// op (naming the op type, the node and the opset), a dynamic input shape
/// not given in `options`, or external data outside the model's folder.
jit::TracedModule importOnnx(const std::string& path,
                             const OnnxImportOptions& options = {});

} // namespace mc

#endif // MODELC_FRONTEND_ONNX_ONNXIMPORTER_H

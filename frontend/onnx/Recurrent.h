// ONNX's recurrent layers (RNN, GRU, LSTM) as the frontend ops of their
// equations, unrolled over the (static) sequence: modelc has no loop op, and
// an unrolled step is a matmul and an elementwise chain that mc-fuse fuses.
#ifndef MODELC_FRONTEND_ONNX_RECURRENT_H
#define MODELC_FRONTEND_ONNX_RECURRENT_H

#include "frontend/Tensor.h"

#include <functional>
#include <optional>
#include <vector>

namespace mc {
namespace onnx_recurrent {

using Activation = std::function<Tensor(const Tensor&)>;

enum class Cell { Rnn, Gru, Lstm }; // indexes Recurrent.cpp's tables

/// A layer's attributes, as the ONNX node gives them.
struct Layer {
  Cell cell = Cell::Lstm;
  int64_t hiddenSize = 0; // 0: absent, R's shape gives it
  /// 1 (forward or reverse) or 2 (bidirectional: forward, then reverse).
  int numDirections = 1;
  /// direction = "reverse" (with numDirections 1).
  bool reverse = false;
  /// Per direction, the cell's activations in ONNX's order: f (RNN), f, g
  /// (GRU), f, g, h (LSTM); so numDirections times that many.
  std::vector<Activation> activations;
  /// `clip`: gate pre-activations are clamped to [-clip, clip].
  std::optional<double> clip;
  bool inputForget = false;       // LSTM: f = 1 - i
  bool linearBeforeReset = false; // GRU: r * (H R_h^T + Rb_h)
  bool batchFirst = false;        // layout = 1
};

/// The node's inputs; an undefined Tensor is an absent (optional) input.
struct Operands {
  Tensor x, w, r, b, initialH, initialC, peepholes;
  /// initial_h / initial_c hold zeros (a constant): their shape is checked,
  /// then they count as absent, which is the same state and needs no
  /// recurrent matmul at the first step (nor, with a dynamic batch, a
  /// constant of the batch's size).
  bool zeroInitialH = false, zeroInitialC = false;
};

/// Y, Y_h and (LSTM) Y_c in the node's layout.
struct Results {
  Tensor y, yH, yC;
};

/// Builds the layer; throws mc::Error naming the operand for a shape that
/// does not fit the node's (X, W, R, B, initial_h, initial_c, P).
Results build(const Layer& layer, const Operands& in);

/// The number of activations per direction (1, 2 or 3).
int activationsPerDirection(Cell cell);

} // namespace onnx_recurrent
} // namespace mc

#endif // MODELC_FRONTEND_ONNX_RECURRENT_H

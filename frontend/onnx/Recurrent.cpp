#include "frontend/onnx/Recurrent.h"

#include "frontend/Ops.h"

#include <string>

namespace mc {
namespace onnx_recurrent {
namespace {

/// Per cell (Rnn, Gru, Lstm): its gates, and its activations per direction.
constexpr int64_t kGates[] = {1, 3, 4};
constexpr int kActivations[] = {1, 2, 3};

int64_t gatesOf(Cell cell) { return kGates[static_cast<int>(cell)]; }

void expectShape(const char* what, const Tensor& t, const Shape& want) {
  if (t.shape() != want)
    throw Error(std::string(what) + " must be " + rt::shapeString(want) +
                ", got " + t.describe());
}

/// t[d] of a [D, ...] operand.
Tensor direction(const Tensor& t, int64_t d) {
  return squeeze(sliceDim(t, 0, d, d + 1), 0);
}

/// Columns [k * n, (k + 1) * n) of a [N, G * n] matrix (gate k).
Tensor gate(const Tensor& t, int64_t k, int64_t n) {
  return sliceDim(t, t.rank() - 1, k * n, (k + 1) * n);
}

/// One direction's pass over the sequence; fills steps[t] with H_t and
/// returns the last H (and C through *lastC).
struct Pass {
  const Layer& layer;
  int64_t hidden;
  int64_t timeAxis;
  const Activation* act; // this direction's activations

  Tensor clipped(const Tensor& pre) const {
    return layer.clip ? clamp(pre, -*layer.clip, *layer.clip) : pre;
  }

  Tensor run(const Tensor& x, int64_t d, const Operands& in, bool reverse,
             std::vector<Tensor>& steps, Tensor* lastC) const {
    int64_t g = gatesOf(layer.cell);
    int64_t n = hidden;
    DType dt = x.dtype();
    Tensor w = direction(in.w, d); // [G n, I]
    Tensor r = direction(in.r, d); // [G n, n]
    // The input projection of every step is one matmul. Biases that are
    // added outside the cell's nonlinear mixing join it: all of them for
    // RNN and LSTM; for GRU all but Rb_h when it is multiplied by r.
    Tensor projectionBias, recurrentBiasH;
    if (in.b.defined()) {
      Tensor bd = direction(in.b, d); // [2 G n]
      Tensor wb = sliceDim(bd, 0, 0, g * n);
      Tensor rb = sliceDim(bd, 0, g * n, 2 * g * n);
      if (layer.cell == Cell::Gru && layer.linearBeforeReset) {
        Tensor rbZr = sliceDim(rb, 0, 0, 2 * n);
        recurrentBiasH = sliceDim(rb, 0, 2 * n, 3 * n);
        projectionBias = wb + concat({rbZr, Tensor::zeros({n}, dt)}, 0);
      } else {
        projectionBias = wb + rb;
      }
    }
    Tensor projected = linear(x, w, projectionBias); // [.., G n]
    Tensor h = in.initialH.defined() ? direction(in.initialH, d) : Tensor();
    Tensor c = in.initialC.defined() ? direction(in.initialC, d) : Tensor();
    Tensor pi, po, pf;
    if (in.peepholes.defined()) {
      Tensor pd = direction(in.peepholes, d); // [3 n]: i, o, f
      pi = gate(pd, 0, n);
      po = gate(pd, 1, n);
      pf = gate(pd, 2, n);
    }
    int64_t length = x.size(timeAxis);
    for (int64_t s = 0; s < length; ++s) {
      int64_t t = reverse ? length - 1 - s : s;
      Tensor xt = squeeze(sliceDim(projected, timeAxis, t, t + 1), timeAxis);
      switch (layer.cell) {
      case Cell::Rnn: {
        Tensor pre = h.defined() ? xt + matmul(h, r, false, true) : xt;
        h = act[0](clipped(pre));
        break;
      }
      case Cell::Lstm: {
        // Gates in ONNX's order i, o, f, c.
        Tensor gates = h.defined() ? xt + matmul(h, r, false, true) : xt;
        Tensor iPre = gate(gates, 0, n);
        Tensor oPre = gate(gates, 1, n);
        Tensor fPre = gate(gates, 2, n);
        Tensor cPre = gate(gates, 3, n);
        if (pi.defined() && c.defined()) {
          iPre = iPre + pi * c;
          fPre = fPre + pf * c;
        }
        Tensor i = act[0](clipped(iPre));
        Tensor cand = act[1](clipped(cPre));
        Tensor update = i * cand;
        Tensor cNew;
        if (c.defined()) {
          Tensor f = layer.inputForget ? Tensor::scalar(1.0, dt) - i
                                       : act[0](clipped(fPre));
          cNew = f * c + update;
        } else {
          cNew = update;
        }
        if (pi.defined())
          oPre = oPre + po * cNew;
        Tensor o = act[0](clipped(oPre));
        h = o * act[2](cNew);
        c = cNew;
        break;
      }
      case Cell::Gru: {
        // Gates in ONNX's order z, r, h.
        Tensor xZr = gate(xt, 0, 2 * n);
        Tensor xH = gate(xt, 2, n);
        // With linear_before_reset, H R^T is one matmul for the three
        // gates; without, r * H must exist before the third.
        Tensor hr = h.defined() && layer.linearBeforeReset
                        ? matmul(h, r, false, true) // [N, 3n]
                        : Tensor();
        Tensor zr = !h.defined() ? xZr
                    : hr.defined()
                        ? xZr + gate(hr, 0, 2 * n)
                        : xZr + matmul(h, sliceDim(r, 0, 0, 2 * n), false,
                                       true);
        Tensor z = act[0](clipped(gate(zr, 0, n)));
        Tensor reset = act[0](clipped(gate(zr, 1, n)));
        Tensor pre;
        if (layer.linearBeforeReset) {
          Tensor rec;
          if (h.defined())
            rec = recurrentBiasH.defined() ? gate(hr, 2, n) + recurrentBiasH
                                           : gate(hr, 2, n);
          else
            rec = recurrentBiasH;
          pre = rec.defined() ? xH + reset * rec : xH;
        } else {
          Tensor rH = sliceDim(r, 0, 2 * n, 3 * n); // [n, n]
          pre = h.defined() ? xH + matmul(reset * h, rH, false, true) : xH;
        }
        Tensor cand = act[1](clipped(pre));
        // (1 - z) * h~ + z * H, as ONNX and PyTorch write it.
        Tensor keep = Tensor::scalar(1.0, dt) - z;
        Tensor mixed = keep * cand;
        h = h.defined() ? mixed + z * h : mixed;
        break;
      }
      }
      steps[size_t(t)] = h;
    }
    if (lastC)
      *lastC = c;
    return h;
  }
};

Tensor concatOrOne(const std::vector<Tensor>& parts, int64_t axis) {
  return parts.size() == 1 ? parts[0] : concat(parts, axis);
}

} // namespace

int activationsPerDirection(Cell cell) {
  return kActivations[static_cast<int>(cell)];
}

Results build(const Layer& layer, const Operands& in) {
  const Tensor& x = in.x;
  if (x.rank() != 3)
    throw Error("X must be 3-D ([seq_length, batch_size, input_size], or "
                "batch first with layout=1), got " + x.describe());
  if (!rt::isFloat(x.dtype()))
    throw Error("X must be a float tensor (f32, f16 or bf16), got " +
                x.describe());
  for (const Tensor* t : {&in.w, &in.r, &in.b, &in.initialH, &in.initialC,
                          &in.peepholes})
    if (t->defined() && t->dtype() != x.dtype())
      throw Error("the operands' element types differ: X is " +
                  x.describe() + ", another is " + t->describe());
  int64_t timeAxis = layer.batchFirst ? 1 : 0;
  int64_t batchAxis = 1 - timeAxis;
  int64_t steps = x.size(timeAxis), batch = x.size(batchAxis);
  int64_t inputSize = x.size(2);
  int64_t dirs = layer.numDirections;
  int64_t g = gatesOf(layer.cell);
  int64_t n = layer.hiddenSize;
  if (n <= 0) { // no hidden_size: R's [D, G n, n] says it
    if (in.r.rank() != 3)
      throw Error("R must be [num_directions, " + std::to_string(g) +
                  " * hidden_size, hidden_size], got " + in.r.describe());
    n = in.r.size(2);
    if (n <= 0)
      throw Error("the hidden size (R's last dim) must be positive, got " +
                  in.r.describe());
  }
  if (steps == 0)
    throw Error("X " + x.describe() + " holds an empty sequence");
  if (batch == 0)
    throw Error("X " + x.describe() + " holds no sequences (batch_size 0)");
  if (inputSize == 0)
    throw Error("X " + x.describe() + " has an input_size (dim 2) of 0");
  if (int64_t(layer.activations.size()) !=
      dirs * activationsPerDirection(layer.cell))
    throw Error("activations lists " +
                std::to_string(layer.activations.size()) +
                " function(s); the cell takes " +
                std::to_string(activationsPerDirection(layer.cell)) +
                " per direction, so " + std::to_string(dirs) +
                " direction(s) need " +
                std::to_string(dirs * activationsPerDirection(layer.cell)));
  expectShape("W", in.w, {dirs, g * n, inputSize});
  expectShape("R", in.r, {dirs, g * n, n});
  if (in.b.defined())
    expectShape("B", in.b, {dirs, 2 * g * n});
  Shape stateShape =
      layer.batchFirst ? Shape{batch, dirs, n} : Shape{dirs, batch, n};
  // A state as the passes take it: [D, N, n], absent when zero.
  auto state = [&](const char* what, const Tensor& s, bool zero) {
    if (!s.defined())
      return s;
    expectShape(what, s, stateShape);
    if (zero)
      return Tensor();
    return layer.batchFirst ? transpose(s, {1, 0, 2}) : s;
  };
  Operands ops = in;
  ops.initialH = state("initial_h", in.initialH, in.zeroInitialH);
  ops.initialC = state("initial_c", in.initialC, in.zeroInitialC);
  if (in.peepholes.defined())
    expectShape("P", in.peepholes, {dirs, 3 * n});
  if (layer.clip && !(*layer.clip > 0.0))
    throw Error("clip must be positive, got " + std::to_string(*layer.clip));

  int64_t dirAxis = layer.batchFirst ? 2 : 1; // of Y
  std::vector<Tensor> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    Pass pass{layer, n, timeAxis,
              layer.activations.data() +
                  d * activationsPerDirection(layer.cell)};
    bool reverse = d == 1 || layer.reverse;
    std::vector<Tensor> perStep(static_cast<size_t>(steps));
    Tensor c;
    hs.push_back(pass.run(x, d, ops, reverse, perStep,
                          layer.cell == Cell::Lstm ? &c : nullptr));
    cs.push_back(c);
    // Y of this direction, [T, 1, N, n] (or [N, T, 1, n]).
    std::vector<Tensor> parts;
    for (const Tensor& step : perStep)
      parts.push_back(unsqueeze(unsqueeze(step, timeAxis), dirAxis));
    ys.push_back(concatOrOne(parts, timeAxis));
  }
  Results out;
  // Y: [T, D, N, n], or [N, T, D, n] batch first.
  out.y = concatOrOne(ys, dirAxis);
  auto stack = [&](const std::vector<Tensor>& states) {
    std::vector<Tensor> parts;
    for (const Tensor& s : states)
      parts.push_back(unsqueeze(s, layer.batchFirst ? 1 : 0));
    return concatOrOne(parts, layer.batchFirst ? 1 : 0);
  };
  out.yH = stack(hs);
  if (layer.cell == Cell::Lstm)
    out.yC = stack(cs);
  return out;
}

} // namespace onnx_recurrent
} // namespace mc

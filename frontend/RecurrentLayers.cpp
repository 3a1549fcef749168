// torch.nn.RNN, LSTM and GRU on the eager ops (see nn.h). The layers are
// compositions: autograd, the tracer, compiled training and the cuda target
// handle them with no op of their own. frontend/onnx/Recurrent.cpp unrolls
// ONNX's forms of the same layers on the same eager ops, with the spec's
// generality (gate orders iofc / zrh, activations, clip, peepholes,
// linear_before_reset 0); this file's step is that one's PyTorch special
// case, written again: sharing it needs a gate-order parameter there and
// that file in this library.
#include "frontend/nn.h"

#include <cmath>
#include <functional>
#include <utility>

namespace mc::nn {

namespace {

const char* cellName(RecurrentBase::Cell cell) {
  switch (cell) {
  case RecurrentBase::Cell::RnnTanh:
  case RecurrentBase::Cell::RnnRelu:
    return "RNN";
  case RecurrentBase::Cell::Lstm:
    return "LSTM";
  case RecurrentBase::Cell::Gru:
    return "GRU";
  }
  return "RNN";
}

int64_t gateCount(RecurrentBase::Cell cell) {
  switch (cell) {
  case RecurrentBase::Cell::Lstm:
    return 4;
  case RecurrentBase::Cell::Gru:
    return 3;
  default:
    return 1;
  }
}

/// Columns [i * h, (i + 1) * h) of a [B, G * H] gate block.
Tensor gate(const Tensor& gates, int64_t i, int64_t h) {
  return sliceDim(gates, 1, i * h, (i + 1) * h);
}

/// a + b where either may be undefined (a zero state's product).
Tensor addMaybe(const Tensor& a, const Tensor& b) {
  if (!a.defined())
    return b;
  if (!b.defined())
    return a;
  return a + b;
}

/// One step of `cell` from the input's projection xg = x W_ih^T + b_ih
/// ([B, G * H]): h (and c) become the next state; undefined means zeros.
void cellStep(RecurrentBase::Cell cell, int64_t hs, const Tensor& xg,
              const RecurrentBase::Weights& w, Tensor& h, Tensor& c) {
  using Cell = RecurrentBase::Cell;
  // The state's part, h W_hh^T + b_hh; from a zero state only the bias.
  Tensor hg = h.defined() ? linear(h, w.wHh, w.bHh) : w.bHh;
  switch (cell) {
  case Cell::RnnTanh:
    h = tanh(addMaybe(xg, hg));
    break;
  case Cell::RnnRelu:
    h = relu(addMaybe(xg, hg));
    break;
  case Cell::Lstm: {
    Tensor gates = addMaybe(xg, hg);
    Tensor i = sigmoid(gate(gates, 0, hs)), f = sigmoid(gate(gates, 1, hs));
    Tensor g = tanh(gate(gates, 2, hs)), o = sigmoid(gate(gates, 3, hs));
    c = c.defined() ? f * c + i * g : i * g;
    h = o * tanh(c);
    break;
  }
  case Cell::Gru: {
    // r and z add the two parts; n adds the state's only after r.
    auto hgGate = [&](int64_t k) {
      return hg.defined() ? sliceDim(hg, hg.rank() - 1, k * hs, (k + 1) * hs)
                          : Tensor();
    };
    Tensor r = sigmoid(addMaybe(gate(xg, 0, hs), hgGate(0)));
    Tensor z = sigmoid(addMaybe(gate(xg, 1, hs), hgGate(1)));
    Tensor hn = hgGate(2);
    Tensor n = tanh(hn.defined() ? gate(xg, 2, hs) + r * hn : gate(xg, 2, hs));
    // (1 - z) n + z h, as n + z (h - n); n - z n from a zero state.
    h = h.defined() ? n + z * (h - n) : n - z * n;
    break;
  }
  }
}

/// The parameters of one layer and direction (or one cell), registered on
/// `m` under PyTorch's names with `suffix`, uniform in +-1/sqrt(H).
RecurrentBase::Weights
makeWeights(const std::function<Tensor&(const std::string&, Tensor)>& add,
            RecurrentBase::Cell cell, int64_t in, int64_t hiddenSize, bool bias,
            const std::string& suffix) {
  float bound = 1.0f / std::sqrt(static_cast<float>(hiddenSize));
  int64_t g = gateCount(cell) * hiddenSize;
  RecurrentBase::Weights w;
  w.wIh = add("weight_ih" + suffix, Tensor::uniform({g, in}, -bound, bound));
  w.wHh = add("weight_hh" + suffix,
              Tensor::uniform({g, hiddenSize}, -bound, bound));
  if (bias) {
    w.bIh = add("bias_ih" + suffix, Tensor::uniform({g}, -bound, bound));
    w.bHh = add("bias_hh" + suffix, Tensor::uniform({g}, -bound, bound));
  }
  return w;
}

void requirePositive(const std::string& name, const char* what, int64_t v) {
  if (v <= 0)
    throw Error(name + ": " + what + " must be positive, got " +
                std::to_string(v));
}

/// Initial states h (and c): shaped `shape` where given, c only for an
/// LSTM (`lstmName`), and both or neither.
void checkStates(const std::string& name, const char* lstmName, bool lstm,
                 const Shape& shape, const Tensor& x, const Tensor& h,
                 const Tensor& c, const char* hName, const char* cName) {
  if (!lstm && c.defined())
    throw Error(name + ": has no cell state; " + cName + " is for " + lstmName +
                " only");
  using State = std::pair<const Tensor*, const char*>;
  for (auto [s, what] : {State{&h, hName}, State{&c, cName}})
    if (s->defined() && s->shape() != shape)
      throw Error(name + ": " + what + " must be " + rt::shapeString(shape) +
                  " for the input " + x.describe() + ", got " + s->describe());
  if (lstm && h.defined() != c.defined())
    throw Error(name + ": give both " + hName + " and " + cName +
                ", or neither (zeros)");
}

/// The input's dtype against the weights', and the states' against both.
void checkDtypes(const std::string& name, DType weights, const Tensor& x,
                 const Tensor& h, const Tensor& c, const char* hName,
                 const char* cName) {
  if (x.dtype() != weights)
    throw Error(name + ": the input is " + x.describe() + ", the weights are " +
                rt::dtypeName(weights) + "; cast one to the other");
  using State = std::pair<const Tensor*, const char*>;
  for (auto [s, what] : {State{&h, hName}, State{&c, cName}})
    if (s->defined() && s->dtype() != weights)
      throw Error(name + ": " + what + " is " + s->describe() +
                  ", the input and weights are " + rt::dtypeName(weights));
}

} // namespace

RecurrentBase::RecurrentBase(Cell cell, int64_t inputSize, int64_t hiddenSize,
                             int64_t numLayers, bool bias, bool batchFirst,
                             double dropout, bool bidirectional)
    : cell(cell), inputSize(inputSize), hiddenSize(hiddenSize),
      numLayers(numLayers), bias(bias), batchFirst(batchFirst),
      dropout(dropout), bidirectional(bidirectional) {
  std::string name = cellName(cell);
  requirePositive(name, "input_size", inputSize);
  requirePositive(name, "hidden_size", hiddenSize);
  requirePositive(name, "num_layers", numLayers);
  if (!(dropout >= 0 && dropout <= 1))
    throw Error(name + ": dropout must be in [0, 1], got " +
                std::to_string(dropout));
  // PyTorch's registration order (its _flat_weights_names): per layer, per
  // direction, w_ih, w_hh, b_ih, b_hh.
  auto add = [this](const std::string& n, Tensor t) -> Tensor& {
    return registerParameter(n, std::move(t));
  };
  for (int64_t layer = 0; layer < numLayers; ++layer) {
    int64_t in = layer == 0 ? inputSize : numDirections() * hiddenSize;
    for (int64_t d = 0; d < numDirections(); ++d)
      weights_.push_back(makeWeights(add, cell, in, hiddenSize, bias,
                                     "_l" + std::to_string(layer) +
                                         (d == 1 ? "_reverse" : "")));
  }
}

const RecurrentBase::Weights& RecurrentBase::weights(int64_t layer,
                                                     int64_t direction) const {
  if (layer < 0 || layer >= numLayers || direction < 0 ||
      direction >= numDirections())
    throw Error(std::string(cellName(cell)) + ": no layer " +
                std::to_string(layer) + " direction " +
                std::to_string(direction) + " (it has " +
                std::to_string(numLayers) + " layers, " +
                std::to_string(numDirections()) + " directions)");
  return weights_[layer * numDirections() + direction];
}

RecurrentOutput RecurrentBase::run(const Tensor& x, const Tensor& h0,
                                   const Tensor& c0) {
  ModuleScope scope(*this);
  return compute(x, h0, c0);
}

Tensor RecurrentBase::direction(const Tensor& input, const Weights& w,
                                bool reverse, Tensor& h, Tensor& c) const {
  int64_t steps = input.size(0), hs = hiddenSize;
  // Every step's input projection in one matmul: [T, B, G * H].
  Tensor projected = linear(input, w.wIh, w.bIh);
  std::vector<Tensor> outputs(steps);
  for (int64_t s = 0; s < steps; ++s) {
    int64_t t = reverse ? steps - 1 - s : s;
    Tensor xg = squeeze(sliceDim(projected, 0, t, t + 1), 0); // [B, G * H]
    cellStep(cell, hs, xg, w, h, c);
    outputs[t] = unsqueeze(h, 0);
  }
  return concat(outputs, 0);
}

RecurrentOutput RecurrentBase::compute(const Tensor& xIn, const Tensor& h0In,
                                       const Tensor& c0In) {
  std::string name = cellName(cell);
  if (!xIn.defined() || (xIn.rank() != 2 && xIn.rank() != 3) ||
      xIn.size(-1) != inputSize)
    throw Error(name + ": input must be [" +
                (batchFirst ? std::string("B, T") : std::string("T, B")) +
                ", " + std::to_string(inputSize) + "] (or [T, " +
                std::to_string(inputSize) + "] unbatched), got " +
                (xIn.defined() ? xIn.describe() : "undefined"));
  // Up front, naming the layer: the matmuls would name internal shapes.
  checkDtypes(name, weights_[0].wIh.dtype(), xIn, h0In, c0In, "h0", "c0");
  bool batched = xIn.rank() == 3;
  // Time-major [T, B, In] inside.
  Tensor x = !batched     ? unsqueeze(xIn, 1)
             : batchFirst ? transpose(xIn, {1, 0, 2})
                          : xIn;
  int64_t steps = x.size(0), batch = x.size(1);
  if (steps == 0)
    throw Error(name + ": the input " + xIn.describe() +
                " has an empty sequence");
  int64_t states = numLayers * numDirections();
  Shape stateShape =
      batched ? Shape{states, batch, hiddenSize} : Shape{states, hiddenSize};
  checkStates(name, "LSTM", cell == Cell::Lstm, stateShape, xIn, h0In, c0In,
              "h0", "c0");
  Tensor h0 = h0In.defined() && !batched ? unsqueeze(h0In, 1) : h0In;
  Tensor c0 = c0In.defined() && !batched ? unsqueeze(c0In, 1) : c0In;
  // Layer l direction d's initial state, [B, H]; undefined for zeros.
  auto initial = [&](const Tensor& s, int64_t index) {
    return s.defined() ? squeeze(sliceDim(s, 0, index, index + 1), 0)
                       : Tensor();
  };

  std::vector<Tensor> lastH, lastC;
  Tensor input = x;
  for (int64_t layer = 0; layer < numLayers; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < numDirections(); ++d) {
      int64_t index = layer * numDirections() + d;
      Tensor h = initial(h0, index), c = initial(c0, index);
      outputs.push_back(
          direction(input, weights(layer, d), /*reverse=*/d == 1, h, c));
      lastH.push_back(unsqueeze(h, 0));
      if (cell == Cell::Lstm)
        lastC.push_back(unsqueeze(c, 0));
    }
    input = outputs.size() == 1 ? outputs[0] : concat(outputs, 2);
  }

  RecurrentOutput out;
  out.output = !batched     ? squeeze(input, 1)
               : batchFirst ? transpose(input, {1, 0, 2})
                            : input;
  auto stack = [&](const std::vector<Tensor>& s) {
    Tensor t = s.size() == 1 ? s[0] : concat(s, 0);
    return batched ? t : squeeze(t, 1);
  };
  out.h = stack(lastH);
  if (cell == Cell::Lstm)
    out.c = stack(lastC);
  return out;
}

RecurrentCellBase::RecurrentCellBase(RecurrentBase::Cell cell,
                                     int64_t inputSize, int64_t hiddenSize,
                                     bool bias)
    : cell(cell), inputSize(inputSize), hiddenSize(hiddenSize), bias(bias) {
  std::string name = std::string(cellName(cell)) + "Cell";
  requirePositive(name, "input_size", inputSize);
  requirePositive(name, "hidden_size", hiddenSize);
  weights_ = makeWeights(
      [this](const std::string& n, Tensor t) -> Tensor& {
        return registerParameter(n, std::move(t));
      },
      cell, inputSize, hiddenSize, bias, "");
}

RecurrentOutput RecurrentCellBase::run(const Tensor& x, const Tensor& h,
                                       const Tensor& c) {
  ModuleScope scope(*this);
  return compute(x, h, c);
}

RecurrentOutput RecurrentCellBase::compute(const Tensor& x, const Tensor& h0,
                                           const Tensor& c0) {
  std::string name = std::string(cellName(cell)) + "Cell";
  if (!x.defined() || (x.rank() != 1 && x.rank() != 2) ||
      x.size(-1) != inputSize)
    throw Error(name + ": input must be [B, " + std::to_string(inputSize) +
                "] (or [" + std::to_string(inputSize) + "] unbatched), got " +
                (x.defined() ? x.describe() : "undefined"));
  checkDtypes(name, weights_.wIh.dtype(), x, h0, c0, "h", "c");
  bool batched = x.rank() == 2;
  Shape stateShape = batched ? Shape{x.size(0), hiddenSize} : Shape{hiddenSize};
  checkStates(name, "LSTMCell", cell == RecurrentBase::Cell::Lstm, stateShape,
              x, h0, c0, "h", "c");
  // Work on [B, ...]: an unbatched step is a batch of one.
  auto rows = [&](const Tensor& t) {
    return t.defined() && !batched ? unsqueeze(t, 0) : t;
  };
  Tensor h = rows(h0), c = rows(c0);
  cellStep(cell, hiddenSize, linear(rows(x), weights_.wIh, weights_.bIh),
           weights_, h, c);
  RecurrentOutput out;
  out.h = batched ? h : squeeze(h, 0);
  if (cell == RecurrentBase::Cell::Lstm)
    out.c = batched ? c : squeeze(c, 0);
  out.output = out.h;
  return out;
}

namespace {
RecurrentBase::Cell rnnCell(const std::string& nonlinearity,
                            const char* module) {
  if (nonlinearity == "tanh")
    return RecurrentBase::Cell::RnnTanh;
  if (nonlinearity == "relu")
    return RecurrentBase::Cell::RnnRelu;
  throw Error(std::string(module) +
              ": nonlinearity must be 'tanh' or 'relu', got '" + nonlinearity +
              "'");
}
} // namespace

RNN::RNN(int64_t inputSize, int64_t hiddenSize, int64_t numLayers,
         const std::string& nonlinearity, bool bias, bool batchFirst,
         double dropout, bool bidirectional)
    : RecurrentBase(rnnCell(nonlinearity, "RNN"), inputSize, hiddenSize,
                    numLayers, bias, batchFirst, dropout, bidirectional) {}

LSTM::LSTM(int64_t inputSize, int64_t hiddenSize, int64_t numLayers, bool bias,
           bool batchFirst, double dropout, bool bidirectional)
    : RecurrentBase(Cell::Lstm, inputSize, hiddenSize, numLayers, bias,
                    batchFirst, dropout, bidirectional) {}

RNNCell::RNNCell(int64_t inputSize, int64_t hiddenSize, bool bias,
                 const std::string& nonlinearity)
    : RecurrentCellBase(rnnCell(nonlinearity, "RNNCell"), inputSize, hiddenSize,
                        bias) {}

LSTMCell::LSTMCell(int64_t inputSize, int64_t hiddenSize, bool bias)
    : RecurrentCellBase(RecurrentBase::Cell::Lstm, inputSize, hiddenSize,
                        bias) {}

GRUCell::GRUCell(int64_t inputSize, int64_t hiddenSize, bool bias)
    : RecurrentCellBase(RecurrentBase::Cell::Gru, inputSize, hiddenSize, bias) {
}

GRU::GRU(int64_t inputSize, int64_t hiddenSize, int64_t numLayers, bool bias,
         bool batchFirst, double dropout, bool bidirectional)
    : RecurrentBase(Cell::Gru, inputSize, hiddenSize, numLayers, bias,
                    batchFirst, dropout, bidirectional) {}

} // namespace mc::nn

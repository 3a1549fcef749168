// nn modules: named parameters, buffers and submodules, as in torch.nn.
#ifndef MODELC_FRONTEND_NN_H
#define MODELC_FRONTEND_NN_H

#include "frontend/Ops.h"

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mc {
class TraceHook;
}

namespace mc::nn {

class Module;

/// While alive, `module` is entered in the active trace (ops are located by
/// its path), as Module::operator() does; for forwards with several inputs.
class ModuleScope {
public:
  explicit ModuleScope(const Module& module);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

private:
  TraceHook* hook_;
  const Module& module_;
};

/// An int or an (h, w) pair, like PyTorch's _size_2_t: `Conv2d(3, 64, 7)`
/// and `Conv2d(3, 64, {7, 5})` both work.
struct Size2 {
  Size2(int64_t v) : h(v), w(v) {} // NOLINT: implicit, as in PyTorch
  Size2(int64_t h, int64_t w) : h(h), w(w) {}
  std::vector<int64_t> vec() const { return {h, w}; }
  int64_t h, w;
};

class Module {
public:
  virtual ~Module();
  /// Runs forward with the module entered in the active trace (so traced
  /// ops are located by module path).
  Tensor operator()(const Tensor& x);
  virtual Tensor forward(const Tensor& x) = 0;
  /// "Linear", "Sequential", ...
  virtual std::string typeName() const = 0;

  /// Parameters of this module and all submodules, with dotted names
  /// ("0.weight", "fc1.bias"): the module's own first, then each child's
  /// (recursively), each in registration order, as torch.nn.Module does.
  std::vector<std::pair<std::string, Tensor>> namedParameters() const;
  /// Buffers (BatchNorm's running statistics): state that is not a
  /// parameter, named and ordered the same way.
  std::vector<std::pair<std::string, Tensor>> namedBuffers() const;
  /// Parameters and buffers with PyTorch's state_dict() names and order:
  /// each module's own parameters, then its own buffers, then each child's.
  /// Trace with these (jit::traceFunction) so buffers become named globals.
  std::vector<std::pair<std::string, Tensor>> stateDict() const;
  std::vector<std::pair<std::string, const Module*>> namedModules() const;
  /// Training mode for this module and its children (BatchNorm normalizes
  /// with batch statistics and updates its running ones), as
  /// torch.nn.Module.train(). Modules start in eval mode (unlike PyTorch:
  /// modelc's first use is exporting trained models); call train() first.
  void train(bool mode = true);
  void eval() { train(false); }
  bool isTraining() const { return training_; }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>&
  children() const {
    return children_;
  }

protected:
  Tensor& registerParameter(const std::string& name, Tensor t);
  Tensor& registerBuffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> registerModule(const std::string& name,
                                    std::shared_ptr<M> m) {
    addChild(name, m);
    return m;
  }

private:
  void addChild(const std::string& name, std::shared_ptr<Module> m);
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = false;
};

/// y = x W^T + b, W [out, in]; initialized like PyTorch (uniform in
/// +-1/sqrt(in) for both W and b) from the default generator.
class Linear : public Module {
public:
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Linear"; }
  Tensor weight, bias;
};

class ReLU : public Module {
public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string typeName() const override { return "ReLU"; }
};

class Tanh : public Module {
public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::string typeName() const override { return "Tanh"; }
};

class Sigmoid : public Module {
public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string typeName() const override { return "Sigmoid"; }
};

class Softmax : public Module {
public:
  explicit Softmax(int64_t axis) : axis_(axis) {}
  Tensor forward(const Tensor& x) override { return softmax(x, axis_); }
  std::string typeName() const override { return "Softmax"; }

private:
  int64_t axis_;
};

/// Runs its children in order; they are named "0", "1", ...
class Sequential : public Module {
public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
};

//===--- Modules of CNNs and transformers (PyTorch names and defaults) ---===//

/// torch.nn.Conv2d on NCHW input: weight [out, in/groups, kh, kw], bias
/// [out]; both uniform in +-1/sqrt(fan_in), fan_in = in/groups * kh * kw
/// (PyTorch's kaiming_uniform_(a=sqrt(5)) bound), from the default generator.
class Conv2d : public Module {
public:
  Conv2d(int64_t inChannels, int64_t outChannels, Size2 kernel,
         Size2 stride = 1, Size2 padding = 0, Size2 dilation = 1,
         int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Conv2d"; }
  Tensor weight, bias;
  Size2 stride, padding, dilation;
  int64_t groups;
};

/// torch.nn.BatchNorm2d. Parameters weight (ones) and bias (zeros);
/// buffers running_mean (zeros) and running_var (ones). In eval mode it
/// normalizes with the running statistics; in training mode with the
/// batch's mean and biased variance, and updates the running statistics
/// (running = (1 - momentum) * running + momentum * batch, with the unbiased
/// variance), in place, or as state of a traced training step. PyTorch's
/// num_batches_tracked buffer only matters for momentum=None and is left
/// out.
class BatchNorm2d : public Module {
public:
  explicit BatchNorm2d(int64_t numFeatures, double eps = 1e-5,
                       double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "BatchNorm2d"; }
  Tensor weight, bias, runningMean, runningVar;
  double eps, momentum;
};

/// torch.nn.MaxPool2d; the stride defaults to the kernel size.
class MaxPool2d : public Module {
public:
  explicit MaxPool2d(Size2 kernel, std::optional<Size2> stride = {},
                     Size2 padding = 0, Size2 dilation = 1,
                     bool ceilMode = false);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "MaxPool2d"; }
  Size2 kernel, stride, padding, dilation;
  bool ceilMode;
};

/// torch.nn.AvgPool2d; the stride defaults to the kernel size.
class AvgPool2d : public Module {
public:
  explicit AvgPool2d(Size2 kernel, std::optional<Size2> stride = {},
                     Size2 padding = 0, bool ceilMode = false,
                     bool countIncludePad = true);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "AvgPool2d"; }
  Size2 kernel, stride, padding;
  bool ceilMode, countIncludePad;
};

/// torch.nn.AdaptiveAvgPool2d for output size 1 only (global average
/// pooling, the head of ResNets): the mean over H and W, kept as 1x1.
class AdaptiveAvgPool2d : public Module {
public:
  explicit AdaptiveAvgPool2d(Size2 outputSize);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "AdaptiveAvgPool2d"; }
};

/// torch.nn.LayerNorm over the trailing `normalizedShape` dims, with
/// weight (ones) and bias (zeros) of that shape.
class LayerNorm : public Module {
public:
  explicit LayerNorm(Shape normalizedShape, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "LayerNorm"; }
  Tensor weight, bias;
  Shape normalizedShape;
  double eps;
};

/// torch.nn.Embedding: weight [num, dim] from N(0, 1); forward takes i32 or
/// i64 ids [...] and returns [..., dim].
class Embedding : public Module {
public:
  Embedding(int64_t numEmbeddings, int64_t embeddingDim);
  Tensor forward(const Tensor& ids) override;
  std::string typeName() const override { return "Embedding"; }
  Tensor weight;
};

/// torch.nn.GELU: approximate "none" (erf) or "tanh".
class GELU : public Module {
public:
  explicit GELU(const std::string& approximate = "none");
  Tensor forward(const Tensor& x) override { return gelu(x, tanh_); }
  std::string typeName() const override { return "GELU"; }

private:
  bool tanh_;
};

/// torch.nn.Dropout: in training mode, mc::dropout(x, p) (frontend/Random.h:
/// the mask drawn from the global generator); in eval mode the identity.
class Dropout : public Module {
public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Dropout"; }
  double p;
};

/// torch.nn.Flatten: dims [startDim, endDim] become one.
class Flatten : public Module {
public:
  explicit Flatten(int64_t startDim = 1, int64_t endDim = -1)
      : startDim_(startDim), endDim_(endDim) {}
  Tensor forward(const Tensor& x) override {
    return flatten(x, startDim_, endDim_);
  }
  std::string typeName() const override { return "Flatten"; }

private:
  int64_t startDim_, endDim_;
};

/// torch.nn.MultiheadAttention (eval mode, no attention weights returned):
/// in_proj_weight [3E, E] (xavier-uniform), in_proj_bias [3E] (zeros) and
/// out_proj, a Linear(E, E) with a zero bias. Inputs are [B, L, E] when
/// batchFirst, else [L, B, E].
class MultiheadAttention : public Module {
public:
  /// `dropout`: on the attention weights in training mode, as PyTorch's.
  MultiheadAttention(int64_t embedDim, int64_t numHeads,
                     bool batchFirst = true, double dropout = 0.0);
  using Module::operator();
  /// Attention of q over (k, v). `attnMask` is optional: a float mask added
  /// to the scores, or an i1 mask where true means "may not attend"
  /// (PyTorch's two forms); [L, S] or broadcastable to [B, heads, L, S].
  /// Enters the module in the active trace, as operator()(x) does.
  Tensor operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& attnMask = Tensor());
  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& attnMask = Tensor());
  /// Self-attention without a mask: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  std::string typeName() const override { return "MultiheadAttention"; }
  int64_t embedDim, numHeads;
  bool batchFirst;
  double dropout;
  Tensor inProjWeight, inProjBias;
  std::shared_ptr<Linear> outProj;
};

/// torch.nn.TransformerEncoderLayer (in training mode its dropouts drop,
/// the attention weights' too; in eval mode they are the identity):
///   norm_first:  x = x + sa(norm1(x));  x = x + ff(norm2(x))
///   otherwise:   x = norm1(x + sa(x));  x = norm2(x + ff(x))
/// with sa = self_attn(x, x, x, mask), ff = linear2(act(linear1(x))), act
/// "relu" or "gelu" (erf form). Submodule names are PyTorch's.
class TransformerEncoderLayer : public Module {
public:
  TransformerEncoderLayer(int64_t dModel, int64_t nhead,
                          int64_t dimFeedforward = 2048, double dropout = 0.1,
                          const std::string& activation = "relu",
                          double layerNormEps = 1e-5, bool batchFirst = true,
                          bool normFirst = false);
  using Module::operator();
  /// With an attention mask (see MultiheadAttention), in the module's scope.
  Tensor operator()(const Tensor& src, const Tensor& srcMask);
  Tensor forward(const Tensor& src, const Tensor& srcMask);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  std::string typeName() const override { return "TransformerEncoderLayer"; }
  std::shared_ptr<MultiheadAttention> selfAttn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  bool normFirst, geluActivation;

private:
  Tensor selfAttention(const Tensor& x, const Tensor& mask);
  Tensor feedForward(const Tensor& x);
};

//===--- Recurrent layers (torch.nn.RNN, LSTM and GRU) ---===//

/// What a recurrent layer returns, as PyTorch's (output, h_n) and
/// (output, (h_n, c_n)): the output sequence [T, B, D*H] ([B, T, D*H] when
/// batchFirst, [T, D*H] for an unbatched input), the last hidden state of
/// every layer and direction h [D*L, B, H] ([D*L, H] unbatched), and for an
/// LSTM the last cell state c, shaped like h (undefined otherwise).
/// D is 2 when bidirectional, else 1; L is numLayers.
struct RecurrentOutput {
  Tensor output, h, c;
};

/// torch.nn.RNN, LSTM and GRU: numLayers layers, each over the sequence
/// forward (and backward too when bidirectional, the two outputs
/// concatenated), with PyTorch's equations, gate orders (LSTM i, f, g, o;
/// GRU r, z, n), parameter names ("weight_ih_l0", "bias_hh_l1_reverse"),
/// order, shapes and init (uniform in +-1/sqrt(hidden_size)): the names and
/// shapes of torch's state_dict. Absent initial states are zeros. `dropout`
/// between layers is accepted and, like nn::Dropout, is the identity, in
/// training mode too.
/// Each layer projects the whole input sequence in one matmul and each
/// step multiplies only the state, so a trace has T + 1 matmuls per layer
/// and direction (T with a zero initial state) and the gates fuse.
class RecurrentBase : public Module {
public:
  enum class Cell { RnnTanh, RnnRelu, Lstm, Gru };
  /// One layer and direction's parameters; the biases are undefined when
  /// the layer has none.
  struct Weights {
    Tensor wIh, wHh, bIh, bHh;
  };

  using Module::operator();
  /// The output and the last states from initial states h0 (and c0 for an
  /// LSTM), [D*L, B, H] each ([D*L, H] for an unbatched input), or zeros
  /// where undefined; they must have x's dtype, which must be the
  /// weights'. Enters the module in the active trace, as operator()(x)
  /// does. A trace with a dynamic batch takes the inputs' leading dim as
  /// the batch: give x batch-first, and states as [B, D*L, H] inputs
  /// transposed inside the traced function.
  RecurrentOutput run(const Tensor& x, const Tensor& h0 = Tensor(),
                      const Tensor& c0 = Tensor());
  /// The output sequence only, from zero states.
  Tensor forward(const Tensor& x) override { return compute(x, {}, {}).output; }
  const Weights& weights(int64_t layer, int64_t direction) const;
  int64_t numDirections() const { return bidirectional ? 2 : 1; }

  // Fixed at construction: the parameters' shapes follow from them.
  const Cell cell;
  const int64_t inputSize, hiddenSize, numLayers;
  const bool bias, batchFirst;
  const double dropout;
  const bool bidirectional;

protected:
  RecurrentBase(Cell cell, int64_t inputSize, int64_t hiddenSize,
                int64_t numLayers, bool bias, bool batchFirst, double dropout,
                bool bidirectional);

private:
  RecurrentOutput compute(const Tensor& x, const Tensor& h0, const Tensor& c0);
  /// One direction of one layer over time-major input [T, B, In]: returns
  /// the outputs [T, B, H] and sets h (and c) to the last states.
  Tensor direction(const Tensor& input, const Weights& w, bool reverse,
                   Tensor& h, Tensor& c) const;
  std::vector<Weights> weights_; // layer-major, forward before reverse
};

/// torch.nn.RNN: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act "tanh"
/// or "relu".
class RNN : public RecurrentBase {
public:
  RNN(int64_t inputSize, int64_t hiddenSize, int64_t numLayers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true,
      bool batchFirst = false, double dropout = 0.0,
      bool bidirectional = false);
  std::string typeName() const override { return "RNN"; }
};

/// torch.nn.LSTM (no proj_size): gates i, f, g, o; c' = f c + i g,
/// h' = o tanh(c').
class LSTM : public RecurrentBase {
public:
  LSTM(int64_t inputSize, int64_t hiddenSize, int64_t numLayers = 1,
       bool bias = true, bool batchFirst = false, double dropout = 0.0,
       bool bidirectional = false);
  std::string typeName() const override { return "LSTM"; }
};

/// torch.nn.GRU: gates r, z, n; n = tanh(x W_in^T + b_in + r (h W_hn^T +
/// b_hn)), h' = (1 - z) n + z h.
class GRU : public RecurrentBase {
public:
  GRU(int64_t inputSize, int64_t hiddenSize, int64_t numLayers = 1,
      bool bias = true, bool batchFirst = false, double dropout = 0.0,
      bool bidirectional = false);
  std::string typeName() const override { return "GRU"; }
};

/// torch.nn.RNNCell, LSTMCell and GRUCell: one step of the layers above
/// (the same equations), for decoders that feed each output back.
/// Parameters "weight_ih", "weight_hh", "bias_ih", "bias_hh", shaped and
/// initialized as PyTorch's.
class RecurrentCellBase : public Module {
public:
  using Module::operator();
  /// The next state from x [B, I] ([I] unbatched) and the state h (and c
  /// for an LSTMCell), [B, H] ([H]) each, zeros where undefined: its h and
  /// (LSTMCell) c; `output` is h too. Enters the module in the active
  /// trace.
  RecurrentOutput run(const Tensor& x, const Tensor& h = Tensor(),
                      const Tensor& c = Tensor());
  /// h' from a zero state.
  Tensor forward(const Tensor& x) override { return compute(x, {}, {}).h; }
  const RecurrentBase::Weights& weights() const { return weights_; }

  const RecurrentBase::Cell cell;
  const int64_t inputSize, hiddenSize;
  const bool bias;

protected:
  RecurrentCellBase(RecurrentBase::Cell cell, int64_t inputSize,
                    int64_t hiddenSize, bool bias);

private:
  RecurrentOutput compute(const Tensor& x, const Tensor& h, const Tensor& c);
  RecurrentBase::Weights weights_;
};

class RNNCell : public RecurrentCellBase {
public:
  RNNCell(int64_t inputSize, int64_t hiddenSize, bool bias = true,
          const std::string& nonlinearity = "tanh");
  std::string typeName() const override { return "RNNCell"; }
};

class LSTMCell : public RecurrentCellBase {
public:
  LSTMCell(int64_t inputSize, int64_t hiddenSize, bool bias = true);
  std::string typeName() const override { return "LSTMCell"; }
};

class GRUCell : public RecurrentCellBase {
public:
  GRUCell(int64_t inputSize, int64_t hiddenSize, bool bias = true);
  std::string typeName() const override { return "GRUCell"; }
};

} // namespace mc::nn

#endif // MODELC_FRONTEND_NN_H

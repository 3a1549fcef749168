// mc-fold-batch-norm: an inference batch_norm after a conv2d folded into
// the convolution's weight and a bias (rules in Passes.td).
#include "ir/RegistryOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace mc {
#define GEN_PASS_DEF_FOLDBATCHNORMPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// The f32 values of a constant tensor: an mc.constant or the value of the
/// immutable global an ml_program.global_load_const reads.
std::optional<std::vector<double>> constantValues(Value v) {
  // Dense elements or a dense resource (an imported model's weights).
  ElementsAttr elements = mc::constantElements(v);
  if (!elements ||
      !llvm::cast<ShapedType>(elements.getType()).getElementType().isF32())
    return std::nullopt;
  // Read in place where the attribute holds the floats (no copy of a
  // conv's weights), else through the converting copy (a splat).
  std::vector<uint8_t> copy;
  const char* data = nullptr;
  size_t size = 0;
  if (auto view = mc::elementsBytesView(elements)) {
    data = view->data();
    size = view->size();
  } else {
    FailureOr<std::vector<uint8_t>> bytes =
        mc::elementsBytes(elements, /*op=*/nullptr);
    if (failed(bytes))
      return std::nullopt;
    copy = std::move(*bytes);
    data = reinterpret_cast<const char*>(copy.data());
    size = copy.size();
  }
  std::vector<double> out(size / sizeof(float));
  for (size_t i = 0; i < out.size(); ++i) {
    float f;
    std::memcpy(&f, data + i * sizeof(float), sizeof(float));
    out[i] = f;
  }
  return out;
}

struct FoldBatchNormPass
    : mc::impl::FoldBatchNormPassBase<FoldBatchNormPass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    SmallVector<mc::BatchNormOp> norms;
    fn.walk([&](mc::BatchNormOp bn) { norms.push_back(bn); });
    for (mc::BatchNormOp bn : norms)
      fold(bn);
  }

  void fold(mc::BatchNormOp bn) {
    if (bn.getFeatureAxis() != 1)
      return;
    // conv, or conv + broadcast(bias) along dim 1.
    Value x = bn.getInput();
    Operation* biasAdd = nullptr;
    std::optional<std::vector<double>> bias;
    if (auto add = x.getDefiningOp<mc::AddOp>()) {
      for (int side = 0; side < 2 && !bias; ++side) {
        auto bcast =
            add->getOperand(1 - side).getDefiningOp<mc::BroadcastInDimOp>();
        if (!bcast || bcast.getDims().size() != 1 || bcast.getDims()[0] != 1 ||
            !add->getOperand(side).getDefiningOp<mc::Conv2dOp>())
          continue;
        bias = constantValues(bcast.getInput());
        if (bias) {
          biasAdd = add;
          x = add->getOperand(side);
        }
      }
    }
    auto conv = x.getDefiningOp<mc::Conv2dOp>();
    // The rule is NCHW's (channels along dim 1, the bias broadcast along
    // it); the pipeline folds before mc-channels-last switches layouts.
    if (!conv || conv.getChannelsLast() || !conv->hasOneUse() ||
        (biasAdd && !biasAdd->hasOneUse()))
      return;
    auto wType = llvm::cast<RankedTensorType>(conv.getWeight().getType());
    auto w = constantValues(conv.getWeight());
    auto scale = constantValues(bn.getScale());
    auto offset = constantValues(bn.getOffset());
    auto mean = constantValues(bn.getMean());
    auto var = constantValues(bn.getVariance());
    if (!w || !scale || !offset || !mean || !var || !wType.hasStaticShape())
      return;
    int64_t channels = wType.getDimSize(0);
    if (int64_t(scale->size()) != channels ||
        (bias && int64_t(bias->size()) != channels))
      return;
    double eps = bn.getEpsilon().convertToDouble();
    int64_t per = channels ? int64_t(w->size()) / channels : 0;
    std::vector<float> newW(w->size()), newB(channels);
    for (int64_t c = 0; c < channels; ++c) {
      double s = (*scale)[c] / std::sqrt((*var)[c] + eps);
      for (int64_t k = 0; k < per; ++k)
        newW[c * per + k] = float((*w)[c * per + k] * s);
      double b0 = bias ? (*bias)[c] : 0.0;
      newB[c] = float((b0 - (*mean)[c]) * s + (*offset)[c]);
    }
    OpBuilder b(bn);
    Location loc = bn.getLoc();
    auto bType = RankedTensorType::get({channels}, wType.getElementType());
    auto wConst = mc::ConstantOp::create(b,
        loc, DenseElementsAttr::get(wType, llvm::ArrayRef<float>(newW)));
    auto bConst = mc::ConstantOp::create(b,
        loc, DenseElementsAttr::get(bType, llvm::ArrayRef<float>(newB)));
    auto newConv = llvm::cast<mc::Conv2dOp>(b.clone(*conv));
    newConv->setOperand(1, wConst.getResult());
    auto outType = bn.getResult().getType();
    auto bcast = mc::BroadcastInDimOp::create(b,
        loc, outType, bConst.getResult(), b.getDenseI64ArrayAttr({1}));
    auto sum = mc::AddOp::create(b, loc, newConv.getResult(), bcast.getResult());
    bn.getResult().replaceAllUsesWith(sum.getResult());
    bn.erase();
    if (biasAdd)
      biasAdd->erase();
    conv.erase();
  }
};

} // namespace

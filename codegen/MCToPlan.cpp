// Lowering of mc to the executable Plan (CPU target): one runtime step per
// op, weights into the data section, reshapes as views.
#include "codegen/MCToPlan.h"

#include "ir/MCDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;

namespace mc::codegen {
namespace {

FailureOr<rt::DType> toDType(Type t) {
  if (t.isF32())
    return rt::DType::F32;
  if (t.isF16())
    return rt::DType::F16;
  if (t.isBF16())
    return rt::DType::BF16;
  if (t.isInteger(32))
    return rt::DType::I32;
  if (t.isInteger(64))
    return rt::DType::I64;
  if (t.isInteger(1))
    return rt::DType::I1;
  return failure();
}

std::string locationString(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

/// The raw little-endian bytes of a constant, in the runtime's layout (i1
/// as one byte per element).
FailureOr<std::vector<uint8_t>> constantBytes(ElementsAttr attr,
                                              Operation* op) {
  auto type = llvm::cast<RankedTensorType>(attr.getType());
  Type et = type.getElementType();
  int64_t n = type.getNumElements();
  std::vector<uint8_t> out;
  if (auto dense = llvm::dyn_cast<DenseElementsAttr>(attr)) {
    if (et.isInteger(1)) {
      out.reserve(n);
      for (bool b : dense.getValues<bool>())
        out.push_back(b ? 1 : 0);
      return out;
    }
    size_t width = et.getIntOrFloatBitWidth() / 8;
    out.resize(n * width);
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out.data() + i * width, raw.data(), width);
    } else {
      std::memcpy(out.data(), raw.data(), out.size());
    }
    return out;
  }
  if (auto resource = llvm::dyn_cast<DenseResourceElementsAttr>(attr)) {
    auto blob = resource.getRawHandle().getBlob();
    if (!blob) {
      op->emitOpError() << "refers to a dense resource with no data";
      return failure();
    }
    ArrayRef<char> raw = blob->getData();
    size_t width = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
    if (raw.size() != static_cast<size_t>(n) * width) {
      op->emitOpError() << "dense resource holds " << raw.size()
                        << " bytes, expected " << n * width;
      return failure();
    }
    out.assign(raw.begin(), raw.end());
    return out;
  }
  op->emitOpError() << "has a constant kind codegen cannot read: " << attr;
  return failure();
}

class Lowering {
public:
  explicit Lowering(ModuleOp module) : module(module) {}

  FailureOr<Plan> run(func::FuncOp fn) {
    plan.entry = fn.getSymName().str();
    Block& body = fn.getBody().front();
    for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
      std::string name = "arg" + std::to_string(i);
      if (auto attr = fn.getArgAttrOfType<StringAttr>(i, "mc.name"))
        name = attr.getValue().str();
      auto id = newBuffer(arg, name, fb::BufferKind::Arena);
      if (failed(id))
        return failure();
      plan.inputs.push_back({name, *id});
    }
    for (Operation& op : body) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        if (failed(lowerReturn(fn, ret)))
          return failure();
        continue;
      }
      if (failed(lowerOp(&op)))
        return failure();
    }
    return std::move(plan);
  }

private:
  FailureOr<uint32_t> newBuffer(Value v, std::string name,
                                fb::BufferKind kind) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    auto dtype = toDType(type.getElementType());
    if (failed(dtype)) {
      emitError(v.getLoc()) << "unsupported element type "
                            << type.getElementType();
      return failure();
    }
    PlanBuffer b;
    b.name = std::move(name);
    b.dtype = *dtype;
    b.shape.assign(type.getShape().begin(), type.getShape().end());
    b.kind = kind;
    plan.buffers.push_back(std::move(b));
    uint32_t id = plan.buffers.size() - 1;
    buffers[v] = id;
    return id;
  }

  std::string valueName(Value v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    OpPrintingFlags flags;
    v.printAsOperand(os, flags);
    return s;
  }

  FailureOr<uint32_t> constantBuffer(Value v, ElementsAttr value,
                                     std::string name, Operation* op) {
    auto bytes = constantBytes(value, op);
    if (failed(bytes))
      return failure();
    auto id = newBuffer(v, std::move(name), fb::BufferKind::Constant);
    if (failed(id))
      return failure();
    plan.buffers[*id].data = std::move(*bytes);
    return id;
  }

  uint32_t lookup(Value v) {
    auto it = buffers.find(v);
    if (it != buffers.end())
      return it->second;
    auto pending = pendingSplats.find(v);
    assert(pending != pendingSplats.end() && "operand lowered before use");
    return materializeSplat(v, pending->second);
  }

  PlanStep& addStep(fb::OpKind kind, Operation* op) {
    PlanStep s;
    s.kind = kind;
    s.location = locationString(op->getLoc());
    if (auto p = op->getAttrOfType<StringAttr>("mc.precision"))
      s.precision = p.getValue().str();
    if (auto r = op->getAttrOfType<StringAttr>("mc.precision_reason"))
      s.precisionReason = r.getValue().str();
    for (Value v : op->getOperands())
      s.inputs.push_back(lookup(v));
    plan.steps.push_back(std::move(s));
    return plan.steps.back();
  }

  LogicalResult withResult(PlanStep& step, Operation* op) {
    auto id = newBuffer(op->getResult(0), valueName(op->getResult(0)),
                        fb::BufferKind::Arena);
    if (failed(id))
      return failure();
    // `step` may dangle if plan.steps grew; re-fetch the last step.
    plan.steps.back().outputs.push_back(*id);
    (void)step;
    return success();
  }

  LogicalResult lowerOp(Operation* op) {
    using K = fb::OpKind;
    auto simple = [&](K kind) -> LogicalResult {
      PlanStep& s = addStep(kind, op);
      return withResult(s, op);
    };
    return llvm::TypeSwitch<Operation*, LogicalResult>(op)
        .Case<ml_program::GlobalLoadConstOp>([&](auto load) -> LogicalResult {
          auto global =
              SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
                  op, load.getGlobalAttr());
          if (!global)
            return op->emitOpError() << "reads an unknown global";
          auto value = llvm::dyn_cast_or_null<ElementsAttr>(
              global.getValueAttr());
          if (!value)
            return op->emitOpError() << "reads a global with no tensor value";
          // One data-section copy per parameter, however often it is read.
          auto it = globals.find(global.getSymNameAttr());
          if (it != globals.end()) {
            buffers[load.getResult()] = it->second;
            return success();
          }
          auto id = constantBuffer(load.getResult(), value,
                                   global.getSymName().str(), op);
          if (failed(id))
            return failure();
          globals[global.getSymNameAttr()] = *id;
          return success();
        })
        .Case<ml_program::GlobalLoadOp>([&](auto load) -> LogicalResult {
          auto id = stateBuffer(op, load.getGlobalAttr());
          if (failed(id))
            return failure();
          // Read in place: stores come after every read (checked at the
          // store), so the value is the state as the step began.
          buffers[load.getResult()] = *id;
          return success();
        })
        .Case<ml_program::GlobalStoreOp>([&](auto st) -> LogicalResult {
          auto id = stateBuffer(op, st.getGlobalAttr());
          if (failed(id))
            return failure();
          storedGlobals.insert(st.getGlobalAttr().getLeafReference());
          uint32_t src = lookup(st.getValue());
          if (src == *id)
            return success(); // storing the unchanged state
          PlanStep s;
          s.kind = fb::OpKind::Copy;
          s.location = locationString(op->getLoc());
          s.inputs.push_back(src);
          s.outputs.push_back(*id);
          plan.steps.push_back(std::move(s));
          return success();
        })
        .Case<ConstantOp>([&](ConstantOp c) -> LogicalResult {
          // A splat is stored as one element and broadcast when the step
          // runs: a few bytes in the file instead of a full tensor (the
          // optimizer's coefficients are splats of every parameter shape).
          auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
          auto type = llvm::cast<RankedTensorType>(c.getType());
          if (dense && dense.isSplat() && type.getNumElements() > 1)
            return lowerSplat(c, dense);
          return constantBuffer(c.getResult(), c.getValue(),
                                valueName(c.getResult()), op);
        })
        .Case<AddOp>([&](auto) { return simple(K::Add); })
        .Case<SubOp>([&](auto) { return simple(K::Sub); })
        .Case<MulOp>([&](auto) { return simple(K::Mul); })
        .Case<DivOp>([&](auto) { return simple(K::Div); })
        .Case<MaximumOp>([&](auto) { return simple(K::Maximum); })
        .Case<NegOp>([&](auto) { return simple(K::Neg); })
        .Case<ExpOp>([&](auto) { return simple(K::Exp); })
        .Case<LogOp>([&](auto) { return simple(K::Log); })
        .Case<TanhOp>([&](auto) { return simple(K::Tanh); })
        .Case<SigmoidOp>([&](auto) { return simple(K::Sigmoid); })
        .Case<ReluOp>([&](auto) { return simple(K::Relu); })
        .Case<SqrtOp>([&](auto) { return simple(K::Sqrt); })
        .Case<CastOp>([&](auto) { return simple(K::Cast); })
        .Case<BroadcastInDimOp>([&](BroadcastInDimOp b) -> LogicalResult {
          PlanStep& s = addStep(K::BroadcastInDim, op);
          s.ints.assign(b.getDims().begin(), b.getDims().end());
          return withResult(s, op);
        })
        .Case<TransposeOp>([&](TransposeOp t) -> LogicalResult {
          PlanStep& s = addStep(K::Transpose, op);
          s.ints.assign(t.getPermutation().begin(), t.getPermutation().end());
          return withResult(s, op);
        })
        .Case<ReshapeOp>([&](ReshapeOp r) -> LogicalResult {
          return lowerReshape(r);
        })
        .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(
            [&](auto r) -> LogicalResult {
              K kind = llvm::isa<ReduceSumOp>(op)    ? K::ReduceSum
                       : llvm::isa<ReduceMeanOp>(op) ? K::ReduceMean
                                                     : K::ReduceMax;
              PlanStep& s = addStep(kind, op);
              std::vector<int64_t> dims(r.getDims().begin(),
                                        r.getDims().end());
              std::sort(dims.begin(), dims.end());
              s.ints = std::move(dims);
              s.keepdim = r.getKeepdim();
              return withResult(s, op);
            })
        .Case<SoftmaxOp>([&](SoftmaxOp sm) -> LogicalResult {
          PlanStep& s = addStep(K::Softmax, op);
          s.axis = sm.getAxis();
          return withResult(s, op);
        })
        .Case<MatmulOp>([&](MatmulOp m) -> LogicalResult {
          PlanStep& s = addStep(K::MatMul, op);
          s.transposeA = m.getTransposeA();
          s.transposeB = m.getTransposeB();
          return withResult(s, op);
        })
        .Case<AbsOp>([&](auto) { return simple(K::Abs); })
        .Case<ErfOp>([&](auto) { return simple(K::Erf); })
        .Case<NotOp>([&](auto) { return simple(K::Not); })
        .Case<PowOp>([&](auto) { return simple(K::Pow); })
        .Case<MinimumOp>([&](auto) { return simple(K::Minimum); })
        .Case<SelectOp>([&](auto) { return simple(K::Select); })
        .Case<GeluOp>([&](GeluOp g) -> LogicalResult {
          PlanStep& s = addStep(K::Gelu, op);
          s.tanhApproximation = g.getTanhApproximation();
          return withResult(s, op);
        })
        .Case<ClampOp>([&](ClampOp c) -> LogicalResult {
          PlanStep& s = addStep(K::Clamp, op);
          s.minValue = c.getMin().convertToDouble();
          s.maxValue = c.getMax().convertToDouble();
          return withResult(s, op);
        })
        .Case<CompareOp>([&](CompareOp c) -> LogicalResult {
          PlanStep& s = addStep(K::Compare, op);
          s.direction = static_cast<fb::CompareDirection>(c.getDirection());
          return withResult(s, op);
        })
        .Case<LogSoftmaxOp>([&](LogSoftmaxOp l) -> LogicalResult {
          PlanStep& s = addStep(K::LogSoftmax, op);
          s.axis = l.getAxis();
          return withResult(s, op);
        })
        .Case<ReduceMinOp>([&](ReduceMinOp r) -> LogicalResult {
          PlanStep& s = addStep(K::ReduceMin, op);
          std::vector<int64_t> dims(r.getDims().begin(), r.getDims().end());
          std::sort(dims.begin(), dims.end());
          s.ints = std::move(dims);
          s.keepdim = r.getKeepdim();
          return withResult(s, op);
        })
        .Case<ConcatOp>([&](ConcatOp c) -> LogicalResult {
          PlanStep& s = addStep(K::Concat, op);
          s.axis = c.getAxis();
          return withResult(s, op);
        })
        .Case<SliceOp>([&](SliceOp sl) -> LogicalResult {
          PlanStep& s = addStep(K::Slice, op);
          s.start.assign(sl.getStart().begin(), sl.getStart().end());
          s.strides.assign(sl.getStrides().begin(), sl.getStrides().end());
          return withResult(s, op);
        })
        .Case<GatherOp>([&](GatherOp g) -> LogicalResult {
          PlanStep& s = addStep(K::Gather, op);
          s.axis = g.getAxis();
          return withResult(s, op);
        })
        .Case<PadOp>([&](PadOp p) -> LogicalResult {
          PlanStep& s = addStep(K::Pad, op);
          s.low.assign(p.getLow().begin(), p.getLow().end());
          s.high.assign(p.getHigh().begin(), p.getHigh().end());
          s.padValue = p.getValue().convertToDouble();
          return withResult(s, op);
        })
        .Case<Conv2dOp>([&](Conv2dOp c) -> LogicalResult {
          PlanStep& s = addStep(K::Conv2d, op);
          s.strides.assign(c.getStrides().begin(), c.getStrides().end());
          s.padding.assign(c.getPadding().begin(), c.getPadding().end());
          s.dilation.assign(c.getDilation().begin(), c.getDilation().end());
          s.groups = c.getGroups();
          return withResult(s, op);
        })
        .Case<MaxPool2dOp, AvgPool2dOp>([&](auto p) -> LogicalResult {
          bool isMax = llvm::isa<MaxPool2dOp>(op);
          PlanStep& s = addStep(isMax ? K::MaxPool2d : K::AvgPool2d, op);
          s.kernel.assign(p.getKernel().begin(), p.getKernel().end());
          s.strides.assign(p.getStrides().begin(), p.getStrides().end());
          s.padding.assign(p.getPadding().begin(), p.getPadding().end());
          s.dilation.assign(p.getDilation().begin(), p.getDilation().end());
          if (auto avg = llvm::dyn_cast<AvgPool2dOp>(op))
            s.countIncludePad = avg.getCountIncludePad();
          return withResult(s, op);
        })
        .Case<BatchNormOp>([&](BatchNormOp b) -> LogicalResult {
          PlanStep& s = addStep(K::BatchNorm, op);
          s.epsilon = b.getEpsilon().convertToDouble();
          s.axis = b.getFeatureAxis();
          return withResult(s, op);
        })
        .Case<LayerNormOp>([&](LayerNormOp l) -> LogicalResult {
          PlanStep& s = addStep(K::LayerNorm, op);
          s.epsilon = l.getEpsilon().convertToDouble();
          s.axis = l.getAxis();
          return withResult(s, op);
        })
        .Default([&](Operation*) -> LogicalResult {
          return op->emitOpError()
                 << "has no lowering to the cpu target (run "
                    "--mc-verify-contract for the rules)";
        });
  }

  /// A splat constant: a rank-0 constant (shared by every splat of the same
  /// value and element type), broadcast by a step placed right before the
  /// first use (constants sit at the top of the function; broadcasting them
  /// there would keep every temporary alive for the whole step).
  LogicalResult lowerSplat(ConstantOp c, DenseElementsAttr dense) {
    auto type = llvm::cast<RankedTensorType>(c.getType());
    auto scalarType = RankedTensorType::get({}, type.getElementType());
    DenseElementsAttr scalar = dense.resizeSplat(scalarType);
    uint32_t src;
    auto it = splats.find(scalar);
    if (it != splats.end()) {
      src = it->second;
    } else {
      auto bytes = constantBytes(scalar, c);
      if (failed(bytes))
        return failure();
      PlanBuffer b;
      b.name = valueName(c.getResult()) + ".splat";
      b.dtype = *toDType(type.getElementType());
      b.kind = fb::BufferKind::Constant;
      b.data = std::move(*bytes);
      plan.buffers.push_back(std::move(b));
      src = plan.buffers.size() - 1;
      splats[scalar] = src;
    }
    pendingSplats[c.getResult()] = src;
    return success();
  }

  /// Emits the broadcast of a pending splat (see lowerSplat).
  uint32_t materializeSplat(Value v, uint32_t scalar) {
    PlanStep s;
    s.kind = fb::OpKind::BroadcastInDim;
    s.location = locationString(v.getLoc());
    s.inputs.push_back(scalar);
    auto id = newBuffer(v, valueName(v), fb::BufferKind::Arena);
    assert(succeeded(id) && "splat of a supported type");
    s.outputs.push_back(*id);
    plan.steps.push_back(std::move(s));
    pendingSplats.erase(v);
    return *id;
  }

  /// The State buffer of a mutable global (one per global), holding its
  /// initial value. Reading a global after storing it in the same step is
  /// refused: loads are read in place, so they must all come first.
  FailureOr<uint32_t> stateBuffer(Operation* op, SymbolRefAttr ref) {
    StringAttr name = ref.getLeafReference();
    if (llvm::isa<ml_program::GlobalLoadOp>(op) &&
        storedGlobals.contains(name))
      return op->emitOpError()
             << "reads @" << name.getValue()
             << " after the step stored it; codegen needs every read of a "
                "global before its store";
    auto it = states.find(name);
    if (it != states.end())
      return it->second;
    auto global =
        SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(op, ref);
    if (!global)
      return op->emitOpError() << "refers to an unknown global " << ref;
    auto value = llvm::dyn_cast_or_null<ElementsAttr>(global.getValueAttr());
    if (!value)
      return global.emitOpError() << "has no initial tensor value";
    auto bytes = constantBytes(value, global);
    if (failed(bytes))
      return failure();
    auto type = llvm::cast<RankedTensorType>(value.getType());
    auto dtype = toDType(type.getElementType());
    if (failed(dtype))
      return global.emitOpError() << "has an unsupported element type";
    PlanBuffer b;
    b.name = name.str();
    b.dtype = *dtype;
    b.shape.assign(type.getShape().begin(), type.getShape().end());
    b.kind = fb::BufferKind::State;
    b.data = std::move(*bytes);
    plan.buffers.push_back(std::move(b));
    uint32_t id = plan.buffers.size() - 1;
    states[name] = id;
    return id;
  }

  /// A reshape of an arena buffer is a view (no copy); of a constant, it is
  /// a constant with the new shape sharing nothing (constants are small
  /// enough and immutable, so a copy in the data section is simplest).
  LogicalResult lowerReshape(ReshapeOp r) {
    uint32_t src = lookup(r.getInput());
    if (plan.buffers[src].kind != fb::BufferKind::Arena) {
      // Of a constant or a state buffer: a reshaped copy (state changes
      // between steps, so a copy taken now is what the op means).
      if (plan.buffers[src].kind == fb::BufferKind::State) {
        PlanStep& s = addStep(fb::OpKind::Copy, r);
        return withResult(s, r);
      }
      std::vector<uint8_t> data = plan.buffers[src].data;
      auto id = newBuffer(r.getResult(), valueName(r.getResult()),
                          fb::BufferKind::Constant);
      if (failed(id))
        return failure();
      plan.buffers[*id].data = std::move(data);
      return success();
    }
    int64_t root = plan.buffers[src].aliasOf >= 0 ? plan.buffers[src].aliasOf
                                                  : static_cast<int64_t>(src);
    auto id = newBuffer(r.getResult(), valueName(r.getResult()),
                        fb::BufferKind::Arena);
    if (failed(id))
      return failure();
    plan.buffers[*id].aliasOf = root;
    return success();
  }

  /// Outputs are arena buffers of their own, so the runtime can hand them
  /// out after the run: an output that is an input, a constant, a view or
  /// another output gets a Copy step.
  LogicalResult lowerReturn(func::FuncOp fn, func::ReturnOp ret) {
    llvm::DenseSet<uint32_t> used;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      std::string name = "output" + std::to_string(i);
      if (auto attr = fn.getResultAttrOfType<StringAttr>(i, "mc.name"))
        name = attr.getValue().str();
      uint32_t id = lookup(v);
      const PlanBuffer& b = plan.buffers[id];
      bool isInput = llvm::any_of(
          plan.inputs, [&](const PlanSignature& s) { return s.buffer == id; });
      if (b.kind != fb::BufferKind::Arena || b.aliasOf >= 0 || isInput ||
          used.contains(id)) {
        PlanStep s;
        s.kind = fb::OpKind::Copy;
        s.location = locationString(ret.getLoc());
        s.inputs.push_back(id);
        PlanBuffer out;
        out.name = name;
        out.dtype = b.dtype;
        out.shape = b.shape;
        out.kind = fb::BufferKind::Arena;
        plan.buffers.push_back(std::move(out));
        id = plan.buffers.size() - 1;
        s.outputs.push_back(id);
        plan.steps.push_back(std::move(s));
      }
      used.insert(id);
      plan.outputs.push_back({name, id});
    }
    return success();
  }

  ModuleOp module;
  Plan plan;
  llvm::DenseMap<Value, uint32_t> buffers;
  llvm::DenseMap<Attribute, uint32_t> globals;
  llvm::DenseMap<StringAttr, uint32_t> states;
  llvm::DenseMap<Attribute, uint32_t> splats;
  llvm::DenseMap<Value, uint32_t> pendingSplats;
  llvm::DenseSet<StringAttr> storedGlobals;
};

} // namespace

/// Drops buffers nothing reads or writes (a parameter whose only use was a
/// reshape, which copied it) and renumbers the rest, so no weight is stored
/// twice and the artifact lists only live buffers.
static void pruneUnusedBuffers(Plan& plan) {
  std::vector<bool> used(plan.buffers.size(), false);
  for (const PlanStep& s : plan.steps) {
    for (uint32_t i : s.inputs)
      used[i] = true;
    for (uint32_t i : s.outputs)
      used[i] = true;
  }
  for (const PlanSignature& s : plan.inputs)
    used[s.buffer] = true;
  for (const PlanSignature& s : plan.outputs)
    used[s.buffer] = true;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (used[i] && plan.buffers[i].aliasOf >= 0)
      used[plan.buffers[i].aliasOf] = true;
  std::vector<uint32_t> remap(plan.buffers.size(), 0);
  std::vector<PlanBuffer> kept;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    if (!used[i])
      continue;
    remap[i] = kept.size();
    kept.push_back(std::move(plan.buffers[i]));
  }
  for (PlanBuffer& b : kept)
    if (b.aliasOf >= 0)
      b.aliasOf = remap[b.aliasOf];
  for (PlanStep& s : plan.steps) {
    for (uint32_t& i : s.inputs)
      i = remap[i];
    for (uint32_t& i : s.outputs)
      i = remap[i];
  }
  for (PlanSignature& s : plan.inputs)
    s.buffer = remap[s.buffer];
  for (PlanSignature& s : plan.outputs)
    s.buffer = remap[s.buffer];
  plan.buffers = std::move(kept);
}

FailureOr<Plan> lowerToPlan(ModuleOp module, StringRef entry) {
  auto fn = llvm::dyn_cast_or_null<func::FuncOp>(findEntryFunction(module, entry));
  if (!fn)
    return failure();
  FailureOr<Plan> plan = Lowering(module).run(fn);
  if (succeeded(plan))
    pruneUnusedBuffers(*plan);
  return plan;
}

std::string formatPlan(const Plan& plan) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto shapeOf = [](const PlanBuffer& b) {
    std::string r = std::string(rt::dtypeName(b.dtype)) + "[";
    for (size_t i = 0; i < b.shape.size(); ++i)
      r += (i ? ", " : "") + std::to_string(b.shape[i]);
    return r + "]";
  };
  os << "plan @" << plan.entry << " (targets:";
  for (auto& t : plan.targets)
    os << " " << t;
  os << "), arena " << plan.arenaSize << " bytes\n";
  os << "buffers:\n";
  for (auto [i, b] : llvm::enumerate(plan.buffers)) {
    os << "  #" << i << " " << shapeOf(b) << " "
       << (b.kind == fb::BufferKind::Constant ? "const"
           : b.kind == fb::BufferKind::State  ? "state"
                                              : "arena")
       << "+"
       << b.offset << " (" << b.byteSize() << " B)";
    if (b.aliasOf >= 0)
      os << " view of #" << b.aliasOf;
    if (!b.name.empty())
      os << "  " << b.name;
    os << "\n";
  }
  os << "inputs:";
  for (auto& in : plan.inputs)
    os << " " << in.name << "=#" << in.buffer;
  os << "\noutputs:";
  for (auto& out : plan.outputs)
    os << " " << out.name << "=#" << out.buffer;
  os << "\nsteps:\n";
  for (auto [i, st] : llvm::enumerate(plan.steps)) {
    os << "  " << i << ": " << fb::EnumNameOpKind(st.kind) << " (";
    for (size_t k = 0; k < st.inputs.size(); ++k)
      os << (k ? ", " : "") << "#" << st.inputs[k];
    os << ") -> (";
    for (size_t k = 0; k < st.outputs.size(); ++k)
      os << (k ? ", " : "") << "#" << st.outputs[k];
    os << ")";
    if (!st.ints.empty()) {
      os << " [";
      for (size_t k = 0; k < st.ints.size(); ++k)
        os << (k ? ", " : "") << st.ints[k];
      os << "]";
    }
    if (st.transposeA)
      os << " transpose_a";
    if (st.transposeB)
      os << " transpose_b";
    if (st.keepdim)
      os << " keepdim";
    auto list = [&](const char* name, const std::vector<int64_t>& v) {
      if (v.empty())
        return;
      os << " " << name << "=[";
      for (size_t k = 0; k < v.size(); ++k)
        os << (k ? ", " : "") << v[k];
      os << "]";
    };
    switch (st.kind) {
    case fb::OpKind::Softmax:
    case fb::OpKind::LogSoftmax:
    case fb::OpKind::Concat:
    case fb::OpKind::Gather:
      os << " axis=" << st.axis;
      break;
    case fb::OpKind::BatchNorm:
    case fb::OpKind::LayerNorm:
      os << " axis=" << st.axis << " epsilon=" << st.epsilon;
      break;
    case fb::OpKind::Clamp:
      os << " min=" << st.minValue << " max=" << st.maxValue;
      break;
    case fb::OpKind::Compare:
      os << " " << fb::EnumNameCompareDirection(st.direction);
      break;
    case fb::OpKind::Gelu:
      if (st.tanhApproximation)
        os << " tanh";
      break;
    case fb::OpKind::Conv2d:
      os << " groups=" << st.groups;
      break;
    case fb::OpKind::AvgPool2d:
      if (st.countIncludePad)
        os << " count_include_pad";
      break;
    case fb::OpKind::Pad:
      os << " value=" << st.padValue;
      break;
    default:
      break;
    }
    if (!st.precision.empty())
      os << " {" << st.precision << ": " << st.precisionReason << "}";
    list("start", st.start);
    list("kernel", st.kernel);
    list("strides", st.strides);
    list("padding", st.padding);
    list("dilation", st.dilation);
    list("low", st.low);
    list("high", st.high);
    os << "\n";
  }
  return s;
}

} // namespace mc::codegen

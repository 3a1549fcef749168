// Lowering of mc to the executable Plan (CPU target): one runtime step per
// op, weights into the data section, reshapes as views.
#include "codegen/MCToPlan.h"

#include "ir/Batch.h"
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"
#include "passes/Passes.h"
#include "modelc/shapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>

using namespace mlir;

namespace mc::codegen {
namespace {

std::string locationString(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}


class Lowering {
public:
  explicit Lowering(ModuleOp module) : module(module) {}

  FailureOr<Plan> run(func::FuncOp fn) {
    plan.entry = fn.getSymName().str();
    if (auto bounds = getBatchBounds(fn))
      plan.batch = PlanBatch{bounds->min, bounds->max, bounds->opt};
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
    auto dtype = elementDType(type.getElementType());
    if (failed(dtype)) {
      emitError(v.getLoc()) << "unsupported element type "
                            << type.getElementType();
      return failure();
    }
    PlanBuffer b;
    b.name = std::move(name);
    b.dtype = *dtype;
    b.kind = kind;
    // A `?` is the batch: the buffer is planned at its upper bound and
    // records which dims scale with it.
    SmallVector<int64_t> symbolic = symbolicShape(type);
    for (int64_t d : symbolic) {
      bool dynamic = d < 0;
      if (dynamic && !plan.batch.dynamic()) {
        emitError(v.getLoc()) << "value of type " << type
                              << " has a dynamic dim, but the function has "
                                 "no batch bounds (mc.batch)";
        return failure();
      }
      if (dynamic && kind != fb::BufferKind::Arena) {
        emitError(v.getLoc()) << "constant of type " << type
                              << " cannot depend on the batch";
        return failure();
      }
    }
    shapeAtMax(type, &b.shape, &b.batchScale);
    plan.buffers.push_back(std::move(b));
    uint32_t id = plan.buffers.size() - 1;
    buffers[v] = id;
    return id;
  }

  /// A type's shape at the batch's upper bound, and which dims scale with
  /// the batch (empty when every dim is static): what buffers and region
  /// values record.
  void shapeAtMax(RankedTensorType type, std::vector<int64_t>* shape,
                  std::vector<int64_t>* scale) const {
    for (int64_t d : symbolicShape(type)) {
      shape->push_back(d < 0 ? -d * plan.batch.max : d);
      if (!type.hasStaticShape())
        scale->push_back(d < 0 ? -d : 0);
    }
  }

  /// The value's SSA name ("%3"). One AsmState for the whole function:
  /// printAsOperand without one renumbers the function on every call,
  /// which made lowering quadratic in the number of ops.
  std::string valueName(Value v) {
    if (!asmState)
      asmState = std::make_unique<AsmState>(
          v.getParentRegion()->getParentOfType<func::FuncOp>());
    std::string s;
    llvm::raw_string_ostream os(s);
    v.printAsOperand(os, *asmState);
    return s;
  }
  std::unique_ptr<AsmState> asmState;

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

  /// A constant's bytes for the plan: borrowed from the attribute where it
  /// holds them in the runtime's layout (the weights are not copied; the
  /// module outlives the plan), else converted.
  static FailureOr<PlanBytes> constantBytes(ElementsAttr value, Operation* op) {
    if (auto view = elementsBytesView(value))
      return PlanBytes::borrow(view->data(), view->size());
    auto bytes = elementsBytes(value, op);
    if (failed(bytes))
      return failure();
    return PlanBytes(std::move(*bytes));
  }

  uint32_t lookup(Value v) {
    auto it = buffers.find(v);
    if (it != buffers.end())
      return it->second;
    auto pending = pendingSplats.find(v);
    assert(pending != pendingSplats.end() && "operand lowered before use");
    return materializeSplat(v, pending->second);
  }

  PlanStep& addStep(rt::OpId id, Operation* op) {
    PlanStep s;
    s.op = id;
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
          loadsOf[load.getGlobalAttr().getLeafReference()].push_back(load);
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
          if (failed(snapshotStaleReads(st, *id)))
            return failure();
          PlanStep s;
          s.op = rt::OpId::Copy;
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
        .Case<ReshapeOp>([&](ReshapeOp r) -> LogicalResult {
          return lowerReshape(r);
        })
        .Case<FusedOp>([&](FusedOp f) -> LogicalResult {
          return lowerFused(f);
        })
        .Default([&](Operation*) -> LogicalResult {
          // Every other mc op is one step: its registry identity and its
          // attributes in the artifact's generic form.
          rt::OpId id;
          if (!llvm::isa<MCDialect>(op->getDialect()) ||
              !rt::findOp(op->getName().getStringRef(), &id) ||
              !rt::opInfo(id).isStep)
            return op->emitOpError()
                   << "has no lowering to runtime steps (run "
                      "--mc-verify-contract for the rules)";
          auto attrs = registryAttributes(op, rt::opInfo(id));
          if (failed(attrs))
            return failure();
          // The artifact stores reduce dims sorted (its canonical form, which
          // the verifier checks); the dialect accepts any order.
          bool isReduce = rt::isReduction(id);
          for (rt::OpAttr& a : attrs->all())
            if (isReduce && a.name == "dims")
              std::sort(a.ints.begin(), a.ints.end());
          PlanStep& s = addStep(id, op);
          s.attrs = std::move(*attrs);
          return withResult(s, op);
        });
  }

  /// A fused region: one step whose body lists the region's ops (schema
  /// 2.2, Step.body). A splat constant input read only elementwise (or
  /// broadcast) is passed as its rank-0 scalar: the device broadcasts it,
  /// no full tensor is made. One that a matmul, a conv or a view reads (a
  /// constant weight of one value) is made in full first.
  LogicalResult lowerFused(FusedOp f) {
    PlanStep s;
    s.op = rt::OpId::Fused;
    s.location = locationString(f.getLoc());
    auto stepAttrs = registryAttributes(f, rt::opInfo(rt::OpId::Fused));
    if (failed(stepAttrs))
      return failure();
    s.attrs = std::move(*stepAttrs);
    Block& body = f.getBody().front();
    auto readElementwise = [&](BlockArgument arg) {
      return llvm::all_of(arg.getUsers(), [](Operation* user) {
        rt::OpId id;
        return rt::findOp(user->getName().getStringRef(), &id) &&
               (id == rt::OpId::BroadcastInDim || rt::opInfo(id).fusible);
      });
    };
    std::vector<bool> scalar;
    for (auto [i, v] : llvm::enumerate(f.getInputs())) {
      auto pending = pendingSplats.find(v);
      scalar.push_back(pending != pendingSplats.end() &&
                       readElementwise(body.getArgument(unsigned(i))));
      s.inputs.push_back(scalar.back() ? pending->second : lookup(v));
    }
    llvm::DenseMap<Value, uint32_t> number;
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      number[arg] = i;
    uint32_t next = body.getNumArguments();
    for (Operation& op : body.without_terminator()) {
      rt::OpId id;
      if (!rt::findOp(op.getName().getStringRef(), &id))
        return op.emitOpError() << "is not in the op registry";
      auto attrs = registryAttributes(&op, rt::opInfo(id));
      if (failed(attrs))
        return failure();
      auto dtype = elementDType(
          llvm::cast<RankedTensorType>(op.getResult(0).getType())
              .getElementType());
      if (failed(dtype))
        return op.emitOpError() << "has an unsupported element type";
      PlanRegionOp r;
      r.op = id;
      r.attrs = std::move(*attrs);
      r.dtype = *dtype;
      r.location = locationString(op.getLoc());
      for (Value v : op.getOperands())
        r.operands.push_back(number.lookup(v));
      // A broadcast of a splat is a broadcast of its scalar.
      if (id == rt::OpId::BroadcastInDim && r.operands[0] < scalar.size() &&
          scalar[r.operands[0]])
        for (rt::OpAttr& a : r.attrs.all())
          if (a.name == "dims")
            a.ints.clear();
      if (auto p = op.getAttrOfType<StringAttr>("mc.precision"))
        r.precision = p.getValue().str();
      if (auto why = op.getAttrOfType<StringAttr>("mc.precision_reason"))
        r.precisionReason = why.getValue().str();
      shapeAtMax(llvm::cast<RankedTensorType>(op.getResult(0).getType()),
                 &r.shape, &r.batchScale);
      number[op.getResult(0)] = next++;
      s.body.push_back(std::move(r));
    }
    auto yield = llvm::cast<YieldOp>(body.getTerminator());
    if (s.body.empty() ||
        number.lookup(yield.getValues().front()) != next - 1)
      return f.emitOpError()
             << "must yield the result of its last op (as mc-fuse makes it)";
    for (Value v : yield.getValues().drop_front())
      s.extraOutputs.push_back(number.lookup(v));
    plan.steps.push_back(std::move(s));
    for (Value r : f.getResults()) {
      auto id = newBuffer(r, valueName(r), fb::BufferKind::Arena);
      if (failed(id))
        return failure();
      plan.steps.back().outputs.push_back(*id);
    }
    return success();
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
      auto bytes = elementsBytes(scalar, c);
      if (failed(bytes))
        return failure();
      PlanBuffer b;
      b.name = valueName(c.getResult()) + ".splat";
      b.dtype = *elementDType(type.getElementType());
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
    s.op = rt::OpId::BroadcastInDim;
    s.location = locationString(v.getLoc());
    s.inputs.push_back(scalar);
    s.attrs.all().push_back(rt::OpAttr::list("dims", {}));
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
    auto dtype = elementDType(type.getElementType());
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

  /// Loads read a global's State buffer in place, so a loaded value used
  /// after the global's store would read the stored value. Before the
  /// store, such a value is copied to the arena once, and its later
  /// readers read the copy: the value is the state as the step began, as
  /// the IR says (`%w = load @w; store @w = f(%w); use(%w)`).
  LogicalResult snapshotStaleReads(ml_program::GlobalStoreOp st,
                                   uint32_t state) {
    Block* block = st->getBlock();
    auto usedAfterStore = [&](Value v) {
      for (Operation* user : v.getUsers()) {
        Operation* at = block->findAncestorOpInBlock(*user);
        if (at && st->isBeforeInBlock(at))
          return true;
      }
      return false;
    };
    StringAttr name = st.getGlobalAttr().getLeafReference();
    std::optional<uint32_t> copy;
    // The loads lowered so far, all before the store (lowering follows the
    // block), in order: the first one used after the store names the copy.
    for (ml_program::GlobalLoadOp load : loadsOf[name]) {
      if (lookup(load.getResult()) != state ||
          !usedAfterStore(load.getResult()))
        continue;
      if (!copy) {
        PlanStep s;
        s.op = rt::OpId::Copy;
        s.location = locationString(load->getLoc());
        s.inputs.push_back(state);
        auto id = newBuffer(load.getResult(),
                            valueName(load.getResult()) + " (before @" +
                                name.getValue().str() + "'s store)",
                            fb::BufferKind::Arena);
        if (failed(id))
          return failure();
        s.outputs.push_back(*id);
        plan.steps.push_back(std::move(s));
        copy = *id;
      }
      buffers[load.getResult()] = *copy;
    }
    return success();
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
        PlanStep& s = addStep(rt::OpId::Copy, r);
        return withResult(s, r);
      }
      PlanBytes data = plan.buffers[src].data; // (shared, not copied)
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
        s.op = rt::OpId::Copy;
        s.location = locationString(ret.getLoc());
        s.inputs.push_back(id);
        PlanBuffer out;
        out.name = name;
        out.dtype = b.dtype;
        out.shape = b.shape;
        out.batchScale = b.batchScale;
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
  /// Each mutable global's loads, in the order they were lowered.
  llvm::DenseMap<StringAttr, SmallVector<ml_program::GlobalLoadOp>> loadsOf;
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

/// Whether step `s` may write a State buffer: an elementwise op or an
/// elementwise region (the verifier's rule, docs/artifact-format.md).
static bool writesStateElementwise(const PlanStep& s) {
  if (s.op == rt::OpId::Fused)
    return !s.body.empty() &&
           rt::isElementwiseRegion(s.attrs.getBool("attention"),
                                   s.body.front().op, s.body.back().op);
  return rt::opInfo(s.op).fusible && s.op != rt::OpId::BroadcastInDim;
}

/// A global_store lowers to a Copy of the stored value into its State
/// buffer. Where the value is computed by one elementwise step, that step
/// writes the State buffer itself and the Copy goes: an optimizer's update
/// of a parameter (and of its moments) runs in place, as PyTorch's
/// optimizers do, instead of into the arena and then copied (AdamW on a
/// 784-1024-1024-10 MLP: 19 copies of a 67-step training step, 6% of its
/// time on one CPU core). Conditions, each needed for the same result:
///   - the value's buffer (`src`) is an arena buffer of the State buffer's
///     type and shape that only this step writes, no view of it exists,
///     and it is not a graph input or output;
///   - no step after the producer and before the Copy reads the State
///     buffer (it would see the new value early), and no step but the
///     Copy writes it;
///   - if the producer reads the State buffer (an update in place), it
///     reads it element for element: not as a cast's input, and in a region
///     not through a broadcast or a view.
static void writeStoresInPlace(Plan& plan) {
  auto isSignature = [&](uint32_t b) {
    for (const PlanSignature& s : plan.inputs)
      if (s.buffer == b)
        return true;
    for (const PlanSignature& s : plan.outputs)
      if (s.buffer == b)
        return true;
    return false;
  };
  for (size_t c = 0; c < plan.steps.size(); ++c) {
    const PlanStep& copy = plan.steps[c];
    if (copy.op != rt::OpId::Copy || copy.inputs.size() != 1 ||
        copy.outputs.size() != 1)
      continue;
    uint32_t src = copy.inputs[0], dst = copy.outputs[0];
    const PlanBuffer& sb = plan.buffers[src];
    const PlanBuffer& db = plan.buffers[dst];
    if (db.kind != fb::BufferKind::State || sb.kind != fb::BufferKind::Arena ||
        sb.aliasOf >= 0 || sb.dtype != db.dtype || sb.shape != db.shape ||
        !sb.batchScale.empty() || isSignature(src))
      continue;
    bool viewed = false;
    for (const PlanBuffer& b : plan.buffers)
      viewed |= b.aliasOf == int64_t(src);
    // The one step before the Copy that writes src.
    size_t producer = c, writers = 0;
    for (size_t k = 0; k < plan.steps.size(); ++k)
      for (uint32_t o : plan.steps[k].outputs)
        if (o == src) {
          ++writers;
          producer = k;
        }
    if (viewed || writers != 1 || producer >= c ||
        (plan.steps[producer].outputs.size() != 1 &&
         plan.steps[producer].op != rt::OpId::Fused) ||
        !writesStateElementwise(plan.steps[producer]))
      continue;
    // The Copy is the State buffer's only writer: a later store would
    // change what src's readers after it see.
    size_t dstWriters = 0;
    for (const PlanStep& st : plan.steps)
      for (uint32_t o : st.outputs)
        dstWriters += o == dst;
    bool touched = dstWriters != 1;
    for (size_t k = producer + 1; k < c; ++k) {
      for (uint32_t b : plan.steps[k].inputs)
        touched |= b == dst;
      for (uint32_t b : plan.steps[k].outputs)
        touched |= b == dst;
    }
    const PlanStep& p = plan.steps[producer];
    for (size_t k = 0; k < p.inputs.size(); ++k) {
      if (p.inputs[k] != dst)
        continue;
      if (p.op == rt::OpId::Cast)
        touched = true;
      if (p.op == rt::OpId::Fused)
        for (const PlanRegionOp& r : p.body)
          if (r.op == rt::OpId::BroadcastInDim || rt::shapes::isViewOp(r.op))
            for (uint32_t v : r.operands)
              touched |= v == k;
    }
    if (touched)
      continue;
    // The producer writes the State buffer; src's readers read it there.
    for (size_t k = producer; k < plan.steps.size(); ++k) {
      for (uint32_t& b : plan.steps[k].inputs)
        if (b == src)
          b = dst;
      for (uint32_t& b : plan.steps[k].outputs)
        if (b == src)
          b = dst;
    }
    plan.steps.erase(plan.steps.begin() + c);
    --c;
  }
}

FailureOr<Plan> lowerToPlan(ModuleOp module, StringRef entry) {
  auto fn = llvm::dyn_cast_or_null<func::FuncOp>(findEntryFunction(module, entry));
  if (!fn)
    return failure();
  FailureOr<Plan> plan = Lowering(module).run(fn);
  if (succeeded(plan)) {
    writeStoresInPlace(*plan);
    pruneUnusedBuffers(*plan);
  }
  return plan;
}

std::string formatPlan(const Plan& plan) {
  std::string s;
  llvm::raw_string_ostream os(s);
  // A dim of the batch prints as "?" (its size at the upper bound is
  // what the arena holds).
  auto shapeOf = [](const PlanBuffer& b) {
    std::string r = std::string(rt::dtypeName(b.dtype)) + "[";
    for (size_t i = 0; i < b.shape.size(); ++i) {
      int64_t scale = i < b.batchScale.size() ? b.batchScale[i] : 0;
      r += (i ? ", " : "") +
           (scale ? (scale == 1 ? "" : std::to_string(scale) + "*") +
                        std::string("?")
                  : std::to_string(b.shape[i]));
    }
    return r + "]";
  };
  os << "plan @" << plan.entry << " (targets:";
  for (auto& t : plan.targets)
    os << " " << t;
  os << "), arena " << plan.arenaSize << " bytes";
  if (plan.batch.dynamic())
    os << ", batch " << plan.batch.min << ".." << plan.batch.max << " (opt "
       << plan.batch.opt << ")";
  os << "\n";
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
  // Attributes as MLIR prints them: unit attributes by name when set.
  auto attrText = [](const rt::OpAttrs& list) {
    std::string attrs;
    for (const rt::OpAttr& a : list.all()) {
      std::string v;
      switch (a.kind) {
      case rt::AttrKind::Bool:
        if (!a.i)
          continue;
        break;
      case rt::AttrKind::Int:
        v = std::to_string(a.i);
        break;
      case rt::AttrKind::Float: {
        llvm::raw_string_ostream vs(v);
        vs << a.f;
        break;
      }
      case rt::AttrKind::Ints:
        v = "[";
        for (size_t k = 0; k < a.ints.size(); ++k)
          v += (k ? ", " : "") + std::to_string(a.ints[k]);
        v += "]";
        break;
      }
      attrs += (attrs.empty() ? "" : ", ") + a.name +
               (v.empty() ? "" : " = " + v);
    }
    return attrs.empty() ? std::string() : " {" + attrs + "}";
  };
  os << "\nsteps:\n";
  for (auto [i, st] : llvm::enumerate(plan.steps)) {
    os << "  " << i << ": mc." << rt::opName(st.op) << " (";
    for (size_t k = 0; k < st.inputs.size(); ++k)
      os << (k ? ", " : "") << "#" << st.inputs[k];
    os << ") -> (";
    for (size_t k = 0; k < st.outputs.size(); ++k)
      os << (k ? ", " : "") << "#" << st.outputs[k];
    os << ")";
    os << attrText(st.attrs);

    if (st.executable >= 0) {
      os << " launch " << st.entry << " of executable " << st.executable;
      // Its units (blocks of perBlock each): static, or per batch.
      const rt::LaunchInfo& l = st.launch;
      os << " [units ";
      if (l.units || !l.unitsPerBatch)
        os << l.units << (l.unitsPerBatch ? " + " : "");
      if (l.unitsPerBatch)
        os << l.unitsPerBatch << "*batch";
      os << ", " << l.perBlock << " per block of " << l.block << "]";
    }
    if (!st.precision.empty())
      os << " {" << st.precision << ": " << st.precisionReason << "}";
    os << "\n";
    // A fused region: its ops on value numbers (%0.. the step's inputs).
    for (auto [k, r] : llvm::enumerate(st.body)) {
      os << "      %" << st.inputs.size() + k << " = mc." << rt::opName(r.op)
         << "(";
      for (size_t j = 0; j < r.operands.size(); ++j)
        os << (j ? ", " : "") << "%" << r.operands[j];
      os << ") : " << rt::dtypeName(r.dtype) << attrText(r.attrs);
      if (!r.precision.empty())
        os << " {" << r.precision << ": " << r.precisionReason << "}";
      os << "\n";
    }
    // More than one output: the values outputs 1.. hold.
    if (!st.extraOutputs.empty()) {
      os << "      outputs: %" << st.inputs.size() + st.body.size() - 1;
      for (uint32_t v : st.extraOutputs)
        os << ", %" << v;
      os << "\n";
    }
  }
  return s;
}

} // namespace mc::codegen

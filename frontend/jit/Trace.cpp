// The tracer: records eager ops through the TraceHook into an mc function.
#include "frontend/jit/Trace.h"
#include "frontend/Random.h"
#include "frontend/TraceHook.h"

#include "ir/Batch.h"
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"
#include "ir/SourceLimits.h"
#include "modelc/fileio.h"
#include "modelc/shapes.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

using namespace mlir;

namespace mc::jit {

struct TracedModule::Impl {
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
};

TracedModule::TracedModule() : impl_(std::make_unique<Impl>()) {}
TracedModule::~TracedModule() = default;
TracedModule::TracedModule(TracedModule&&) noexcept = default;
TracedModule& TracedModule::operator=(TracedModule&&) noexcept = default;

ModuleOp TracedModule::module() const { return *impl_->module; }
MLIRContext& TracedModule::context() const { return *impl_->context; }

std::string TracedModule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  impl_->module->print(os);
  return s;
}

void TracedModule::save(const std::string& path, bool bytecode) const {
  auto emit = [&](llvm::raw_ostream& os) -> bool {
    if (bytecode)
      return succeeded(writeBytecodeToFile(*impl_->module, os));
    // Keep locations: they name the module path each op was traced in.
    impl_->module->print(os, OpPrintingFlags().enableDebugInfo(
                                 /*enable=*/true, /*prettyForm=*/false));
    return true;
  };
  if (path == "-") {
    if (!emit(llvm::outs()))
      throw Error("cannot write bytecode to standard output");
    return;
  }
  // Whole or not at all: a full disk leaves no partial file behind.
  rt::Status st = rt::writeFileAtomically(
      path, [&](const std::string& tmp) -> rt::Status {
        std::error_code ec;
        llvm::raw_fd_ostream os(tmp, ec);
        if (ec)
          return rt::Status::error("cannot write '" + path +
                                   "': " + ec.message());
        bool ok = emit(os);
        os.close();
        if (os.has_error()) {
          std::string why = os.error().message();
          os.clear_error();
          return rt::Status::error("cannot write '" + path + "': " + why);
        }
        return ok ? rt::Status::ok()
                  : rt::Status::error("cannot write bytecode to '" + path +
                                      "'");
      });
  if (!st)
    throw Error(st.message());
}

std::unique_ptr<MLIRContext> createContext() {
  DialectRegistry registry;
  registry.insert<mc::MCDialect, func::FuncDialect,
                  ml_program::MLProgramDialect>();
  func::registerInlinerExtension(registry);
  auto ctx = std::make_unique<MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  // Diagnostics name the op and its location; dumping the op (for a
  // function, the whole model) would bury the message.
  ctx->printOpOnDiagnostic(false);
  return ctx;
}

TracedModule TracedModule::load(const std::string& path) {
  TracedModule tm;
  tm.impl_->context = createContext();
  std::string diagnostics;
  {
    llvm::raw_string_ostream os(diagnostics);
    // Shared: resource blobs point into the mapped file, not copies.
    auto sourceMgr = std::make_shared<llvm::SourceMgr>();
    SourceMgrDiagnosticHandler handler(*sourceMgr, tm.impl_->context.get(),
                                       os);
    std::string error;
    auto buffer = loadMlirSource(path, &error);
    if (!buffer)
      throw Error(error);
    bool bytecode = mlir::isBytecode(buffer->getMemBufferRef());
    ParserConfig parserConfig(tm.impl_->context.get());
    guardBytecodeReader(parserConfig, buffer->getBuffer());
    sourceMgr->AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
    tm.impl_->module = parseSourceFile<ModuleOp>(sourceMgr, parserConfig);
    if (tm.impl_->module && bytecode)
      if (auto where = findExcessAttributeNesting(*tm.impl_->module))
        throw Error(path + ": nesting deeper than " +
                    std::to_string(kMaxMlirNesting) + " in " + *where);
  }
  if (!tm.impl_->module)
    throw Error(diagnostics.empty() ? "cannot parse '" + path + "'"
                                    : diagnostics);
  return tm;
}

namespace {

Type elementType(MLIRContext* ctx, DType t) {
  Builder b(ctx);
  switch (t) {
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::I32:
    return b.getI32Type();
  case DType::I64:
    return b.getI64Type();
  case DType::I1:
    return b.getI1Type();
  }
  throw Error("unknown dtype");
}

RankedTensorType tensorType(MLIRContext* ctx, const Tensor& t) {
  return RankedTensorType::get(t.shape(), elementType(ctx, t.dtype()));
}

/// The tensor's bytes as an ElementsAttr of its type.
DenseElementsAttr denseValue(MLIRContext* ctx, const Tensor& t) {
  RankedTensorType type = tensorType(ctx, t);
  if (t.dtype() == DType::I1) {
    const uint8_t* p = t.data<uint8_t>();
    SmallVector<bool> bits(p, p + t.numel());
    return DenseElementsAttr::get(type, ArrayRef<bool>(bits));
  }
  ArrayRef<char> raw(static_cast<const char*>(t.rawData()), t.byteSize());
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

/// Tensors at least this large are shared with the module, not copied, when
/// TraceOptions::shareWeightStorage is set: below it, a copy is cheap and a
/// dense attribute is what folding patterns read.
constexpr size_t kSharedWeightBytes = 64 * 1024;

/// Whether every element of T has the same bytes (a splat is stored as one
/// element: no sharing needed).
bool isSplat(const Tensor& t) {
  size_t width = t.byteSize() / std::max<int64_t>(t.numel(), 1);
  const char* p = static_cast<const char*>(t.rawData());
  for (size_t at = width; at < t.byteSize(); at += width)
    if (std::memcmp(p, p + at, width) != 0)
      return false;
  return true;
}

/// The value of a parameter or constant named NAME: with SHARE (see
/// TraceOptions::shareWeightStorage), a large tensor's storage becomes a
/// dense resource blob the context keeps alive (it releases the storage
/// when it is destroyed); else a copy.
ElementsAttr constantValue(MLIRContext* ctx, const Tensor& t, bool share,
                           llvm::StringRef name) {
  if (!share || t.dtype() == DType::I1 || t.byteSize() < kSharedWeightBytes ||
      isSplat(t))
    return denseValue(ctx, t);
  std::shared_ptr<Storage> storage = t.impl()->storage;
  ArrayRef<char> data(static_cast<const char*>(t.rawData()), t.byteSize());
  // Storage is 64-byte aligned (Tensor.h).
  AsmResourceBlob blob(
      data, /*dataAlignment=*/64,
      [keep = std::move(storage)](void*, size_t, size_t) mutable {
        keep.reset();
      },
      /*dataIsMutable=*/false);
  return DenseResourceElementsAttr::get(tensorType(ctx, t), name,
                                        std::move(blob));
}

/// A tensor made outside the traced ops (captured as a constant): its
/// type and a hash of its bytes, to compare two runs' captures.
struct Captured {
  DType dtype = DType::F32;
  Shape shape;
  bool hasValues = false;
  uint64_t hash = 0;
  std::string text; // the value, for a one-element tensor
  /// Whether every row (index of dim 0) holds the same bytes, and the
  /// hash of one: a constant that is one row repeated along the batch
  /// (an expanded class token, a mask built for each sample alike).
  bool rowsEqual = false;
  uint64_t rowHash = 0;

  static uint64_t hashBytes(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (size_t i = 0; i < n; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }

  static Captured of(const Tensor& t) {
    Captured c;
    c.dtype = t.dtype();
    c.shape = t.shape();
    c.hasValues = t.hasValues();
    if (!c.hasValues)
      return c;
    const auto* p = static_cast<const unsigned char*>(t.rawData());
    c.hash = hashBytes(p, t.byteSize());
    if (t.rank() >= 1 && t.size(0) >= 1) {
      size_t row = t.byteSize() / size_t(t.size(0));
      c.rowsEqual = true;
      for (int64_t r = 1; c.rowsEqual && r < t.size(0); ++r)
        c.rowsEqual = std::memcmp(p, p + size_t(r) * row, row) == 0;
      if (c.rowsEqual)
        c.rowHash = hashBytes(p, row);
    }
    if (t.numel() == 1) {
      std::ostringstream os;
      os << t.toVector()[0];
      c.text = os.str();
    }
    return c;
  }
  bool operator==(const Captured& o) const {
    return dtype == o.dtype && shape == o.shape && hasValues == o.hasValues &&
           hash == o.hash;
  }
  std::string describe() const {
    if (!text.empty())
      return text;
    std::string s = std::string(rt::dtypeName(dtype)) + rt::shapeString(shape);
    return hasValues ? s : s + " (no values)";
  }
};

/// What one run of a traced function recorded: each op's kind, attributes
/// and result shape, in order, and the tensors it captured (operands no
/// traced op made: a literal, or a number such as the batch size made a
/// tensor). The dynamic-batch trace compares a run at another batch
/// against the real one.
class ShapeProbe : public TraceHook {
public:
  struct Entry {
    OpKind kind;
    rt::OpAttrs attrs;
    Shape output;
    /// Per operand: what it captured, if it was not a traced value.
    std::vector<std::optional<Captured>> captured;
  };
  std::vector<Entry> entries;
  /// The run's inputs and the parameters and buffers (never captures).
  void addTraced(const Tensor& t) { traced[t.impl()] = t.implPtr(); }
  void record(const OpRecord& r) override {
    Entry e{r.kind, r.attrs, r.output.shape(), {}};
    for (const Tensor& t : r.inputs) {
      auto it = traced.find(t.impl());
      // An expired entry: that tensor is gone and another one has its
      // address.
      bool isTraced = it != traced.end() && !it->second.expired();
      e.captured.push_back(isTraced ? std::nullopt
                                    : std::optional(Captured::of(t)));
    }
    addTraced(r.output);
    entries.push_back(std::move(e));
  }
  // Buffers are not updated by a probe run (a tracer's assign never is).
  void assign(const Tensor&, const Tensor&) override {}

private:
  std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> traced;
};

/// The dynamic batch of a trace: the batch of the real run (b1), and the
/// probe run at another batch (b2) it is compared with.
struct BatchTrace {
  int64_t b1 = 0, b2 = 0;
  const std::vector<ShapeProbe::Entry>* probe = nullptr;
};

class Tracer : public TraceHook {
public:
  Tracer(MLIRContext* ctx, ModuleOp module, func::FuncOp fn,
         const std::vector<std::pair<std::string, Tensor>>& params,
         const std::vector<std::pair<std::string, Tensor>>& buffers,
         const std::vector<std::pair<std::string, const nn::Module*>>& mods,
         bool shareWeightStorage)
      : ctx(ctx), module(module), builder(ctx),
        shareWeightStorage(shareWeightStorage) {
    builder.setInsertionPointToStart(&fn.getBody().front());
    for (auto* list : {&params, &buffers})
      for (auto& [name, t] : *list) {
        if (paramNames.count(t.impl()))
          continue; // shared parameter: its first name wins
        paramNames[t.impl()] = name;
        if (list == &buffers)
          bufferImpls.insert(t.impl());
        keepAlive.push_back(t);
      }
    for (auto& [path, m] : mods)
      modulePaths[m] = path.empty() ? m->typeName()
                                    : path + " (" + m->typeName() + ")";
  }

  void bind(const Tensor& t, Value v) {
    values[t.impl()] = v;
    keepAlive.push_back(t);
  }

  Value valueOf(const Tensor& t) {
    auto it = values.find(t.impl());
    if (it != values.end())
      return it->second;
    auto p = paramNames.find(t.impl());
    Value v;
    if (p != paramNames.end()) {
      v = loadParameter(p->second, t);
    } else {
      // A tensor made outside the traced ops (a literal, a scalar): a
      // constant captured with its current value, as torch.jit.trace does.
      v = mc::ConstantOp::create(
          builder, loc(),
          constantValue(ctx, t, shareWeightStorage, "constant"));
    }
    bind(t, v);
    return v;
  }

  void record(const OpRecord& r) override {
    if (failedMessage.size())
      return;
    SmallVector<Value> in;
    for (size_t k = 0; k < r.inputs.size(); ++k) {
      const Tensor& t = r.inputs[k];
      bool captured = batch.probe && !values.count(t.impl()) &&
                      !paramNames.count(t.impl());
      // Hashed once, for both checks.
      std::optional<Captured> here;
      if (captured) {
        here = Captured::of(t);
        if (Value v = batchRowsCapture(r, k, *here)) {
          in.push_back(v);
          continue;
        }
      }
      in.push_back(valueOf(t));
      if (captured)
        compareCapture(r, k, in.back(), *here);
    }
    Location l = loc();
    RankedTensorType resultType = tensorType(ctx, r.output);
    const rt::OpAttrs* attrs = &r.attrs;
    rt::OpAttrs batchAttrs;
    if (batch.probe) {
      if (failed(applyBatch(r, l, resultType, batchAttrs)))
        return;
      attrs = &batchAttrs;
    }
    // Every op by its registry entry: ODS names its attributes, so the
    // tracer has no per-op case.
    std::string error;
    Operation* op =
        buildRegistryOp(builder, l, r.kind, in, resultType, *attrs, &error);
    if (!op) {
      failedMessage = "cannot trace " + error;
      return;
    }
    if (batch.probe && failed(verifyWithBatch(op, r.kind, l)))
      return;
    Value out = op->getResult(0);
    if (out.getType() != resultType) {
      failedMessage = "traced op produced type mismatch";
      return;
    }
    bind(r.output, out);
  }

  /// With a dynamic batch: operand `k` of record `r`, a captured tensor of
  /// c times the batch rows (c * b1 here, c * b2 in the other run) that
  /// repeats one row, the same in both runs (an expanded class token, a
  /// causal mask repeated per sample, zeros_like of an expanded mask,
  /// folded to constants at import): that row as a constant, broadcast to
  /// the batch. Null where the capture is not such a tensor.
  Value batchRowsCapture(const OpRecord& r, size_t k, const Captured& here) {
    size_t index = recorded;
    if (index >= batch.probe->size() || (*batch.probe)[index].kind != r.kind)
      return Value();
    const auto& other = (*batch.probe)[index].captured;
    if (k >= other.size() || !other[k])
      return Value();
    const Tensor& t = r.inputs[k];
    const Captured& there = *other[k];
    if (!here.rowsEqual || !there.rowsEqual || here.rowHash != there.rowHash ||
        here.dtype != there.dtype || here.shape.size() != there.shape.size() ||
        !std::equal(here.shape.begin() + 1, here.shape.end(),
                    there.shape.begin() + 1))
      return Value();
    int64_t c = multipleOfBatch(here.shape[0], there.shape[0]);
    if (!c)
      return Value();
    Shape rowShape = t.shape();
    rowShape[0] = 1;
    Tensor row = Tensor::empty(rowShape, t.dtype());
    std::memcpy(row.rawData(), t.rawData(), row.byteSize());
    Value rowValue = mc::ConstantOp::create(
        builder, loc(), constantValue(ctx, row, false, "constant"));
    SmallVector<int64_t> dims(t.shape().begin(), t.shape().end());
    dims[0] = -c;
    rt::OpAttrs attrs;
    std::vector<int64_t> order;
    for (int64_t d = 0; d < t.rank(); ++d)
      order.push_back(d);
    attrs.set(rt::OpAttr::list("dims", order));
    std::string error;
    Operation* op = buildRegistryOp(
        builder, loc(), OpKind::BroadcastInDim, {rowValue},
        symbolicType(dims, llvm::cast<RankedTensorType>(rowValue.getType())
                               .getElementType()),
        attrs, &error);
    if (!op)
      return Value();
    bind(t, op->getResult(0));
    return op->getResult(0);
  }

  /// With a dynamic batch: operand `k` of record `r`, captured as constant
  /// `v`, against what the run at the other batch captured there. A
  /// capture that differs (the batch size as a number, a value read from
  /// the inputs) is noted: it is an error if it reaches a result (see
  /// checkBatchCaptures), and harmless where only shape arithmetic that
  /// folded away read it.
  void compareCapture(const OpRecord& r, size_t k, Value v,
                      const Captured& here) {
    size_t index = recorded; // applyBatch checks the op itself
    if (index >= batch.probe->size() || (*batch.probe)[index].kind != r.kind)
      return;
    const auto& other = (*batch.probe)[index].captured;
    if (k < other.size() && other[k] && *other[k] == here)
      return;
    std::string there = k < other.size() && other[k]
                            ? other[k]->describe()
                            : std::string("a traced value");
    batchCaptures.push_back({v.getDefiningOp(), here.describe() +
                                                    " at batch " +
                                                    std::to_string(batch.b1) +
                                                    ", " + there +
                                                    " at batch " +
                                                    std::to_string(batch.b2)});
  }

  /// Fails, naming the op, when a capture that differs between the batch
  /// sizes (compareCapture) reaches a result or a state update: the
  /// artifact would compute with the traced batch's value at every batch.
  void checkBatchCaptures(func::FuncOp fn) {
    if (batchCaptures.empty())
      return;
    // Live ops: the return, ops with effects, and what they read.
    llvm::DenseSet<Operation*> live;
    for (Operation& op : llvm::reverse(fn.getBody().front())) {
      bool isLive = op.hasTrait<OpTrait::IsTerminator>() ||
                    !isMemoryEffectFree(&op);
      for (Operation* user : op.getUsers())
        isLive |= live.count(user) > 0;
      if (isLive)
        live.insert(&op);
    }
    for (const auto& [constant, values] : batchCaptures) {
      if (!constant || !live.count(constant))
        continue;
      Operation* reader = constant;
      for (Operation* user : constant->getUsers())
        if (live.count(user)) {
          reader = user;
          break;
        }
      throw Error(
          "jit::trace: with a dynamic batch, " +
          reader->getName().getStringRef().str() + " at " +
          locationText(reader->getLoc()) +
          " reads a number made outside the traced ops that differs "
          "between batch sizes (" +
          values +
          "): the batch size used as a value (x.shape[0] or x.size(0) "
          "in arithmetic), or a value read from the inputs, would be "
          "fixed at the traced batch's; compute it with tensor ops (a "
          "mean instead of a sum divided by the batch), or compile with "
          "a static batch");
    }
  }

  /// The dynamic batch of record `r`: its result's dims that changed by
  /// exactly the batch between the two runs become `?`, and so does a
  /// slice limit at the batch. Fails, setting failedMessage, where the runs
  /// differ otherwise.
  LogicalResult applyBatch(const OpRecord& r, Location l,
                           RankedTensorType& resultType, rt::OpAttrs& attrs) {
    size_t index = recorded++;
    std::string where = std::string("mc.") + rt::opName(r.kind) + " (op " +
                        std::to_string(index) + " at " + locationText(l) +
                        ")";
    auto differ = [&](const std::string& what) {
      failedMessage = "with a dynamic batch, " + where + " " + what +
                      " at batch " + std::to_string(batch.b1) + " and " +
                      std::to_string(batch.b2) +
                      "; the traced function must run the same ops, with "
                      "the same attributes, at every batch size";
      return failure();
    };
    if (index >= batch.probe->size() ||
        (*batch.probe)[index].kind != r.kind)
      return differ("is not the op the run at the other batch size ran");
    const ShapeProbe::Entry& other = (*batch.probe)[index];
    Shape shape = r.output.shape();
    if (other.output.size() != shape.size())
      return differ("has results of different ranks");
    SmallVector<int64_t> dims(shape.begin(), shape.end());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == other.output[d])
        continue;
      // c times the batch in both runs: a dim of the batch (-c).
      int64_t c = multipleOfBatch(shape[d], other.output[d]);
      if (c) {
        dims[d] = -c;
        continue;
      }
      failedMessage =
          "with a dynamic batch, dimension " + std::to_string(d) +
          " of the result of " + where + " is " + std::to_string(shape[d]) +
          " at batch " + std::to_string(batch.b1) + " and " +
          std::to_string(other.output[d]) + " at batch " +
          std::to_string(batch.b2) +
          ": a dim may depend on the batch only as a multiple of it";
      return failure();
    }
    resultType = symbolicType(dims, resultType.getElementType());
    attrs = r.attrs;
    for (rt::OpAttr& a : attrs.all()) {
      const rt::OpAttr* o = other.attrs.find(a.name);
      if (!o)
        return differ("has attribute '" + a.name + "' in one run only");
      if (a.kind == o->kind && a.i == o->i && a.ints == o->ints &&
          (a.f == o->f || (a.f != a.f && o->f != o->f)))
        continue;
      // A slice to the end of the batch: its limit is the batch.
      bool ok = a.name == "limit" && r.kind == OpKind::Slice &&
                a.ints.size() == o->ints.size();
      for (size_t k = 0; ok && k < a.ints.size(); ++k) {
        if (a.ints[k] == o->ints[k])
          continue;
        int64_t c = multipleOfBatch(a.ints[k], o->ints[k]);
        ok = c != 0;
        a.ints[k] = -c;
      }
      if (!ok)
        return differ("has a different attribute '" + a.name + "'");
    }
    return success();
  }

  /// With a dynamic batch an op can be valid at every batch size seen and
  /// still need one (a slice of rows 1..3): the op's verifier says so, and
  /// its message becomes the trace's error.
  LogicalResult verifyWithBatch(Operation* op, OpKind kind, Location l) {
    std::string message;
    LogicalResult ok = success();
    {
      ScopedDiagnosticHandler capture(ctx, [&](Diagnostic& d) {
        if (message.empty())
          message = d.str();
        return success();
      });
      ok = verify(op, /*verifyRecursively=*/false);
    }
    if (succeeded(ok))
      return success();
    failedMessage = std::string("with a dynamic batch, mc.") +
                    rt::opName(kind) + " (op " +
                    std::to_string(recorded - 1) + " at " + locationText(l) +
                    ") cannot run at every batch size (an op may not "
                    "index, repeat or reverse along the batch, or meet a "
                    "constant of the batch's size): " + message;
    return failure();
  }

  /// c when `atB1` and `atB2` are c times the two runs' batches, else 0.
  int64_t multipleOfBatch(int64_t atB1, int64_t atB2) const {
    if (batch.b1 <= 0 || atB1 % batch.b1 != 0)
      return 0;
    int64_t c = atB1 / batch.b1;
    return c >= 1 && atB2 == c * batch.b2 ? c : 0;
  }

  static std::string locationText(Location l) {
    if (auto name = llvm::dyn_cast<NameLoc>(l))
      return name.getName().str();
    return "the function";
  }

  void assign(const Tensor& state, const Tensor& value) override {
    keepAlive.push_back(value);
    for (auto& [s, v] : assignments)
      if (s.impl() == state.impl()) {
        v = value; // the state's last value is the one stored
        return;
      }
    assignments.emplace_back(state, value);
  }

  /// Each assigned global becomes mutable state, read with global_load and
  /// stored at the end of the function (after every read, as codegen
  /// requires). An assigned tensor that is no global (captured as a
  /// constant) keeps its value.
  void storeAssignments() {
    for (auto& [state, value] : assignments) {
      auto p = paramNames.find(state.impl());
      if (p == paramNames.end())
        continue;
      Value v = valueOf(value);
      valueOf(state); // declares the global if nothing read it
      auto global = module.lookupSymbol<ml_program::GlobalOp>(p->second);
      global.setIsMutable(true);
      auto ref = FlatSymbolRefAttr::get(global.getSymNameAttr());
      SmallVector<ml_program::GlobalLoadConstOp> loads;
      module.walk([&](ml_program::GlobalLoadConstOp load) {
        if (load.getGlobal().getLeafReference() == global.getSymNameAttr())
          loads.push_back(load);
      });
      for (auto load : loads) {
        OpBuilder at(load);
        auto read = ml_program::GlobalLoadOp::create(at, load.getLoc(),
                                                     load.getType(), ref);
        load.getResult().replaceAllUsesWith(read.getResult());
        load.erase();
      }
      ml_program::GlobalStoreOp::create(builder, v.getLoc(), ref, v);
    }
  }

  void enterModule(const nn::Module& m) override {
    auto it = modulePaths.find(&m);
    scopes.push_back(it == modulePaths.end() ? m.typeName() : it->second);
  }
  void exitModule(const nn::Module&) override { scopes.pop_back(); }

  std::string failedMessage;

private:
  /// Ops are located by the module they ran in; ops outside every module
  /// (a loss, glue code) by the traced function's name.
  Location loc() {
    if (scopes.empty())
      return NameLoc::get(builder.getStringAttr(functionName));
    return NameLoc::get(builder.getStringAttr(scopes.back()));
  }

public:
  std::string functionName;
  BatchTrace batch;
  size_t recorded = 0;
  /// Constants captured with other values at the other batch size, and
  /// those values (see compareCapture).
  std::vector<std::pair<Operation*, std::string>> batchCaptures;

private:

  /// Declares the parameter as a private immutable global (before the
  /// function, in first-use order) and loads it at the current point.
  Value loadParameter(const std::string& name, const Tensor& t) {
    auto type = tensorType(ctx, t);
    {
      OpBuilder::InsertionGuard guard(builder);
      if (lastGlobal)
        builder.setInsertionPointAfter(lastGlobal);
      else
        builder.setInsertionPointToStart(module.getBody());
      lastGlobal = ml_program::GlobalOp::create(builder, 
          builder.getUnknownLoc(), name, type, /*is_mutable=*/false,
          constantValue(ctx, t, shareWeightStorage, name),
          builder.getStringAttr("private"));
      // Buffers are state, not parameters: mc-autodiff leaves them alone.
      if (bufferImpls.count(t.impl()))
        lastGlobal->setAttr("mc.buffer", builder.getUnitAttr());
    }
    return ml_program::GlobalLoadConstOp::create(builder, 
        loc(), type, SymbolRefAttr::get(ctx, name));
  }

private:
  MLIRContext* ctx;
  ModuleOp module;
  OpBuilder builder;
  bool shareWeightStorage = false;
  Operation* lastGlobal = nullptr;
  std::unordered_map<const TensorImpl*, Value> values;
  std::unordered_map<const TensorImpl*, std::string> paramNames;
  std::unordered_set<const TensorImpl*> bufferImpls;
  std::vector<std::pair<Tensor, Tensor>> assignments; // (state, new value)
  std::unordered_map<const nn::Module*, std::string> modulePaths;
  std::vector<std::string> scopes;
  std::vector<Tensor> keepAlive; // so no traced TensorImpl address is reused
};

/// `t` with `batch` rows along dim 0, taken cyclically from its own, so
/// what the rows hold (indices, labels) stays valid.
Tensor withBatch(const Tensor& t, int64_t batch) {
  Shape shape = t.shape();
  int64_t rows = shape[0];
  size_t rowBytes = rows ? t.byteSize() / static_cast<size_t>(rows) : 0;
  shape[0] = batch;
  if (!t.hasValues())
    return Tensor::shapeOnly(shape, t.dtype());
  Tensor out = Tensor::empty(shape, t.dtype());
  auto* dst = static_cast<char*>(out.rawData());
  const auto* src = static_cast<const char*>(t.rawData());
  for (int64_t r = 0; r < batch; ++r)
    std::memcpy(dst + r * rowBytes, src + (r % rows) * rowBytes, rowBytes);
  return out;
}

/// Checks the dynamic batch's bounds against the examples and runs the
/// function once at another batch size, recording what it runs. Returns the
/// batch pair the tracer compares.
BatchTrace probeBatch(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& examples, const DynamicBatch& bounds,
    const std::vector<std::pair<std::string, Tensor>>& parameters,
    const std::vector<std::pair<std::string, Tensor>>& buffers,
    ShapeProbe& probe) {
  int64_t opt = bounds.opt ? bounds.opt : bounds.max;
  if (bounds.min < 1 || bounds.min > opt || opt > bounds.max)
    throw Error("jit::trace: dynamic batch bounds [" +
                std::to_string(bounds.min) + ", " +
                std::to_string(bounds.max) + "] with opt " +
                std::to_string(opt) +
                " must satisfy 1 <= min <= opt <= max");
  if (bounds.min == bounds.max)
    throw Error("jit::trace: dynamic batch bounds [" +
                std::to_string(bounds.min) + ", " +
                std::to_string(bounds.max) +
                "] allow one batch size: compile a static model instead "
                "(an ONNX model: --input-shape NAME=" +
                std::to_string(bounds.min) + "x...), or widen the bounds");
  BatchTrace b;
  for (size_t i = 0; i < examples.size(); ++i) {
    const Tensor& t = examples[i];
    if (t.rank() == 0)
      throw Error("jit::trace: with a dynamic batch, example input " +
                  std::to_string(i) + " is a scalar; every input needs the "
                  "batch as its leading dimension");
    int64_t rows = t.shape()[0];
    if (i == 0)
      b.b1 = rows;
    else if (rows != b.b1)
      throw Error("jit::trace: with a dynamic batch, example input " +
                  std::to_string(i) + " " + t.describe() + " has " +
                  std::to_string(rows) + " rows, input 0 has " +
                  std::to_string(b.b1) +
                  "; every input's leading dimension is the batch");
  }
  if (b.b1 < bounds.min || b.b1 > bounds.max)
    throw Error("jit::trace: the examples' batch " + std::to_string(b.b1) +
                " is outside the dynamic batch bounds [" +
                std::to_string(bounds.min) + ", " +
                std::to_string(bounds.max) + "]");
  b.b2 = b.b1 < bounds.max ? b.b1 + 1 : b.b1 - 1;
  std::vector<Tensor> other;
  for (const Tensor& t : examples) {
    other.push_back(withBatch(t, b.b2));
    probe.addTraced(other.back());
  }
  for (auto* list : {&parameters, &buffers})
    for (const auto& [name, t] : *list)
      probe.addTraced(t);
  startTracedRun(&probe);
  try {
    fn(other);
  } catch (...) {
    setActiveTraceHook(nullptr);
    throw;
  }
  setActiveTraceHook(nullptr);
  b.probe = &probe.entries;
  return b;
}

} // namespace

TracedModule traceFunction(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& givenExamples,
    const std::vector<std::pair<std::string, Tensor>>& parameters,
    const std::vector<std::pair<std::string, const nn::Module*>>& modules,
    const TraceOptions& options) {
  if (activeTraceHook())
    throw Error("jit::trace: a trace is already active on this thread");
  TracedModule tm;
  tm.impl_->context = createContext();
  MLIRContext* ctx = tm.impl_->context.get();
  OpBuilder b(ctx);
  Location unknown = b.getUnknownLoc();
  tm.impl_->module = ModuleOp::create(unknown);
  ModuleOp module = *tm.impl_->module;

  auto nameAt = [](const std::vector<std::string>& names, size_t i,
                   size_t count, const char* single, const char* prefix) {
    if (i < names.size())
      return names[i];
    return count == 1 ? std::string(single) : prefix + std::to_string(i);
  };

  for (const Tensor& t : givenExamples)
    if (!t.defined())
      throw Error("jit::trace: an example input is undefined");
  // At batch 1, an operand of shape [1, ...] meets the batch without the
  // broadcast it needs at every other batch (cross-entropy's one-hot
  // compare), so a run at 1 records other ops than a run at 2: with a
  // dynamic batch that reaches 3, examples of one row are traced at 2 and
  // 3 instead, their rows repeated.
  std::vector<Tensor> examples = givenExamples;
  const std::optional<DynamicBatch>& dynamic = options.dynamicBatch;
  bool oneRow = !examples.empty();
  for (const Tensor& t : examples)
    oneRow = oneRow && t.rank() > 0 && t.shape()[0] == 1;
  if (dynamic && oneRow && dynamic->min <= 2 && dynamic->max >= 3)
    for (Tensor& t : examples)
      t = withBatch(t, 2);
  SmallVector<Type> inputTypes;
  for (const Tensor& t : examples)
    inputTypes.push_back(tensorType(ctx, t));
  // Dropout's generator state is a buffer of every trace (a global only
  // where a draw reads it).
  std::vector<std::pair<std::string, Tensor>> buffers = options.buffers;
  for (auto& state : Generator::global().stateBuffers())
    buffers.push_back(state);
  ShapeProbe probe;
  BatchTrace batch;
  if (options.dynamicBatch) {
    batch = probeBatch(fn, examples, *options.dynamicBatch, parameters, buffers,
                       probe);
    for (Type& t : inputTypes) {
      auto tensor = llvm::cast<RankedTensorType>(t);
      SmallVector<int64_t> dims(tensor.getShape());
      dims[0] = ShapedType::kDynamic;
      t = RankedTensorType::get(dims, tensor.getElementType());
    }
  }
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, unknown, options.functionName,
                                     b.getFunctionType(inputTypes, {}));
  Block* entry = func.addEntryBlock();
  for (size_t i = 0; i < examples.size(); ++i)
    func.setArgAttr(i, "mc.name",
                    b.getStringAttr(nameAt(options.inputNames, i,
                                           examples.size(), "x", "input")));

  Tracer tracer(ctx, module, func, parameters, buffers, modules,
                options.shareWeightStorage);
  tracer.functionName = options.functionName;
  tracer.batch = batch;
  // Inputs are fresh views, so an input that is also a parameter or another
  // input still becomes its own block argument.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < examples.size(); ++i) {
    Tensor view(std::make_shared<TensorImpl>(*examples[i].impl()));
    tracer.bind(view, entry->getArgument(i));
    inputs.push_back(view);
  }

  std::vector<Tensor> outputs;
  startTracedRun(&tracer);
  try {
    outputs = fn(inputs);
  } catch (...) {
    setActiveTraceHook(nullptr);
    throw;
  }
  setActiveTraceHook(nullptr);
  if (!tracer.failedMessage.empty())
    throw Error("jit::trace: " + tracer.failedMessage);
  if (batch.probe && tracer.recorded != batch.probe->size())
    throw Error("jit::trace: with a dynamic batch, the function ran " +
                std::to_string(tracer.recorded) + " ops at batch " +
                std::to_string(batch.b1) + " and " +
                std::to_string(batch.probe->size()) + " at batch " +
                std::to_string(batch.b2) +
                "; it must run the same ops at every batch size");
  tracer.storeAssignments();

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  b.setInsertionPointToEnd(entry);
  for (const Tensor& t : outputs) {
    if (!t.defined())
      throw Error("jit::trace: the traced function returned an undefined "
                  "tensor");
    results.push_back(tracer.valueOf(t));
    resultTypes.push_back(results.back().getType());
  }
  func::ReturnOp::create(b, unknown, results);
  func.setFunctionType(b.getFunctionType(inputTypes, resultTypes));
  tracer.checkBatchCaptures(func);
  for (size_t i = 0; i < outputs.size(); ++i)
    func.setResultAttr(i, "mc.name",
                       b.getStringAttr(nameAt(options.outputNames, i,
                                              outputs.size(), "out",
                                              "output")));
  if (options.dynamicBatch) {
    const DynamicBatch& d = *options.dynamicBatch;
    setBatchBounds(func, BatchBounds{d.min, d.max, d.opt ? d.opt : d.max});
  }
  if (failed(verify(module)))
    throw Error(std::string("jit::trace: the traced module does not verify "
                            "(see the diagnostics above)") +
                (options.dynamicBatch
                     ? "; with a dynamic batch, a tensor the function makes "
                       "with a batch-sized shape (not from an op on its "
                       "inputs) is captured as a constant of one batch size"
                     : ""));
  return tm;
}

TracedModule trace(nn::Module& module, const Tensor& example,
                   const TraceOptions& options) {
  return traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{module(in[0])};
      },
      {example}, module.stateDict(), module.namedModules(), options);
}

} // namespace mc::jit

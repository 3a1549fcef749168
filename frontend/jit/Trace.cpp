// The tracer: records eager ops through the TraceHook into an mc function.
#include "frontend/jit/Trace.h"
#include "frontend/TraceHook.h"

#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"
#include "ir/SourceLimits.h"
#include "modelc/fileio.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

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
    llvm::SourceMgr sourceMgr;
    SourceMgrDiagnosticHandler handler(sourceMgr, tm.impl_->context.get(), os);
    std::string error;
    auto buffer = loadMlirSource(path, &error);
    if (!buffer)
      throw Error(error);
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
    tm.impl_->module =
        parseSourceFile<ModuleOp>(sourceMgr, tm.impl_->context.get());
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

class Tracer : public TraceHook {
public:
  Tracer(MLIRContext* ctx, ModuleOp module, func::FuncOp fn,
         const std::vector<std::pair<std::string, Tensor>>& params,
         const std::vector<std::pair<std::string, Tensor>>& buffers,
         const std::vector<std::pair<std::string, const nn::Module*>>& mods)
      : ctx(ctx), module(module), builder(ctx) {
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
      v = mc::ConstantOp::create(builder, loc(), denseValue(ctx, t));
    }
    bind(t, v);
    return v;
  }

  void record(const OpRecord& r) override {
    if (failedMessage.size())
      return;
    SmallVector<Value> in;
    for (const Tensor& t : r.inputs)
      in.push_back(valueOf(t));
    Location l = loc();
    Type resultType = tensorType(ctx, r.output);
    // Every op by its registry entry: ODS names its attributes, so the
    // tracer has no per-op case.
    std::string error;
    Operation* op =
        buildRegistryOp(builder, l, r.kind, in, resultType, r.attrs, &error);
    if (!op) {
      failedMessage = "cannot trace " + error;
      return;
    }
    Value out = op->getResult(0);
    if (out.getType() != resultType) {
      failedMessage = "traced op produced type mismatch";
      return;
    }
    bind(r.output, out);
  }

  void assign(const Tensor& state, const Tensor& value) override {
    assignments.emplace_back(state, value);
    keepAlive.push_back(value);
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
          denseValue(ctx, t), builder.getStringAttr("private"));
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
  Operation* lastGlobal = nullptr;
  std::unordered_map<const TensorImpl*, Value> values;
  std::unordered_map<const TensorImpl*, std::string> paramNames;
  std::unordered_set<const TensorImpl*> bufferImpls;
  std::vector<std::pair<Tensor, Tensor>> assignments; // (state, new value)
  std::unordered_map<const nn::Module*, std::string> modulePaths;
  std::vector<std::string> scopes;
  std::vector<Tensor> keepAlive; // so no traced TensorImpl address is reused
};

} // namespace

TracedModule traceFunction(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& examples,
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

  SmallVector<Type> inputTypes;
  for (const Tensor& t : examples) {
    if (!t.defined())
      throw Error("jit::trace: an example input is undefined");
    inputTypes.push_back(tensorType(ctx, t));
  }
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, unknown, options.functionName,
                                     b.getFunctionType(inputTypes, {}));
  Block* entry = func.addEntryBlock();
  for (size_t i = 0; i < examples.size(); ++i)
    func.setArgAttr(i, "mc.name",
                    b.getStringAttr(nameAt(options.inputNames, i,
                                           examples.size(), "x", "input")));

  Tracer tracer(ctx, module, func, parameters, options.buffers, modules);
  tracer.functionName = options.functionName;
  // Inputs are fresh views, so an input that is also a parameter or another
  // input still becomes its own block argument.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < examples.size(); ++i) {
    Tensor view(std::make_shared<TensorImpl>(*examples[i].impl()));
    tracer.bind(view, entry->getArgument(i));
    inputs.push_back(view);
  }

  std::vector<Tensor> outputs;
  setActiveTraceHook(&tracer);
  try {
    outputs = fn(inputs);
  } catch (...) {
    setActiveTraceHook(nullptr);
    throw;
  }
  setActiveTraceHook(nullptr);
  if (!tracer.failedMessage.empty())
    throw Error("jit::trace: " + tracer.failedMessage);
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
  for (size_t i = 0; i < outputs.size(); ++i)
    func.setResultAttr(i, "mc.name",
                       b.getStringAttr(nameAt(options.outputNames, i,
                                              outputs.size(), "out",
                                              "output")));
  if (failed(verify(module)))
    throw Error("jit::trace: the traced module does not verify (see the "
                "diagnostics above)");
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

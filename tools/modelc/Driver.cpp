// The `modelc` command line (see Driver.h and docs/getting-started.md).
#include "tools/modelc/Driver.h"

#include "codegen/ArtifactWriter.h"
#include "codegen/Compile.h"
#include "codegen/GraphDot.h"
#include "codegen/MCToPlan.h"
#include "codegen/cuda/CudaTarget.h"
#include "frontend/Random.h"
#include "frontend/jit/Trace.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Batch.h"
#include "ir/SourceLimits.h"
#include "modelc/fileio.h"
#include "passes/Passes.h"
#include "tools/runcli/RunCli.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>

using namespace mlir;

namespace mc::tools {
namespace {

const char* kUsage = R"(usage: modelc <command> [options]

commands:
  compile IN.mlir -o OUT.mcpk   compile a traced model (.mlir text or bytecode)
                                 or an ONNX model (IN.onnx, imported first)
      --target=T[,T...]          codegen target(s) (default cpu; registered:
                                 cpu, cuda[:sm_80,sm_90]); cuda generates a
                                 kernel per step that is not a cuBLASLt or
                                 cuDNN call, and a cubin per architecture
      --entry=NAME               entry function (default: the only public one)
      --emit=mc|mc-opt|mc-fused|dot|plan|gpu|ptx|artifact
                                 stop after parsing (mc), after the pass
                                 pipeline (mc-opt; mc-fused is the same, the
                                 fused regions shown; dot: that graph as
                                 Graphviz DOT, each fused region a box of
                                 its ops: dot -Tsvg), after memory planning
                                 (plan), or write the .mcpk (artifact, default);
                                 gpu and ptx (cuda target): the generated
                                 kernels in the gpu dialect, or their PTX;
                                 text goes to -o or stdout
      --no-fuse                  one step per op: no mc-fuse regions or
                                 epilogues (batch norms still fold)
      --split-reductions=on|off  split long reductions into few outputs in
                                 two (mc-split-reductions; default: as
                                 the targets ask: cuda's long ones, the
                                 cpu's to one value)
      --pretranspose-weights=on|off
                                 store the constant weights matmuls read
                                 transposed (nn.Linear's) as read
                                 (mc-pretranspose-weights; default: on
                                 for cpu, off for cuda)
      --channels-last=on|off     run f32 and bf16 convolutions and pooling
                                 (f16 too on cuda) on NHWC activations
                                 (mc-channels-last; default: on)
      -v, --verbose              print each stage and its time, and the
                                 steps, intermediate bytes and arena size;
                                 for cuda, how each attention region runs
      --weights=CKPT.mcst        the trained weights of a modelc-run --train
                                 checkpoint, by name, in place of the
                                 model's (deploy what training made)
      --input-shape NAME=1x3x224x224
                                 static shape of an ONNX input (needed for
                                 dynamic dimensions; repeatable); with
                                 --batch, '?' first is the batch:
                                 NAME=?x128x768
      --batch=MIN..MAX[@OPT]     a dynamic batch: the model's `?` leading
                                 input dims run any batch in [MIN, MAX] from
                                 one artifact (memory planned at MAX; OPT,
                                 default MAX, is what tuning favours)
      --amp=bf16|f16             mixed precision, inference or training (off
                                 by default); --amp-level=O1|O2 (O1)
        --amp-low-ops=OP,... --amp-f32-ops=OP,...  AMP list changes
        --amp-locations=NAME:f32,...  per-location overrides
      --train                    compile a training step: the input computes
                                 a scalar loss (result 0); the step returns it
                                 and updates parameters and optimizer state
                                 in place (see docs/training.md). With:
        --optimizer=sgd|adam|adamw  (sgd) --lr=X (sgd 0.01, adam(w) 1e-3)
        --momentum=X --dampening=X --nesterov --weight-decay=X (sgd and
                                 adam 0, adamw 0.01; adam's is L2 on the
                                 gradient, adamw's decoupled)
        --beta1=X --beta2=X --eps=X   Adam(W) (0.9, 0.999, 1e-8)
        --max-grad-norm=X        clip the gradients' global L2 norm to X
                                 (clip_grad_norm_; 0, the default: off)
        --lr-schedule=constant|linear|cosine (constant) --warmup-steps=N (0)
        --total-steps=N          the learning rate over the steps, as
                                 Hugging Face's *_schedule_with_warmup
        --loss-scaling=auto|on|off    dynamic loss scaling (auto: on for f16)
        --loss-scale-init=X (65536) --loss-scale-growth=X (2)
        --loss-scale-backoff=X (0.5) --loss-scale-interval=N (2000)
        --dp-ranks=N (1)         the step of one of N data-parallel ranks
                                 (mc-dp-partition): trace at the per-rank
                                 batch; gradients averaged over the ranks
        --dp-bucket-mb=X (25)    all-reduce bucket size (docs/data-parallel.md)
        --no-weight-decay=GLOB,...  parameters without weight decay
                                 ('*.bias,*norm*': parameter groups)
        --grad-accum=N (1)       update every N steps (micro-batches) with
                                 the mean of their gradients
        --freeze=NAME,...        parameters left untrained: a parameter's
                                 name, or a module path (`0` freezes 0.*)
        --seed=N (0)             the seed of an ONNX model's training-mode
                                 Dropout masks (docs/training.md, "Dropout")
  import IN.onnx -o OUT.mlir    import an ONNX model (opsets 13 to 17) as mc
                                 (.mlirbc: bytecode; no -o: stdout)
      --input-shape NAME=DIMS    as for compile
      --batch=MIN..MAX[@OPT]     as for compile: the inputs' symbolic
                                 leading dim becomes the function's batch
  run ART.mcpk --input NAME=FILE.npy ... --output-dir DIR [--bench N]
                                 run an artifact on the CPU runtime
  train ART.mcpk --data NAME=FILE.npy ... --batch B --epochs E [...]
                                 train a compiled step (modelc-run --train)
  inspect ART.mcpk [--precision] describe an artifact (--precision: the
                                 mc-amp decision and reason of every op)
  compare A.npy B.npy [--rtol X] relative error of A against B
  --version, --help

Errors go to stderr with exit code 1.
)";

int fail(const std::string& message) {
  llvm::errs() << "modelc: error: " << message << "\n";
  return 1;
}

/// argv as a vector with argv[0] replaced, for the runtime CLI entries.
int forward(int (*fn)(int, char**), const char* name, int argc, char** argv) {
  std::vector<char*> args;
  args.push_back(const_cast<char*>(name));
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  return fn(static_cast<int>(args.size()) - 1, args.data());
}

bool writeText(const std::string& path, const std::string& text,
               std::string& error) {
  if (path.empty() || path == "-") {
    llvm::outs() << text;
    return true;
  }
  rt::Status st = rt::writeFileAtomically(path, text.data(), text.size());
  if (!st)
    error = st.message();
  return bool(st);
}

/// The name of an op's location where it has no file in it: the NameLoc
/// an ONNX node gives ("/0/Conv (Conv)"), through fused and call-site
/// locations; "" for an unknown one. nullopt where a file location is in
/// it (the source manager prints those with their line).
std::optional<std::string> locationName(Location loc) {
  bool hasFile = false;
  std::string name;
  loc->walk([&](Location l) {
    if (isa<FileLineColLoc>(l))
      hasFile = true;
    else if (auto n = dyn_cast<NameLoc>(l); n && name.empty())
      name = n.getName().str();
    return WalkResult::advance();
  });
  if (hasFile)
    return std::nullopt;
  return name;
}

LogicalResult printWithoutFile(Diagnostic& d) {
  std::optional<std::string> name = locationName(d.getLocation());
  if (!name)
    return failure(); // to the source manager's handler
  auto severity = [](DiagnosticSeverity s) {
    switch (s) {
    case DiagnosticSeverity::Error:
      return "error";
    case DiagnosticSeverity::Warning:
      return "warning";
    case DiagnosticSeverity::Remark:
      return "remark";
    default:
      return "note";
    }
  };
  llvm::errs() << "modelc: " << severity(d.getSeverity()) << ": ";
  if (!name->empty())
    llvm::errs() << *name << ": ";
  llvm::errs() << d.str() << "\n";
  for (Diagnostic& note : d.getNotes()) {
    std::optional<std::string> at = locationName(note.getLocation());
    llvm::errs() << "modelc: note: ";
    if (at && !at->empty())
      llvm::errs() << *at << ": ";
    llvm::errs() << note.str() << "\n";
  }
  return success();
}

/// Everything written to stdout arrived (a full disk or a closed pipe is
/// an error, exit 1). Reported once, only when the command itself
/// succeeded.
int finishStdout(int rc) {
  llvm::outs().flush();
  bool lost = llvm::outs().has_error();
  std::string why = lost ? llvm::outs().error().message() : "";
  // Cleared, or LLVM aborts at exit with "IO failure on output stream".
  llvm::outs().clear_error();
  rt::Status st = rt::finishStdout();
  if (rc != 0)
    return rc;
  if (lost)
    return fail("cannot write to standard output: " + why);
  if (!st)
    return fail(st.message());
  return 0;
}

} // namespace

/// An ONNX import's warning (OnnxImportOptions::warn), on stderr.
static void printImportWarning(const std::string& text) {
  llvm::errs() << "modelc: warning: " << text << "\n";
}

int compileMain(int argc, char** argv) {
  std::string input, output, emit = "artifact", shapeSpec, batchSpec,
                             weightsPath;
  codegen::CompileOptions options;
  OnnxImportOptions onnxOptions;
  onnxOptions.warn = printImportWarning;
  std::string badNumber, trainFlag, ampFlag;
  std::set<std::string> givenFlags; // the number flags given
  // A value flag given twice (other than the repeatable --input-shape):
  // the last had won silently.
  std::set<std::string> valueFlags;
  std::string repeated;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag, std::string& dst) {
      bool matched = false;
      if (a == flag) {
        if (i + 1 >= argc)
          return false;
        dst = argv[++i];
        matched = true;
      } else if (a.rfind(flag + "=", 0) == 0) {
        dst = a.substr(flag.size() + 1);
        matched = true;
      }
      if (matched && flag != "--input-shape" &&
          !valueFlags.insert(flag).second && repeated.empty())
        repeated = flag;
      return matched;
    };
    // FLAG=on|off into `dst`; any other value is an error naming it.
    std::string onOffError;
    auto onOff = [&](const std::string& flag, std::optional<bool>& dst) {
      if (a.rfind(flag + "=", 0) != 0)
        return false;
      std::string v = a.substr(flag.size() + 1);
      if (v == "on" || v == "off")
        dst = v == "on";
      else
        onOffError = "compile: " + flag + " takes on or off, got '" + v + "'";
      return true;
    };
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage;
      return 0;
    }
    // Training flags: the --train pipeline's options (passes/Passes.h).
    TrainPipelineOptions& t = options.training;
    std::string number;
    // dst: a double, or a std::optional<double> (--weight-decay: unset
    // means the optimizer's default).
    auto numberFlag = [&](const std::string& flag, auto& dst) {
      if (!value(flag, number))
        return false;
      givenFlags.insert(flag);
      char* end = nullptr;
      double parsed = std::strtod(number.c_str(), &end);
      dst = parsed;
      if (number.empty() || *end != '\0')
        badNumber = "'" + flag + "=" + number + "' is not a number";
      else if (!std::isfinite(parsed)) // nan, inf, 1e999
        badNumber = "'" + flag + "=" + number + "' is not a finite number";
      return true;
    };
    auto listFlag = [&](const std::string& flag,
                        std::vector<std::string>& dst) {
      std::string list;
      if (!value(flag, list))
        return false;
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos)
          comma = list.size();
        if (comma > start)
          dst.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
      return true;
    };
    // An integer flag in [lo, hi], checked before the conversion (1e30 has
    // no int64); `range` says which in the error.
    std::string badInteger;
    auto integerFlag = [&](const std::string& flag, double lo, double hi,
                           const char* range, int64_t& dst) {
      double v = -1;
      if (!numberFlag(flag, v))
        return false;
      if (!(v >= lo && v <= hi) || v != std::floor(v))
        badInteger = "compile: " + flag + " needs an integer " + range +
                     ", got '" + number + "'";
      else
        dst = static_cast<int64_t>(v);
      return true;
    };
    int64_t seed = -1;
    if (a == "--train") {
      options.train = true;
    } else if (a == "--nesterov") {
      t.nesterov = true;
    } else if (value("--amp", t.amp) || value("--amp-level", t.ampLevel) ||
               listFlag("--amp-low-ops", t.ampLowOps) ||
               listFlag("--amp-f32-ops", t.ampF32Ops) ||
               listFlag("--amp-locations", t.ampLocations)) {
      // Mixed precision applies to inference and training alike.
      if (a.rfind("--amp=", 0) != 0 && a != "--amp")
        ampFlag = a.substr(0, a.find('='));
    } else if (integerFlag("--grad-accum", 1, 16777216.0, "in [1, 2^24]",
                           t.gradAccum) ||
               integerFlag("--warmup-steps", 0, 16777216.0, "in [0, 2^24]",
                           t.warmupSteps) ||
               integerFlag("--total-steps", 0, 16777216.0, "in [0, 2^24]",
                           t.totalSteps) ||
               integerFlag("--dp-ranks", 1, 1e6, ">= 1", t.dpRanks) ||
               integerFlag("--loss-scale-interval", 1, 1e15, ">= 1",
                           t.scaleInterval) ||
               // The seed of an imported model's training-mode Dropout.
               integerFlag("--seed", 0, 9007199254740992.0, "in [0, 2^53]",
                           seed)) {
      if (!badInteger.empty())
        return fail(badInteger);
      trainFlag = a.substr(0, a.find('='));
      if (trainFlag == "--seed")
        Generator::global().manualSeed(static_cast<uint64_t>(seed));
    } else if (value("--optimizer", t.optimizer) ||
               value("--lr-schedule", t.lrSchedule) ||
               value("--loss-scaling", t.lossScaling) ||
               numberFlag("--lr", t.lr) ||
               numberFlag("--momentum", t.momentum) ||
               numberFlag("--dampening", t.dampening) ||
               numberFlag("--weight-decay", t.weightDecay) ||
               numberFlag("--beta1", t.beta1) ||
               numberFlag("--beta2", t.beta2) || numberFlag("--eps", t.eps) ||
               numberFlag("--max-grad-norm", t.maxGradNorm) ||
               numberFlag("--loss-scale-init", t.scaleInit) ||
               numberFlag("--loss-scale-growth", t.scaleGrowth) ||
               numberFlag("--loss-scale-backoff", t.scaleBackoff)) {
      trainFlag = a.substr(0, a.find('='));
    } else if (listFlag("--freeze", t.freeze) ||
               listFlag("--no-weight-decay", t.noWeightDecay)) {
      trainFlag = a.substr(0, a.find('='));
      // An empty list (an unset shell variable) would freeze, or exempt,
      // nothing without a word.
      if ((trainFlag == "--freeze" ? t.freeze : t.noWeightDecay).empty())
        return fail("compile: " + trainFlag + " needs at least one name");
    } else if (numberFlag("--dp-bucket-mb", t.dpBucketMb)) {
      if (!(t.dpBucketMb > 0))
        return fail("compile: --dp-bucket-mb needs a size > 0 (MB), got '" +
                    number + "'");
      trainFlag = "--dp-bucket-mb";
    } else if (a == "-v" || a == "--verbose") {
      options.verbose = true;
    } else if (a == "--no-fuse") {
      options.fuse = false;
    } else if (onOff("--split-reductions", options.splitReductions) ||
               onOff("--pretranspose-weights", options.pretransposeWeights) ||
               onOff("--channels-last", options.channelsLast)) {
      if (!onOffError.empty())
        return fail(onOffError);
    } else if (value("-o", output) || value("--target", options.target) ||
               value("--entry", options.entry) || value("--emit", emit)) {
    } else if (value("--batch", batchSpec) || value("--weights", weightsPath)) {
    } else if (value("--input-shape", shapeSpec)) {
      try {
        parseOnnxInputShape(shapeSpec, onnxOptions);
      } catch (const Error& e) {
        return fail(std::string("compile: ") + e.what());
      }
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return fail("compile: unknown option '" + a + "' (see modelc --help)");
    } else if (input.empty()) {
      input = a;
    } else {
      return fail("compile: more than one input ('" + input + "', '" + a +
                  "')");
    }
  }
  if (!repeated.empty())
    return fail("compile: " + repeated + " is given twice");
  if (!badNumber.empty())
    return fail("compile: " + badNumber);
  if (!trainFlag.empty() && !options.train)
    return fail("compile: " + trainFlag + " needs --train");
  if (options.train && options.pretransposeWeights.value_or(false))
    return fail("compile: --pretranspose-weights is for inference (a "
                "training step's weights are parameters, never constants)");
  if (options.train && options.channelsLast.value_or(false))
    return fail("compile: --channels-last is for inference (autodiff "
                "differentiates NCHW convolutions and pooling only)");
  if (!ampFlag.empty() && options.training.amp.empty())
    return fail("compile: " + ampFlag + " needs --amp=bf16 or --amp=f16");
  {
    const TrainPipelineOptions& t = options.training;
    if (!t.amp.empty() && t.amp != "bf16" && t.amp != "f16")
      return fail("compile: unknown --amp '" + t.amp +
                  "' (expected bf16 or f16)");
    if (t.ampLevel != "O1" && t.ampLevel != "O2")
      return fail("compile: unknown --amp-level '" + t.ampLevel +
                  "' (expected O1 or O2)");
    for (const std::string& op : t.ampLowOps)
      if (llvm::is_contained(t.ampF32Ops, op))
        return fail("compile: '" + op + "' is in both --amp-low-ops and "
                    "--amp-f32-ops; give it one precision");
  }
  if (options.train) {
    const TrainPipelineOptions& t = options.training;
    if (t.optimizer != "sgd" && t.optimizer != "adam" && t.optimizer != "adamw")
      return fail("compile: unknown --optimizer '" + t.optimizer +
                  "' (expected sgd, adam or adamw)");
    if (t.lossScaling != "auto" && t.lossScaling != "on" &&
        t.lossScaling != "off")
      return fail("compile: unknown --loss-scaling '" + t.lossScaling +
                  "' (expected auto, on or off)");
    // An option the step would not use is an error, not silently nothing.
    const char* sgdOnly[] = {"--momentum", "--dampening"};
    const char* adamOnly[] = {"--beta1", "--beta2", "--eps"};
    for (const char* f : sgdOnly)
      if (t.optimizer != "sgd" && givenFlags.count(f))
        return fail(std::string("compile: ") + f +
                    " is an SGD option; this step uses --optimizer=" +
                    t.optimizer);
    if (t.optimizer == "sgd" && givenFlags.count("--dampening") &&
        !(t.momentum > 0))
      return fail("compile: --dampening scales momentum's new term; it "
                  "needs --momentum > 0 (without momentum it would change "
                  "nothing)");
    if (givenFlags.count("--dp-bucket-mb") && t.dpRanks <= 1)
      return fail("compile: --dp-bucket-mb sizes the all-reduce buckets of "
                  "a data-parallel step; it needs --dp-ranks=N with N > 1");
    if (t.optimizer != "sgd" && t.nesterov)
      return fail("compile: --nesterov is an SGD option; this step uses "
                  "--optimizer=" + t.optimizer);
    for (const char* f : adamOnly)
      if (t.optimizer == "sgd" && givenFlags.count(f))
        return fail(std::string("compile: ") + f +
                    " is an Adam and AdamW option; this step uses "
                    "--optimizer=sgd");
    bool scaling = t.lossScaling == "on" ||
                   (t.lossScaling == "auto" && t.amp == "f16");
    for (const char* f : {"--loss-scale-init", "--loss-scale-growth",
                          "--loss-scale-backoff", "--loss-scale-interval"})
      if (!scaling && givenFlags.count(f))
        return fail(std::string("compile: ") + f +
                    " needs dynamic loss scaling, which is off here "
                    "(--loss-scaling=on, or auto with --amp=f16)");
  }
  if (input.empty())
    return fail("compile: no input file (usage: modelc compile IN.mlir -o "
                "OUT.mcpk)");
  if (emit == "mc-fused")
    emit = "mc-opt";
  if (emit != "mc" && emit != "mc-opt" && emit != "dot" && emit != "plan" &&
      emit != "gpu" && emit != "ptx" && emit != "artifact")
    return fail("compile: unknown --emit value '" + emit +
                "' (expected mc, mc-opt, mc-fused, dot, plan, gpu, ptx or "
                "artifact)");
  if ((emit == "gpu" || emit == "ptx") &&
      !llvm::StringRef(options.target).contains("cuda"))
    return fail("compile: --emit=" + emit +
                " shows generated GPU kernels; it needs --target cuda");
  // The targets are checked by the compile driver (codegen/Target.h),
  // which names the registered ones.
  if (emit == "artifact" && output.empty())
    return fail("compile: no output file (-o OUT.mcpk)");
  if (!output.empty() && output != "-" && rt::sameFile(output, input))
    return fail("compile: -o " + output + " is the input model (" + input +
                "): writing it would destroy it");

  bool isOnnx = llvm::StringRef(input).ends_with(".onnx");
  if (!isOnnx && !onnxOptions.inputShapes.empty())
    return fail("compile: --input-shape applies to .onnx inputs only");
  std::optional<BatchBounds> batch;
  if (!batchSpec.empty()) {
    std::string why;
    batch = parseBatchBounds(batchSpec, &why);
    if (!batch)
      return fail("compile: " + why);
    if (isOnnx)
      onnxOptions.batch = jit::DynamicBatch{batch->min, batch->max, batch->opt};
  }
  // --weights: read first, so the ONNX importer computes what it folds at
  // import (a weight's Transpose) from the trained values.
  rt::Checkpoint trained;
  std::set<std::string> weightsUsed;
  if (!weightsPath.empty()) {
    if (rt::Status st = rt::readCheckpointFile(weightsPath, &trained); !st)
      return fail("compile: --weights: " + st.message());
    onnxOptions.weights = &trained;
    onnxOptions.weightsUsed = &weightsUsed;
  }
  std::unique_ptr<MLIRContext> context;
  std::optional<jit::TracedModule> imported;
  if (isOnnx) {
    try {
      onnxOptions.trainingState = options.train;
      imported.emplace(importOnnx(input, onnxOptions));
    } catch (const Error& e) {
      return fail(e.what());
    }
  } else {
    context = jit::createContext();
  }
  MLIRContext* ctx = isOnnx ? &imported->context() : context.get();
  // Shared: bytecode's resource blobs (an imported model's weights) then
  // point into the mapped file instead of being copied out of it.
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  // Diagnostics print as FILE:LINE:COL: error: ... with the source line
  // (for an imported ONNX model, the node's location).
  SourceMgrDiagnosticHandler handler(*sourceMgr, ctx, llvm::errs());
  // A location with no file in it (an ONNX node's name, or none) printed
  // as "<unknown>:0: warning: loc("/0/Conv (Conv)"): ...": said as the
  // driver's own messages are, naming the node.
  ScopedDiagnosticHandler nodeNames(ctx, [](Diagnostic& d) {
    return printWithoutFile(d);
  });
  std::string error;
  OwningOpRef<ModuleOp> parsed;
  if (!isOnnx) {
    auto buffer = loadMlirSource(input, &error);
    if (!buffer)
      return fail(error);
    bool bytecode = mlir::isBytecode(buffer->getMemBufferRef());
    ParserConfig parserConfig(ctx);
    guardBytecodeReader(parserConfig, buffer->getBuffer());
    sourceMgr->AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
    parsed = parseSourceFile<ModuleOp>(sourceMgr, parserConfig);
    if (!parsed)
      return 1; // the parser reported FILE:LINE:COL
    if (bytecode)
      if (auto where = findExcessAttributeNesting(*parsed))
        return fail(input + ": nesting deeper than " +
                    std::to_string(kMaxMlirNesting) + " in " + *where);
  }
  ModuleOp module = isOnnx ? imported->module() : *parsed;
  if (!weightsPath.empty()) {
    if (failed(codegen::loadWeights(module, trained, weightsPath, weightsUsed)))
      return 1; // reported, naming the weight
    if (options.verbose)
      llvm::errs() << "modelc: weights from " << weightsPath << "\n";
  }
  if (batch && !isOnnx) {
    Operation* fn = findEntryFunction(module, options.entry);
    if (!fn)
      return 1; // reported
    setBatchBounds(fn, *batch);
  }
  if (options.verbose)
    llvm::errs() << "modelc: " << (isOnnx ? "imported " : "parsed ") << input
                 << "\n";
  if (emit == "mc") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return writeText(output, text, error) ? 0 : fail(error);
  }
  if (failed(codegen::runCompilePipeline(module, options)))
    return 1;
  if (emit == "mc-opt") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return writeText(output, text, error) ? 0 : fail(error);
  }
  if (emit == "dot") {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        findEntryFunction(module, options.entry));
    if (!fn)
      return 1; // reported
    std::string text;
    llvm::raw_string_ostream os(text);
    codegen::writeGraphDot(fn, os);
    return writeText(output, text, error) ? 0 : fail(error);
  }
  std::string ptx;
  OwningOpRef<ModuleOp> kernels;
  codegen::cuda::options().ptx = emit == "ptx" ? &ptx : nullptr;
  codegen::cuda::options().emitKernels = emit == "gpu" ? &kernels : nullptr;
  codegen::cuda::options().verbose = options.verbose;
  auto plan = codegen::buildPlan(module, options);
  codegen::cuda::options().ptx = nullptr;
  codegen::cuda::options().emitKernels = nullptr;
  codegen::cuda::options().verbose = false;
  if (failed(plan))
    return 1;
  if (emit == "ptx")
    return writeText(output, ptx, error) ? 0 : fail(error);
  if (emit == "gpu") {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (kernels)
      kernels->print(os);
    return writeText(output, text, error) ? 0 : fail(error);
  }
  if (emit == "plan")
    return writeText(output, codegen::formatPlan(*plan), error) ? 0
                                                                : fail(error);
  // Streamed to the file from the plan's buffers: the weights are not
  // copied into an image of the file first.
  rt::Status status = codegen::writeArtifact(*plan, output);
  if (!status)
    return fail(status.message());
  uint64_t weights = 0;
  for (const auto& b : plan->buffers)
    if (b.kind == fb::BufferKind::Constant)
      weights += b.byteSize();
  llvm::outs() << "modelc: wrote " << output << " (" << plan->steps.size()
               << " steps, arena " << plan->arenaSize << " bytes, weights "
               << weights << " bytes, target " << options.target << ")\n";
  return 0;
}

int importMain(int argc, char** argv) {
  std::string input, output = "-";
  OnnxImportOptions options;
  options.warn = printImportWarning;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc)
          throw Error("import: " + a + " needs a value");
        return argv[++i];
      };
      if (a == "-h" || a == "--help") {
        llvm::outs() << kUsage;
        return 0;
      }
      if (a == "-o")
        output = next();
      else if (a.rfind("-o=", 0) == 0)
        output = a.substr(3);
      else if (a == "--input-shape")
        parseOnnxInputShape(next(), options);
      else if (a.rfind("--input-shape=", 0) == 0)
        parseOnnxInputShape(a.substr(14), options);
      else if (a == "--batch" || a.rfind("--batch=", 0) == 0) {
        std::string spec = a == "--batch" ? next() : a.substr(8), why;
        std::optional<BatchBounds> b = parseBatchBounds(spec, &why);
        if (!b)
          return fail("import: " + why);
        options.batch = jit::DynamicBatch{b->min, b->max, b->opt};
      } else if (!a.empty() && a[0] == '-')
        return fail("import: unknown option '" + a + "' (see modelc --help)");
      else if (input.empty())
        input = a;
      else
        return fail("import: more than one input ('" + input + "', '" + a +
                    "')");
    }
    if (input.empty())
      return fail("import: no input file (usage: modelc import IN.onnx -o "
                  "OUT.mlir)");
    if (output != "-" && rt::sameFile(output, input))
      return fail("import: -o " + output + " is the input model (" + input +
                  "): writing it would destroy it");
    jit::TracedModule module = importOnnx(input, options);
    module.save(output, llvm::StringRef(output).ends_with(".mlirbc"));
  } catch (const Error& e) {
    return fail(e.what());
  }
  return 0;
}

namespace {

int dispatch(int argc, char** argv) {
  if (argc < 2)
    return fail(std::string("no command\n") + kUsage);
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (cmd == "--version") {
    llvm::outs() << "modelc " << MODELC_VERSION_STRING << "\n";
    return 0;
  }
  if (cmd == "compile")
    return forward(compileMain, "modelc compile", argc, argv);
  if (cmd == "import")
    return forward(importMain, "modelc import", argc, argv);
  if (cmd == "run")
    return forward(cli::runMain, "modelc run", argc, argv);
  if (cmd == "train") {
    // `modelc train ART ...` is `modelc-run --train ART ...`.
    std::vector<char*> args{const_cast<char*>("modelc train"),
                            const_cast<char*>("--train")};
    for (int i = 2; i < argc; ++i)
      args.push_back(argv[i]);
    args.push_back(nullptr);
    return cli::runMain(static_cast<int>(args.size()) - 1, args.data());
  }
  if (cmd == "inspect")
    return forward(cli::inspectMain, "modelc inspect", argc, argv);
  if (cmd == "compare")
    return forward(cli::compareMain, "modelc compare", argc, argv);
  return fail("unknown command '" + cmd + "' (see modelc --help)");
}

} // namespace

int modelcMain(int argc, char** argv) {
  return finishStdout(dispatch(argc, argv));
}

} // namespace mc::tools

// modelc-kernel-check MODEL.mlir [--amp bf16|f16] [--batch N] [--tol T]:
// compiles a model
// for the cuda target and runs every step that gets a generated kernel on
// lavapipe and with the CPU runtime's kernel, on the same random inputs;
// prints a table and exits 1 when a kernel differs by more than the
// tolerance or fails to run (docs/cuda.md, "Checking kernels on
// lavapipe"). A test tool: CI runs it on every example model.
#include "KernelCheck.h"
#include "VulkanRunner.h"

#include "codegen/Compile.h"
#include "frontend/jit/Trace.h"
#include "modelc/ops.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <limits>
#include <cstdlib>
#include <optional>
#include <string>

int main(int argc, char** argv) {
  std::string path;
  int64_t batch = 0;
  double tol = 1e-4;
  bool train = false;
  std::string amp; // mc-amp's low precision: bf16, f16 (none by default)
  std::string optimizer = "sgd";
  double momentum = 0;
  std::optional<bool> splitReductions; // the cuda target's default: on
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) {
      char* end = nullptr;
      batch = std::strtoll(argv[++i], &end, 10);
      if (*end || batch < 1) {
        std::fprintf(stderr, "modelc-kernel-check: --batch needs a size "
                     ">= 1, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a == "--tol" && i + 1 < argc)
      tol = std::atof(argv[++i]);
    else if (a == "--train")
      train = true;
    else if (a == "--amp" && i + 1 < argc)
      amp = argv[++i];
    else if (a == "--optimizer" && i + 1 < argc)
      optimizer = argv[++i];
    else if (a == "--momentum" && i + 1 < argc)
      momentum = std::atof(argv[++i]);
    else if (a == "--split-reductions=on" || a == "--split-reductions=off")
      splitReductions = a == "--split-reductions=on";
    else if (path.empty() && a[0] != '-')
      path = a;
    else {
      std::fprintf(stderr,
                   "usage: modelc-kernel-check MODEL.mlir [--train "
                   "[--optimizer sgd|adam|adamw] [--momentum X]] "
                   "[--amp bf16|f16] [--split-reductions=on|off] "
                   "[--batch N] [--tol T]\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "modelc-kernel-check: no model given\n");
    return 2;
  }
  std::string why;
  auto runner = mc::gputest::VulkanRunner::create(&why);
  if (!runner) {
    std::printf("skipped: no Vulkan device (%s)\n", why.c_str());
    return 77;
  }
  auto context = mc::jit::createContext();
  llvm::SourceMgr sources;
  mlir::SourceMgrDiagnosticHandler handler(sources, context.get());
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    std::fprintf(stderr, "modelc-kernel-check: cannot read %s\n",
                 path.c_str());
    return 1;
  }
  sources.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, context.get());
  if (!module)
    return 1;
  mc::codegen::CompileOptions options;
  options.target = "cuda";
  options.train = train;
  options.training.amp = amp;
  options.training.optimizer = optimizer;
  options.training.momentum = momentum;
  options.splitReductions = splitReductions;
  if (mlir::failed(mc::codegen::runCompilePipeline(*module, options)))
    return 1;
  auto plan = mc::codegen::buildPlan(*module, options);
  if (mlir::failed(plan))
    return 1;
  if (batch != 0 && !plan->batch.dynamic()) {
    std::fprintf(stderr, "modelc-kernel-check: --batch %lld: the model has "
                 "no dynamic batch\n", (long long)batch);
    return 2;
  }
  if (batch != 0 && (batch < plan->batch.min || batch > plan->batch.max)) {
    std::fprintf(stderr, "modelc-kernel-check: --batch %lld is outside the "
                 "model's batch range %lld..%lld\n", (long long)batch,
                 (long long)plan->batch.min, (long long)plan->batch.max);
    return 2;
  }
  if (plan->batch.dynamic() && batch == 0)
    batch = plan->batch.opt;
  std::printf("%-5s %-22s %-12s %9s %10s  %s\n", "step", "op", "kernel",
              "elements", "max error", "result");
  int failures = 0, checked = 0, skipped = 0, library = 0;
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const mc::codegen::PlanStep& step = plan->steps[i];
    std::string name = std::string("mc.") + mc::rt::opName(step.op);
    if (step.entry.empty() && step.op == mc::rt::OpId::Fused) {
      // A region the compiler left to the device's library call: the
      // device must accept it (the rules it binds by), or the model fails
      // on a GPU at load.
      bool ok = false;
      std::string why;
      const char* kind = "cublaslt";
      if (step.attrs.getBool("attention")) {
        // cuDNN's fused attention (its plan is checked by
        // CudnnPlan.AttentionRegionsAsTheDeviceBindsThem).
        mc::rt::AttentionRegion m = mc::codegen::matchAttentionStep(*plan, step);
        ok = m.ok;
        why = m.why;
        kind = "cudnn-attn";
      } else {
        mc::rt::LibraryRegion m = mc::codegen::matchLibraryStep(*plan, step);
        ok = m.kind != mc::rt::LibraryRegion::Kind::None;
        why = m.why;
        if (m.kind == mc::rt::LibraryRegion::Kind::ConvEpilogue)
          kind = "cudnn";
      }
      std::printf("%-5zu %-22s %-12s %9s %10s  %s%s\n", i, name.c_str(), kind,
                  "-", "-", ok ? "library region ok" : "FAILED: ",
                  ok ? "" : why.c_str());
      library += ok;
      failures += !ok;
      continue;
    }
    if (step.entry.empty())
      continue; // a library call (cuBLASLt, cuDNN)
    // Every step runs twice: on positive inputs (log, sqrt and pow in
    // their domain) and on inputs of both signs (negative numbers, zero
    // divisors, false conditions, indices out of range); the table shows
    // the worse run, "(signed)" when it is the second.
    mc::gputest::StepCheck r;
    std::string error;
    bool signedWorse = false, ran = true;
    for (bool positive : {true, false}) {
      mc::gputest::StepCheck run;
      if (!mc::gputest::checkStep(*plan, i, batch, positive, *runner, &run,
                                  &error)) {
        ran = false;
        break;
      }
      auto badness = [](const mc::gputest::StepCheck& c) {
        bool errors = !c.cpuError.empty() || !c.deviceError.empty();
        if (errors && c.cpuError != c.deviceError)
          return std::numeric_limits<double>::infinity();
        return c.worst;
      };
      if (positive || badness(run) > badness(r)) {
        signedWorse = !positive;
        r = run;
      }
      if (!r.skipped.empty())
        break;
    }
    if (!ran) {
      std::printf("%-5zu %-22s %-12s %9s %10s  FAILED: %s\n", i, name.c_str(),
                  "-", "-", "-", error.c_str());
      ++failures;
      continue;
    }
    if (!r.skipped.empty()) {
      std::printf("%-5zu %-22s %-12s %9s %10s  skipped: %s\n", i, name.c_str(),
                  "-", "-", "-", r.skipped.c_str());
      ++skipped;
      continue;
    }
    if (!r.cpuError.empty() || !r.deviceError.empty()) {
      // A step that failed on the CPU: the kernel's error record must say
      // the same.
      bool same = r.cpuError == r.deviceError;
      std::printf("%-5zu %-22s %-12s %9s %10s  %s: cpu '%s', kernel '%s'\n", i,
                  name.c_str(), r.kind.c_str(), "-", "-",
                  same ? "same error" : "ERROR MISMATCH", r.cpuError.c_str(),
                  r.deviceError.c_str());
      ++checked;
      failures += !same;
      continue;
    }
    bool ok = r.worst <= tol;
    std::printf("%-5zu %-22s %-12s %9zu %10.2e  %s%s", i, name.c_str(),
                r.kind.c_str(), r.elements, r.worst, ok ? "ok" : "MISMATCH",
                signedWorse ? " (signed)" : "");
    if (!ok)
      std::printf(" (element %zu: cpu %.9g, lavapipe %.9g)", r.worstAt, r.cpu,
                  r.lavapipe);
    if (r.oneUlp)
      std::printf(" (%zu one ulp off)", r.oneUlp);
    std::printf("\n");
    ++checked;
    failures += !ok;
  }
  std::printf("%d generated kernels checked on %s, %d skipped, %d library "
              "regions the device accepts, %d failed (tolerance %.0e)\n",
              checked, runner->deviceName().c_str(), skipped, library,
              failures, tol);
  return failures ? 1 : 0;
}

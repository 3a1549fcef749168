// Lowering of a contract-checked mc module to the executable Plan.
#ifndef MODELC_CODEGEN_MCTOPLAN_H
#define MODELC_CODEGEN_MCTOPLAN_H

#include "codegen/Plan.h"

#include "mlir/IR/BuiltinOps.h"

namespace mc::codegen {

/// Lowers the entry function (`entry`, or the only public function) of a
/// module that passed mc-verify-contract to a Plan: one step per op,
/// constants and parameters as Constant buffers, reshapes as aliases.
/// Memory offsets are not assigned (run the memory planner after). Emits
/// diagnostics and fails on anything it cannot lower.
mlir::FailureOr<Plan> lowerToPlan(mlir::ModuleOp module, llvm::StringRef entry);

/// A human-readable listing of a plan (for --emit=plan).
std::string formatPlan(const Plan& plan);

} // namespace mc::codegen

#endif // MODELC_CODEGEN_MCTOPLAN_H

// The mc dialect and its ops: the one header the rest of modelc includes.
#ifndef MODELC_IR_MCDIALECT_H
#define MODELC_IR_MCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/MCOpsDialect.h.inc"

namespace mc {
/// DifferentiableOpInterface's default: the op's rule by its registry id
/// (ir/DerivativeRules.h, derivatives::byOpId); an op error when it has
/// none.
::llvm::LogicalResult
buildRegisteredGradients(::mlir::Operation* op, ::mlir::OpBuilder& builder,
                         ::mlir::ValueRange resultGrads,
                         ::llvm::SmallVectorImpl<::mlir::Value>& operandGrads);
} // namespace mc


#include "ir/MCEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/MCAttrs.h.inc"

#include "ir/MCInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/MCOps.h.inc"

#include <optional>

namespace mc {
/// The value of a float splat, `v` an mc.constant splat or a
/// broadcast_in_dim of one (what the importer and the tracer make of a
/// scalar); nullopt for anything else. The canonicalizer and the graph
/// rewrites match exponents and epsilons with it.
std::optional<double> floatSplatValue(::mlir::Value v);
} // namespace mc

#endif // MODELC_IR_MCDIALECT_H

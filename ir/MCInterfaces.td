// The op interfaces of the mc dialect: what passes ask of ops.
#ifndef MC_INTERFACES_TD
#define MC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def MC_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mc";
  let description = [{
    An op that knows its reverse-mode derivative. `mc-autodiff` calls
    `buildGradients` for each op on the path from a parameter to the loss,
    walking the function backwards; the rules follow PyTorch's formulas
    (derivatives.yaml) and match the eager autograd of
    `frontend/Autograd.cpp`, so a compiled gradient equals the eager one.

    A new op joins autodiff by implementing this interface: either by
    listing the interface as a trait, which uses the default below (the
    op's rule found by its registry id in `ir/DerivativeRules.h`,
    `derivatives::byOpId`, the dispatch eager autograd shares), or, for ops
    whose rule reads attributes, with `DeclareOpInterfaceMethods` and an
    `MC_GRADIENT` line in `MCGradients.cpp`. The pass has no per-op switch.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradient of every
        operand from the gradients of the results (`resultGrads`, one per
        result; a null entry means that result gets no gradient). Fills
        `operandGrads` with exactly one entry per operand, of the operand's
        type, or a null Value where the operand gets no gradient (integer
        and `i1` operands, indices, the outputs of comparisons). An op with
        no derivative yet emits an op error that says why and fails.
      }],
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::mc::buildRegisteredGradients($_op.getOperation(), builder,
                                              resultGrads, operandGrads);
      }]>,
  ];
}

#endif // MC_INTERFACES_TD

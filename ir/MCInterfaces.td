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

    A new op joins autodiff by listing this interface as a trait and adding
    its rule to `ir/DerivativeRules.h`: the default below reads the op's
    attributes in registry form (ODS names) and calls the op's rule through
    `derivatives::byOpId`, the one dispatch eager autograd shares. Neither
    the pass nor `MCGradients.cpp` has a per-op case.
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

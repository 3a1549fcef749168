// The mc dialect's operations.
#ifndef MC_OPS_TD
#define MC_OPS_TD

include "ir/MCBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def MC_ConstantOp : MC_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor constant";
  let description = [{
    A constant tensor. Large values (weights) are better kept as named
    parameters (`ml_program.global`), which the artifact stores by name.

    ```mlir
    %c = mc.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class MC_BinaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : MC_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def MC_AddOp : MC_BinaryOp<"add", MC_NumericTensor, [Commutative]> {
  let summary = "elementwise addition";
  let description = [{
    `lhs + rhs`; both operands and the result have one type (broadcast first
    with `mc.broadcast_in_dim`). Folds `x + 0` and `0 + x` to `x`; for
    floats that turns `-0.0 + 0.0` into `-0.0` instead of `+0.0`, the same
    trade XLA's algebraic simplifier makes.

    ```mlir
    %0 = mc.add %a, %b : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}

def MC_SubOp : MC_BinaryOp<"sub", MC_NumericTensor> {
  let summary = "elementwise subtraction";
  let description = [{
    `lhs - rhs`. Folds `x - 0` to `x`.

    ```mlir
    %0 = mc.sub %a, %b : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}

def MC_MulOp : MC_BinaryOp<"mul", MC_NumericTensor, [Commutative]> {
  let summary = "elementwise multiplication";
  let description = [{
    `lhs * rhs`. Folds `x * 1` and `1 * x` to `x`.

    ```mlir
    %0 = mc.mul %a, %b : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}

def MC_DivOp : MC_BinaryOp<"div", MC_NumericTensor> {
  let summary = "elementwise division";
  let description = [{
    `lhs / rhs` (IEEE for floats; integers truncate toward zero, and an
    integer division by zero yields 0 rather than trapping). Folds `x / 1`.

    ```mlir
    %0 = mc.div %a, %b : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}

def MC_MaximumOp : MC_BinaryOp<"maximum", MC_NumericTensor, [Commutative]> {
  let summary = "elementwise maximum";
  let description = [{
    `max(lhs, rhs)`; NaN in either operand gives NaN (as `torch.maximum`).

    ```mlir
    %0 = mc.maximum %a, %b : tensor<4x8xf32>
    ```
  }];
}

class MC_UnaryOp<string mnemonic, Type operandType, string expr>
    : MC_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # expr;
  let description = "Computes `" # expr # "` for each element.\n\n"
      "```mlir\n%0 = mc." # mnemonic # " %x : tensor<4x8xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def MC_NegOp : MC_UnaryOp<"neg", MC_NumericTensor, "-x">;
def MC_ExpOp : MC_UnaryOp<"exp", MC_FloatTensor, "exp(x)">;
def MC_LogOp : MC_UnaryOp<"log", MC_FloatTensor, "log(x)">;
def MC_TanhOp : MC_UnaryOp<"tanh", MC_FloatTensor, "tanh(x)">;
def MC_SigmoidOp : MC_UnaryOp<"sigmoid", MC_FloatTensor, "1 / (1 + exp(-x))">;
def MC_ReluOp : MC_UnaryOp<"relu", MC_NumericTensor, "max(x, 0)">;
def MC_SqrtOp : MC_UnaryOp<"sqrt", MC_FloatTensor, "sqrt(x)">;

def MC_CastOp : MC_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "element type conversion";
  let description = [{
    The only op that changes an element type. Float to integer truncates
    toward zero; anything to `i1` is `x != 0`; to `f16`/`bf16` rounds to
    nearest even. A cast to the same type folds away, and a cast of a cast
    becomes one cast when the middle type holds every value of the first
    exactly (`f16 -> f32 -> bf16` is `f16 -> bf16`; `f32 -> f16 -> f32`
    stays, since it rounds).

    ```mlir
    %0 = mc.cast %x : tensor<4xf32> to tensor<4xbf16>
    ```
  }];
  let arguments = (ins MC_Tensor:$input);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def MC_BroadcastInDimOp : MC_Op<"broadcast_in_dim", [Pure,
    AllElementTypesMatch<["input", "result"]>]> {
  let summary = "explicit broadcast";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]`; its size must
    be 1 (broadcast) or equal to that result dimension. `dims` are unique
    and in range; result dimensions not named in `dims` are new. The same
    semantics as StableHLO's `broadcast_in_dim`.

    ```mlir
    %0 = mc.broadcast_in_dim %bias, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $input `,` `dims` `=` $dims attr-dict `:` `(` type($input) `)` `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MC_ReshapeOp : MC_Op<"reshape", [Pure,
    AllElementTypesMatch<["input", "result"]>]> {
  let summary = "reshape to a type with the same number of elements";
  let description = [{
    Reinterprets the elements, in row-major order, with another static
    shape. A reshape of a reshape is one reshape; a reshape to the operand's
    own type folds away.

    ```mlir
    %0 = mc.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` `(` type($input) `)` `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MC_TransposeOp : MC_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`. A transpose of
    a transpose is one transpose; the identity permutation folds away.

    ```mlir
    %0 = mc.transpose %x, permutation = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $input `,` `permutation` `=` $permutation attr-dict `:` `(` type($input) `)` `->` type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class MC_ReduceOp<string mnemonic, Type operandType, string what>
    : MC_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = what # " over dimensions";
  let description = what # " over `dims` (unique, in range; printed sorted). "
      "Those dimensions are removed from the result, or kept with size 1 "
      "with `keepdim`.\n\n"
      "```mlir\n%0 = mc." # mnemonic # " %x, dims = [1] keepdim : "
      "(tensor<4x8xf32>) -> tensor<4x1xf32>\n```";
  let arguments = (ins operandType:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs operandType:$result);
  let assemblyFormat = [{
    $input `,` `dims` `=` $dims (`keepdim` $keepdim^)? attr-dict `:` `(` type($input) `)` `->` type($result)
  }];
}

def MC_ReduceSumOp : MC_ReduceOp<"reduce_sum", MC_FloatTensor, "sum">;
def MC_ReduceMeanOp : MC_ReduceOp<"reduce_mean", MC_FloatTensor, "mean">;
def MC_ReduceMaxOp : MC_ReduceOp<"reduce_max", MC_NumericTensor, "maximum">;

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

def MC_MatmulOp : MC_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix multiplication";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_a`), `rhs` is
    `[..., K, N]` (`[..., N, K]` with `transpose_b`); both have the same rank
    (at least 2) and the same batch dimensions, and the result is
    `[..., M, N]`. Accumulates in f32.

    ```mlir
    %0 = mc.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$lhs, MC_FloatTensor:$rhs,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? attr-dict
    `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def MC_SoftmaxOp : MC_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis` (non-negative, in
    range), computed with the maximum subtracted so it never overflows.

    ```mlir
    %0 = mc.softmax %x, axis = 1 : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, I64Attr:$axis);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = "$input `,` `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // MC_OPS_TD

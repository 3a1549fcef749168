// The mc dialect's operations.
#ifndef MC_OPS_TD
#define MC_OPS_TD

include "ir/MCBase.td"
include "ir/MCEnums.td"
include "ir/MCInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def MC_ConstantOp : MC_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let mcStep = 0;
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
    : MC_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                            MC_DifferentiableOpInterface])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def MC_AddOp : MC_BinaryOp<"add", MC_NumericTensor, [Commutative]> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
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
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
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
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
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
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
  let summary = "elementwise division";
  let description = [{
    `lhs / rhs` (IEEE for floats; integers truncate toward zero, the
    minimum divided by -1 wraps, and an integer division by zero is a run
    error naming the first such element, on the CPU and, through the
    kernel's error record, on cuda). Folds `x / 1`.

    ```mlir
    %0 = mc.div %a, %b : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}

def MC_MaximumOp : MC_BinaryOp<"maximum", MC_NumericTensor, [Commutative]> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
  let summary = "elementwise maximum";
  let description = [{
    `max(lhs, rhs)`; NaN in either operand gives NaN (as `torch.maximum`).

    ```mlir
    %0 = mc.maximum %a, %b : tensor<4x8xf32>
    ```
  }];
}

class MC_UnaryOp<string mnemonic, Type operandType, string expr>
    : MC_Op<mnemonic, [Pure, SameOperandsAndResultType,
                       MC_DifferentiableOpInterface]> {
  let summary = "elementwise " # expr;
  let description = "Computes `" # expr # "` for each element.\n\n"
      "```mlir\n%0 = mc." # mnemonic # " %x : tensor<4x8xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def MC_NegOp : MC_UnaryOp<"neg", MC_NumericTensor, "-x"> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
}
def MC_ExpOp : MC_UnaryOp<"exp", MC_FloatTensor, "exp(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_LogOp : MC_UnaryOp<"log", MC_FloatTensor, "log(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_TanhOp : MC_UnaryOp<"tanh", MC_FloatTensor, "tanh(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
}
def MC_SinOp : MC_UnaryOp<"sin", MC_FloatTensor, "sin(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_CosOp : MC_UnaryOp<"cos", MC_FloatTensor, "cos(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_TanOp : MC_UnaryOp<"tan", MC_FloatTensor, "tan(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AsinOp : MC_UnaryOp<"asin", MC_FloatTensor, "asin(x), NaN outside [-1, 1]"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AcosOp : MC_UnaryOp<"acos", MC_FloatTensor, "acos(x), NaN outside [-1, 1]"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AtanOp : MC_UnaryOp<"atan", MC_FloatTensor, "atan(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_SinhOp : MC_UnaryOp<"sinh", MC_FloatTensor, "sinh(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_CoshOp : MC_UnaryOp<"cosh", MC_FloatTensor, "cosh(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AsinhOp : MC_UnaryOp<"asinh", MC_FloatTensor, "asinh(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AcoshOp : MC_UnaryOp<"acosh", MC_FloatTensor, "acosh(x), NaN below 1"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_AtanhOp : MC_UnaryOp<"atanh", MC_FloatTensor, "atanh(x), NaN outside [-1, 1]"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
}
def MC_SigmoidOp : MC_UnaryOp<"sigmoid", MC_FloatTensor, "1 / (1 + exp(-x))"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
}
def MC_ReluOp : MC_UnaryOp<"relu", MC_NumericTensor, "max(x, 0)"> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
}
def MC_SqrtOp : MC_UnaryOp<"sqrt", MC_FloatTensor, "sqrt(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
}

def MC_CastOp : MC_Op<"cast", [Pure, SameOperandsAndResultShape,
    MC_DifferentiableOpInterface]> {
  let mcFusible = 1;
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

def MC_CopyOp : MC_Op<"copy", [Pure, SameOperandsAndResultType]> {
  let mcFusible = 1;
  let summary = "a copy of a tensor";
  let description = [{
    The same values in a buffer of their own. Codegen makes copies where a
    value must live apart (an output that is also an input, a store into
    training state); in IR it is a no-op that canonicalization keeps.

    ```mlir
    %0 = mc.copy %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def MC_BroadcastInDimOp : MC_Op<"broadcast_in_dim", [Pure,
    AllElementTypesMatch<["input", "result"]>,
    MC_DifferentiableOpInterface]> {
  let mcFusible = 1;
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
    AllElementTypesMatch<["input", "result"]>,
    MC_DifferentiableOpInterface]> {
  let mcStep = 0;
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

def MC_TransposeOp : MC_Op<"transpose", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
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
    : MC_Op<mnemonic, [Pure, InferTypeOpAdaptor,
                       MC_DifferentiableOpInterface]> {
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

def MC_ReduceSumOp : MC_ReduceOp<"reduce_sum", MC_FloatTensor, "sum"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
}
def MC_ReduceMeanOp : MC_ReduceOp<"reduce_mean", MC_FloatTensor, "mean"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
}
def MC_ReduceMaxOp : MC_ReduceOp<"reduce_max", MC_NumericTensor, "maximum"> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
}

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

def MC_MatmulOp : MC_Op<"matmul", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let mcEpilogueAnchor = 1;
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "low";
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

def MC_SoftmaxOp : MC_Op<"softmax", [Pure, SameOperandsAndResultType,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
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

//===----------------------------------------------------------------------===//
// Ops of real models (CNNs, transformers, ONNX graphs)
//===----------------------------------------------------------------------===//

def MC_AbsOp : MC_UnaryOp<"abs", MC_NumericTensor, "|x|"> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
}
def MC_ErfOp : MC_UnaryOp<"erf", MC_FloatTensor, "erf(x)"> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
}
def MC_NotOp : MC_UnaryOp<"not", MC_BoolTensor, "logical not"> {
  let mcFusible = 1;
}

def MC_GeluOp : MC_Op<"gelu", [Pure, SameOperandsAndResultType,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
  let summary = "GELU activation";
  let description = [{
    `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`, or with
    `tanh_approximation` PyTorch's `approximate='tanh'` form
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %0 = mc.gelu %x tanh_approximation : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, UnitAttr:$tanh_approximation);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`tanh_approximation` $tanh_approximation^)? attr-dict `:` type($result)
  }];
}

def MC_HardswishOp : MC_Op<"hardswish", [Pure, SameOperandsAndResultType,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcFusible = 1;
  let summary = "hard swish activation";
  let description = [{
    `x * min(max(x + 3, 0), 6) / 6` for each element (MobileNetV3's
    activation; `torch.nn.Hardswish`, ONNX `HardSwish`).

    ```mlir
    %0 = mc.hardswish %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def MC_PowOp : MC_BinaryOp<"pow", MC_FloatTensor> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let mcFusible = 1;
  let summary = "elementwise power";
  let description = [{
    `lhs ^ rhs` with C's `pow` semantics; an exponent of 2 is computed as
    `lhs * lhs` (as `torch.pow` does: one rounding, and ~10x cheaper than
    `powf`). It stays a `pow` in the IR, on AMP's f32 list: a `mul` would
    follow its inputs' precision, and an f16 square overflows above 256.

    ```mlir
    %0 = mc.pow %a, %b : tensor<4xf32>
    ```
  }];
}

def MC_MinimumOp : MC_BinaryOp<"minimum", MC_NumericTensor, [Commutative]> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
  let summary = "elementwise minimum";
  let description = [{
    `min(lhs, rhs)`; NaN in either operand gives NaN (as `torch.minimum`).

    ```mlir
    %0 = mc.minimum %a, %b : tensor<4xf32>
    ```
  }];
}

def MC_ClampOp : MC_Op<"clamp", [Pure, SameOperandsAndResultType,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
  let mcFusible = 1;
  let summary = "clamp to [min, max]";
  let description = [{
    `min(max(x, min), max)`; NaN stays NaN. `relu6` is a clamp to [0, 6].
    The bounds are converted to the element type.

    ```mlir
    %0 = mc.clamp %x, min = 0.0, max = 6.0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins MC_NumericTensor:$input, F64Attr:$min, F64Attr:$max);
  let results = (outs MC_NumericTensor:$result);
  let assemblyFormat = [{
    $input `,` `min` `=` $min `,` `max` `=` $max attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def MC_DropoutOp : MC_Op<"dropout", [Pure,
    AllTypesMatch<["input", "result"]>, MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let summary = "inverted dropout with a counter-based random mask";
  let description = [{
    Element `i` (row-major) is kept, scaled by `1 / (1 - p)` in f32, where
    the top 24 bits of its random word are below `round((1 - p) * 2^24)`,
    and multiplied by 0 otherwise (a dropped NaN stays NaN, as PyTorch's
    product with the mask). The word is word `i % 4` of Philox4x32-10 at
    counter `(i / 4, offset)` under key `seed` (two 32-bit words each, low
    first): a pure function of the operands, so the mask is the same on
    every device and in every run with the same `seed` and `offset`, and the
    gradient is the same op on the incoming gradient (no mask is kept).
    A traced training step reads `seed` and `offset` from the state
    `rng.seed` and `rng.offset` and stores the offset its dropouts used
    (docs/training.md, "Dropout").

    ```mlir
    %0 = mc.dropout %x, %seed, %offset, p = 1.000000e-01 : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, MC_I64Scalar:$seed,
                       MC_I64Scalar:$offset, F64Attr:$p);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $seed `,` $offset `,` `p` `=` $p attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def MC_CompareOp : MC_Op<"compare", [Pure, SameTypeOperands,
    SameOperandsAndResultShape, MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64,i1";
  let mcFusible = 1;
  let summary = "elementwise comparison";
  let description = [{
    `lhs <direction> rhs` as an `i1` tensor of the operands' shape. With NaN
    every direction is false except `NE`.

    ```mlir
    %0 = mc.compare LT, %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    ```
  }];
  let arguments = (ins MC_ComparisonDirection:$direction, MC_Tensor:$lhs,
                       MC_Tensor:$rhs);
  let results = (outs MC_BoolTensor:$result);
  let assemblyFormat = [{
    $direction `,` $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

def MC_SelectOp : MC_Op<"select", [Pure, AllTypesMatch<["on_true", "on_false", "result"]>,
    AllShapesMatch<["pred", "result"]>, MC_DifferentiableOpInterface]> {
  let mcFusible = 1;
  let summary = "elementwise choice";
  let description = [{
    `pred ? on_true : on_false`, elementwise (`torch.where`).

    ```mlir
    %0 = mc.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins MC_BoolTensor:$pred, MC_Tensor:$on_true,
                       MC_Tensor:$on_false);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($result)
  }];
}

def MC_LogSoftmaxOp : MC_Op<"log_softmax", [Pure, SameOperandsAndResultType,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let summary = "log of softmax along one axis";
  let description = [{
    `x - max(x) - log(sum(exp(x - max(x))))` along `axis`, which never
    overflows and keeps precision where `log(softmax(x))` would not.

    ```mlir
    %0 = mc.log_softmax %x, axis = 1 : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, I64Attr:$axis);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = "$input `,` `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MC_ReduceMinOp : MC_ReduceOp<"reduce_min", MC_NumericTensor, "minimum"> {
  let mcCpuTypes = "f32,f16,bf16,i32,i64";
}

def MC_ConcatOp : MC_Op<"concat", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let summary = "concatenation along one axis";
  let description = [{
    Joins one or more tensors of one element type and rank along `axis`;
    the other dimensions must be equal.

    ```mlir
    %0 = mc.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x7xf32>
    ```
  }];
  let arguments = (ins Variadic<MC_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` `(` type($inputs) `)` `->` type($result)
  }];
}

def MC_SliceOp : MC_Op<"slice", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let summary = "strided slice with static bounds";
  let description = [{
    Per dimension `d`, takes the elements `start[d], start[d] + strides[d],
    ...` below `limit[d]` (`0 <= start <= limit <= size`, `strides >= 1`),
    as StableHLO's `slice`.

    ```mlir
    %0 = mc.slice %x, start = [0, 1], limit = [2, 7], strides = [1, 2] : (tensor<2x8xf32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$strides);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $input `,` `start` `=` $start `,` `limit` `=` $limit `,` `strides` `=` $strides attr-dict
    `:` `(` type($input) `)` `->` type($result)
  }];
  let hasFolder = 1;
}

def MC_GatherOp : MC_Op<"gather", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let summary = "take along one axis (ONNX Gather, embedding lookup)";
  let description = [{
    `result[i..., j..., k...] = input[i..., indices[j...], k...]` where `i`
    spans the dimensions before `axis`; the result shape is
    `input.shape[:axis] + indices.shape + input.shape[axis+1:]`. Negative
    indices count from the end; an index out of range is a run-time error.

    ```mlir
    %0 = mc.gather %table, %ids, axis = 0 : (tensor<100x16xf32>, tensor<2x5xi64>) -> tensor<2x5x16xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input, MC_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` `axis` `=` $axis attr-dict `:` `(` type($input) `,` type($indices) `)` `->` type($result)
  }];
}

def MC_ScatterAddOp : MC_Op<"scatter_add", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32";
  let mcAmp = "f32";
  let summary = "sum rows into a zero tensor by index (the adjoint of gather)";
  let description = [{
    The adjoint of `mc.gather` along `axis`: the result, of shape
    `updates.shape[:axis] + [size] + updates.shape[axis + rank(indices):]`,
    is zero but for `result[i..., indices[j...], k...] += updates[i...,
    j..., k...]`, repeated indices summing (an embedding's gradient,
    torch.index_add into zeros). `updates.shape[axis : axis +
    rank(indices)]` must be the indices' shape. Negative indices count from
    the end; an index out of `[-size, size)` is a run-time error. The sums
    run in index order, so the result is the same in every run and on
    every thread count. f32 only: a gradient in f16 or bf16 is summed in
    f32 (the derivative of gather casts around it).

    ```mlir
    %0 = mc.scatter_add %g, %ids, axis = 0, size = 100 : (tensor<2x5x16xf32>, tensor<2x5xi64>) -> tensor<100x16xf32>
    ```
  }];
  let arguments = (ins MC_F32Tensor:$updates, MC_IndexTensor:$indices,
                       I64Attr:$axis, I64Attr:$size);
  let results = (outs MC_F32Tensor:$result);
  let assemblyFormat = [{
    $updates `,` $indices `,` `axis` `=` $axis `,` `size` `=` $size attr-dict
    `:` `(` type($updates) `,` type($indices) `)` `->` type($result)
  }];
}

def MC_PadOp : MC_Op<"pad", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let summary = "constant padding";
  let description = [{
    Adds `low[d]` elements before and `high[d]` after dimension `d` (both
    `>= 0`), filled with `value` converted to the element type.

    ```mlir
    %0 = mc.pad %x, low = [0, 1], high = [0, 2], value = 0.0 : (tensor<2x3xf32>) -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins MC_Tensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, F64Attr:$value);
  let results = (outs MC_Tensor:$result);
  let assemblyFormat = [{
    $input `,` `low` `=` $low `,` `high` `=` $high `,` `value` `=` $value attr-dict
    `:` `(` type($input) `)` `->` type($result)
  }];
  // A pad of nothing is its input (PyTorch's AvgPool2d exports one).
  let hasFolder = 1;
}

def MC_Conv2dOp : MC_Op<"conv2d", [Pure, InferTypeOpAdaptor,
    MC_DifferentiableOpInterface]> {
  let mcEpilogueAnchor = 1;
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "low";
  let summary = "2-D convolution, NCHW or NHWC";
  let description = [{
    Cross-correlation as in PyTorch and ONNX: `input` is `[N, C, H, W]`,
    `weight` is `[O, C / groups, KH, KW]`, the result `[N, O, OH, OW]` with
    `OH = (H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) / stride_h
    + 1` (and the same for W). `padding` is `[top, left, bottom, right]`;
    `strides` and `dilation` are `[h, w]`; `groups` divides C and O
    (depthwise: `groups = C = O`). A bias is a broadcast add after it.

    With `channels_last`, `input` is `[N, H, W, C]` and the result
    `[N, OH, OW, O]`; the weight stays `[O, C / groups, KH, KW]`. Frontends
    emit NCHW; mc-channels-last switches a target's convolutions over
    (inference only: autodiff refuses the attribute).

    ```mlir
    %0 = mc.conv2d %x, %w, strides = [2, 2], padding = [3, 3, 3, 3], dilation = [1, 1], groups = 1
        : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, MC_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       UnitAttr:$channels_last);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` `strides` `=` $strides `,` `padding` `=` $padding `,`
    `dilation` `=` $dilation `,` `groups` `=` $groups
    (`channels_last` $channels_last^)? attr-dict
    `:` `(` type($input) `,` type($weight) `)` `->` type($result)
  }];
}

class MC_Pool2dOp<string mnemonic, string what, dag extraArgs, string extraFormat>
    : MC_Op<mnemonic, [Pure, InferTypeOpAdaptor,
                       MC_DifferentiableOpInterface]> {
  let summary = what # " pooling, NCHW (NHWC with channels_last)";
  let arguments = !con((ins MC_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                            DenseI64ArrayAttr:$strides,
                            DenseI64ArrayAttr:$padding,
                            DenseI64ArrayAttr:$dilation, UnitAttr:$ceil_mode),
                       extraArgs, (ins UnitAttr:$channels_last));
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = "$input `,` `kernel` `=` $kernel `,` `strides` `=` $strides `,` "
      "`padding` `=` $padding `,` `dilation` `=` $dilation (`ceil_mode` $ceil_mode^)? "
      # extraFormat # " (`channels_last` $channels_last^)? attr-dict `:` `(` type($input) `)` `->` type($result)";
}

def MC_MaxPool2dOp : MC_Pool2dOp<"max_pool2d", "max", (ins), ""> {
  let mcCpuTypes = "f32,f16,bf16";
  let description = [{
    The maximum of each `kernel` window (`[h, w]`), moved by `strides`, over
    the input padded by `padding` (`[top, left, bottom, right]`, padding
    never wins). The output size is
    `(H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) / stride_h + 1`,
    rounded up with `ceil_mode` (PyTorch's rule: a window must start inside
    the input or the left padding). With `channels_last`, input and result
    are `[N, H, W, C]` (as for `mc.conv2d`).

    ```mlir
    %0 = mc.max_pool2d %x, kernel = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1]
        : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
}

def MC_AvgPool2dOp : MC_Pool2dOp<"avg_pool2d", "average",
    (ins UnitAttr:$count_include_pad), "(`count_include_pad` $count_include_pad^)?"> {
  let mcCpuTypes = "f32,f16,bf16";
  let description = [{
    The mean of each window; the divisor counts the padded positions with
    `count_include_pad` (PyTorch's default), else only the input positions.
    Output size as `mc.max_pool2d`; `dilation` must be `[1, 1]`.

    ```mlir
    %0 = mc.avg_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1]
        count_include_pad : (tensor<1x8x8x8xf32>) -> tensor<1x8x4x4xf32>
    ```
  }];
}

def MC_BatchNormOp : MC_Op<"batch_norm", [Pure,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["scale", "offset", "mean", "variance"]>,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let summary = "batch normalization, inference form";
  let description = [{
    `(x - mean) / sqrt(variance + epsilon) * scale + offset` with the 1-D
    statistics and parameters (size `input.shape[feature_axis]`) broadcast
    along `feature_axis`.

    ```mlir
    %0 = mc.batch_norm %x, %scale, %offset, %mean, %var, epsilon = 1.0e-05, feature_axis = 1
        : tensor<1x64x56x56xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, MC_FloatTensor:$scale,
                       MC_FloatTensor:$offset, MC_FloatTensor:$mean,
                       MC_FloatTensor:$variance, F64Attr:$epsilon,
                       I64Attr:$feature_axis);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $offset `,` $mean `,` $variance `,` `epsilon` `=` $epsilon `,`
    `feature_axis` `=` $feature_axis attr-dict `:` type($input) `,` type($scale)
  }];
  let hasVerifier = 1;
}

def MC_LayerNormOp : MC_Op<"layer_norm", [Pure,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["gamma", "beta"]>,
    MC_DifferentiableOpInterface]> {
  let mcCpuTypes = "f32,f16,bf16";
  let mcAmp = "f32";
  let summary = "layer normalization";
  let description = [{
    Normalizes over the trailing dimensions `[axis, rank)`: mean and biased
    variance per row, `(x - mean) / sqrt(var + epsilon) * gamma + beta`, with
    `gamma` and `beta` of shape `input.shape[axis:]` (PyTorch's LayerNorm).

    ```mlir
    %0 = mc.layer_norm %x, %g, %b, axis = 2, epsilon = 1.0e-05 : tensor<8x128x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$input, MC_FloatTensor:$gamma,
                       MC_FloatTensor:$beta, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `,` `axis` `=` $axis `,` `epsilon` `=` $epsilon attr-dict
    `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def MC_FusedOp : MC_Op<"fused", [IsolatedFromAbove, SingleBlock,
    RecursiveMemoryEffects]> {
  let summary = "a fused region: ops that run as one step";
  let description = [{
    What `mc-fuse` makes: a group of ops a backend runs as one step, one
    pass over memory on the CPU and one kernel on a GPU. The body's block
    arguments are the region's inputs (the op's operands, in order); its
    `mc.yield` gives the result. Every value the body computes has the
    result's shape; an input of another shape reaches the body's ops only
    through a `mc.broadcast_in_dim` (or is rank 0, a scalar broadcast
    everywhere). The body's first op may be an epilogue anchor (`mc.matmul`,
    `mc.conv2d`, the registry's `mcEpilogueAnchor`); every other op is
    elementwise (the registry's `mcFusible`).

    With `attention`, the region is the attention pattern mc-fuse
    recognizes: `matmul(q, k)`, an optional scale and mask (elementwise,
    broadcasts of inputs), `softmax` over the last dim, `matmul(p, v)`.
    There every value has the result's rank and leading dims (the batch
    and heads), so a backend may run it one `[S, T]` slice at a time, or as
    one fused attention kernel.

    Either kind may read an input through *views*: `mc.transpose`,
    `mc.reshape` and `mc.slice` ops whose operand is a block argument or
    another view, none of them the last op. A backend reads a view from the
    input's bytes at strides (`shapes::applyView`) instead of a step copying
    it; the ops that read a view see it at the result's shape (attention:
    its rank and leading dims).

    ```mlir
    %0 = mc.fused %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
    ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %c: tensor<4xf32>):
      %1 = mc.conv2d %a, %k, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1
          : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
      %2 = mc.broadcast_in_dim %c, dims = [1] : (tensor<4xf32>) -> tensor<1x4x6x6xf32>
      %3 = mc.add %1, %2 : tensor<1x4x6x6xf32>
      %4 = mc.relu %3 : tensor<1x4x6x6xf32>
      mc.yield %4 : tensor<1x4x6x6xf32>
    }
    ```

    A plain elementwise region (no attention, no anchor, no reduction
    ending it) may have more than one result: its first is the last op's
    value, the others values the body computes on the way (an optimizer's
    new moments beside the new parameter; a value the region reads that
    something after it reads too), each written once per element in the
    same pass instead of by a region of its own.

    ```mlir
    %m1, %p1 = mc.fused %m, %g, %p : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>):
      %0 = mc.add %a, %b : tensor<4xf32>
      %1 = mc.sub %c, %0 : tensor<4xf32>
      mc.yield %1, %0 : tensor<4xf32>, tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<MC_Tensor>:$inputs, UnitAttr:$attention);
  let results = (outs Variadic<MC_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, $results) $body
  }];
  let extraClassDeclaration = [{
    /// The region's main result: what its last op computes.
    ::mlir::Value getResult() { return getResults().front(); }
  }];
  let hasRegionVerifier = 1;
}

def MC_YieldOp : MC_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">,
    ReturnLike]> {
  let mcStep = 0;
  let summary = "the results of a fused region";
  let arguments = (ins Variadic<MC_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// Collectives (data parallelism)
//===----------------------------------------------------------------------===//

def MC_AllReduceStartOp : MC_Op<"all_reduce_start"> {
  let mcCpuTypes = "f32";
  let summary = "start summing a bucket of gradients over every rank";
  let description = [{
    Packs its operands (flattened, in order) into one 1-D bucket and starts
    an all-reduce (sum) of it over the `ranks` processes of a data-parallel
    run; the result is the bucket *in flight*: only `mc.all_reduce_wait`
    may read it, and it holds the sum once that wait has run. Splitting the
    collective into a start and a wait lets the steps between them (the
    rest of the backward pass) run while the bucket is on the wire, as
    PyTorch DDP's bucketed all-reduce does. `mc-dp-partition` places a start
    right after the last gradient of its bucket exists.

    Not `Pure`: the pair talks to the other ranks, so it is never CSE'd,
    hoisted or dropped. The runtime checks that the world it runs in has
    `ranks` processes.

    ```mlir
    %b = mc.all_reduce_start %g0, %g1 ranks = 2 : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<16xf32>
    %s = mc.all_reduce_wait %b scale = 5.000000e-01 : tensor<16xf32>
    ```
  }];
  let arguments = (ins Variadic<MC_FloatTensor>:$inputs, I64Attr:$ranks);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `ranks` `=` $ranks attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
}

def MC_AllReduceWaitOp : MC_Op<"all_reduce_wait",
    [AllTypesMatch<["bucket", "result"]>]> {
  let mcCpuTypes = "f32";
  let summary = "finish an all-reduce and scale its sum";
  let description = [{
    Waits until the all-reduce that `mc.all_reduce_start` began on `bucket`
    is complete, and returns the sum times `scale` (`1 / ranks` makes it
    the mean, the gradient of the global batch's mean loss). A rank that
    died or hangs makes the wait fail after the runtime's timeout, naming
    the rank and the collective, instead of hanging.

    ```mlir
    %s = mc.all_reduce_wait %b scale = 5.000000e-01 : tensor<16xf32>
    ```
  }];
  let arguments = (ins MC_FloatTensor:$bucket, F64Attr:$scale);
  let results = (outs MC_FloatTensor:$result);
  let assemblyFormat = "$bucket `scale` `=` $scale attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // MC_OPS_TD

// The mc dialect: definition, element types and the op base class.
#ifndef MC_BASE_TD
#define MC_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def MC_Dialect : Dialect {
  let name = "mc";
  let cppNamespace = "::mc";
  let summary = "modelc's tensor dialect: traced models with value semantics";
  let description = [{
    `mc` holds models traced from modelc's eager frontend or imported from
    ONNX. Values are ranked tensors with value semantics. Shapes are static,
    except for one symbol per function, the batch: every `?` of a function
    is the same size, known at run time and bounded by the function's
    `mc.batch = array<i64: MIN, MAX, OPT>` attribute;
    broadcasts are explicit (`mc.broadcast_in_dim`), so no pass ever guesses
    how shapes line up, and `mc.cast` is the only op that changes an element
    type. Named parameters live in `ml_program.global` symbols and are read
    with `ml_program.global_load_const`.

    Element types: `f32`, `f16`, `bf16`, `i32`, `i64`, `i1`.
  }];
  let hasConstantMaterializer = 1;
  // `mc.batch` on a function: the bounds of its dynamic batch (ir/Batch.h).
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def MC_BatchEncoding : AttrDef<MC_Dialect, "BatchEncoding"> {
  let mnemonic = "batch";
  let summary = "the multiple of the batch each dynamic dim of a tensor is";
  let description = [{
    A tensor type's encoding when a dynamic dim is a multiple of the
    function's batch other than the batch itself: one entry per `?` of the
    type, in order, each >= 1, not all 1 (a plain `?` is the batch).
    `tensor<?x64xf32, #mc.batch<[8]>>` is `[8 * B, 64]`, the
    `[B * S, E]` of a flattened sequence.

    ```mlir
    %0 = mc.reshape %x : (tensor<?x8x64xf32>) -> tensor<?x64xf32, #mc.batch<[8]>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t", "multiples">:$multiples);
  let assemblyFormat = "`<` `[` $multiples `]` `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def MC_Float : AnyTypeOf<[F32, F16, BF16], "floating-point (f32, f16, bf16)">;
def MC_Int : AnyTypeOf<[I32, I64], "integer (i32, i64)">;
def MC_Numeric : AnyTypeOf<[F32, F16, BF16, I32, I64], "numeric">;
def MC_Element : AnyTypeOf<[F32, F16, BF16, I32, I64, I1],
                            "mc element type (f32, f16, bf16, i32, i64, i1)">;

def MC_Index : AnyTypeOf<[I32, I64], "index integer (i32, i64)">;

def MC_Tensor : RankedTensorOf<[MC_Element]>;
def MC_BoolTensor : RankedTensorOf<[I1]>;
def MC_IndexTensor : RankedTensorOf<[MC_Index]>;
def MC_FloatTensor : RankedTensorOf<[MC_Float]>;
def MC_F32Tensor : RankedTensorOf<[F32]>;
def MC_NumericTensor : RankedTensorOf<[MC_Numeric]>;
// A rank-0 i64 tensor (mc.dropout's seed and offset), buildable so the
// assembly format names no type for it.
def MC_I64Scalar : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

//===----------------------------------------------------------------------===//
// Op base
//===----------------------------------------------------------------------===//

// Besides ODS's own fields, every op carries what the layers after the
// dialect need; tools/gen_op_registry.py reads them (llvm-tblgen
// --dump-json) into runtime/include/modelc/ops.inc, the one op registry of
// the runtime, codegen, passes and frontend (docs/compiler.md, "How to add an
// op").
class MC_Op<string mnemonic, list<Trait> traits = []>
    : Op<MC_Dialect, mnemonic, traits> {
  // 1: becomes a runtime step (a kernel per device). 0: codegen handles it
  // itself (constants go to the data section, reshapes become views).
  bit mcStep = 1;
  // mc-amp's class at O1: "low" (runs in the low-precision type), "f32"
  // (kept in f32), "" (follows its inputs).
  string mcAmp = "";
  // 1: an elementwise op that mc-fuse may put in a fused region.
  bit mcFusible = 0;
  // 1: an op whose result mc-fuse may give an elementwise epilogue (bias,
  // residual add, activation) in one fused region with it (matmul,
  // conv2d): the backend computes the epilogue in the same call.
  bit mcEpilogueAnchor = 0;
  // Element types the CPU target has kernels for, the type that picks the
  // kernel being the operands' (the result's when there are none); ""
  // means every type the op's ODS constraints accept.
  string mcCpuTypes = "";
}

#endif // MC_BASE_TD

// Between mc ops and the op registry's generic records (modelc/ops.h): an
// op's attributes as rt::OpAttrs (ODS names, registry kinds), and an op
// built back from its registry id, operands, result type and attributes.
// Codegen writes steps with the first; the tracer builds every op with the
// second, and mc-autodiff hands the first to the one derivative dispatch.
// A new op needs neither a case here nor in their callers.
#ifndef MODELC_IR_REGISTRYOPS_H
#define MODELC_IR_REGISTRYOPS_H

#include "modelc/kernels.h"
#include "modelc/ops.h"
#include "modelc/shapes.h"

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include <string>
#include <optional>
#include <vector>

namespace mc {

/// `op`'s attributes as the registry declares them for `info` (absent unit
/// attributes read false). An op error when one is missing or not of its
/// declared storage.
llvm::FailureOr<rt::OpAttrs> registryAttributes(mlir::Operation* op,
                                                const rt::OpInfo& info);

/// Builds `mc.<mnemonic of id>` with `operands`, one result of
/// `resultType` and `attrs`, converted to the MLIR attributes ODS declares
/// (the registry's storage column). Null, with `*error` set, when `attrs`
/// names an attribute the op does not have, lacks a required one or gives
/// one of the wrong kind. The op is not verified here.
mlir::Operation* buildRegistryOp(mlir::OpBuilder& builder, mlir::Location loc,
                                 rt::OpId id, mlir::ValueRange operands,
                                 mlir::Type resultType,
                                 const rt::OpAttrs& attrs, std::string* error);

/// `view` continued by `op`, a transpose, reshape or slice of static result
/// shape (shapes::applyView with the op's registry attributes): what
/// mc-fuse and mc.fused's verifier ask of a region's views. An error names
/// why the op is no view, or what it is.
rt::Status applyViewOf(mlir::Operation* op, rt::shapes::StridedView* view);

/// The runtime's element type of an MLIR element type (f32, f16, bf16, i32,
/// i64, i1); failure for any other.
llvm::FailureOr<rt::DType> elementDType(mlir::Type type);

/// The raw little-endian bytes of a constant in the runtime's layout (i1 as
/// one byte per element, a splat expanded): dense elements or a dense
/// resource. On failure, an error on `op` (none when `op` is null).
llvm::FailureOr<std::vector<uint8_t>> elementsBytes(mlir::ElementsAttr attr,
                                                    mlir::Operation* op);

/// The bytes elementsBytes would return, without a copy, where the
/// attribute already stores them in that layout: dense elements that are
/// not a splat and not i1, or a dense resource of the right size. They live
/// as long as the attribute's MLIRContext. Nothing otherwise.
std::optional<llvm::ArrayRef<char>> elementsBytesView(mlir::ElementsAttr attr);

} // namespace mc

#endif // MODELC_IR_REGISTRYOPS_H

// The mc dialect: registration and constant materialization.
#include "ir/MCDialect.h"
#include "ir/Batch.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;

#include "ir/MCOpsDialect.cpp.inc"
#include "ir/MCEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/MCAttrs.cpp.inc"
#include "ir/MCInterfaces.cpp.inc"

namespace {
/// Every mc op is pure and region-free, so inlining a function that holds
/// mc ops is always legal.
struct MCInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation*, Region*, bool, IRMapping&) const final {
    return true;
  }
};
} // namespace

void mc::MCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/MCOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/MCAttrs.cpp.inc"
      >();
  addInterfaces<MCInlinerInterface>();
}

Operation* mc::MCDialect::materializeConstant(OpBuilder& builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

LogicalResult mc::MCDialect::verifyOperationAttribute(Operation* op,
                                                      NamedAttribute attr) {
  if (attr.getName() == kBatchAttrName)
    return verifyBatchAttribute(op, attr.getValue());
  return success();
}

LogicalResult
mc::BatchEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              ArrayRef<int64_t> multiples) {
  bool plain = true;
  for (int64_t c : multiples) {
    if (c < 1)
      return emitError() << "#mc.batch multiples must be >= 1, got " << c;
    plain &= c == 1;
  }
  if (plain)
    return emitError() << "#mc.batch with every multiple 1 is a plain `?`; "
                          "drop the encoding";
  return success();
}

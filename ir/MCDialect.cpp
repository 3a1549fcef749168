// The mc dialect: registration and constant materialization.
#include "ir/MCDialect.h"
#include "ir/Batch.h"

#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;

#include "ir/MCOpsDialect.cpp.inc"
#include "ir/MCEnums.cpp.inc"
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

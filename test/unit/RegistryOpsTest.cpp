// Ops and their registry records (ir/RegistryOps.h): every op of the
// dialect's round-trip file (test/ir/ops.mlir) rebuilt from its registry id,
// operands, result type and registry attributes is the same op, and bad
// records are refused with a message that names what is wrong. The tracer
// builds every op this way and codegen writes every step's attributes this
// way, so a new op that breaks the registry shows up here.
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>
#include <set>

using namespace mlir;
namespace rt = mc::rt;

namespace {

struct Context {
  MLIRContext ctx;
  Context() {
    ctx.loadDialect<mc::MCDialect, func::FuncDialect,
                    ml_program::MLProgramDialect>();
  }
};

TEST(RegistryOps, EveryOpOfTheRoundTripFileRebuildsFromItsRecord) {
  Context c;
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(MODELC_OPS_MLIR, &c.ctx);
  ASSERT_TRUE(module) << "cannot parse " << MODELC_OPS_MLIR;
  std::set<rt::OpId> seen;
  std::vector<Operation*> ops;
  module->walk([&](Operation* op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "mc")
      ops.push_back(op);
  });
  for (Operation* op : ops) {
    rt::OpId id;
    ASSERT_TRUE(rt::findOp(op->getName().getStringRef(), &id))
        << op->getName().getStringRef().str() << " is not in the registry";
    seen.insert(id);
    if (id == rt::OpId::Constant) // its value is data, not an attribute
      continue;
    // Region ops are made by mc-fuse around existing ops, not from a
    // record: they round-trip through the printer only.
    if (id == rt::OpId::Fused || id == rt::OpId::Yield)
      continue;
    FailureOr<rt::OpAttrs> attrs = mc::registryAttributes(op, rt::opInfo(id));
    ASSERT_TRUE(succeeded(attrs));
    OpBuilder b(op);
    std::string error;
    Operation* rebuilt =
        mc::buildRegistryOp(b, op->getLoc(), id, op->getOperands(),
                            op->getResult(0).getType(), *attrs, &error);
    ASSERT_NE(rebuilt, nullptr) << error;
    EXPECT_TRUE(succeeded(verify(rebuilt)));
    EXPECT_EQ(rebuilt->getName(), op->getName());
    EXPECT_EQ(rebuilt->getResultTypes(), op->getResultTypes());
    EXPECT_EQ(rebuilt->getPropertiesAsAttribute(),
              op->getPropertiesAsAttribute())
        << op->getName().getStringRef().str();
    EXPECT_EQ(rebuilt->getAttrDictionary(), op->getAttrDictionary())
        << op->getName().getStringRef().str();
    rebuilt->erase();
  }
  // The file covers the registry: a new op comes with its round trip.
  for (const rt::OpInfo& info : rt::opTable())
    EXPECT_TRUE(seen.count(info.id))
        << "mc." << info.mnemonic << " is missing from test/ir/ops.mlir";
}

/// Builds `id` from `attrs` on two f32 block arguments; the error when it
/// is refused.
std::string buildError(rt::OpId id, int operands, const rt::OpAttrs& attrs) {
  Context c;
  OpBuilder b(&c.ctx);
  auto type = RankedTensorType::get({2, 3}, b.getF32Type());
  Block block;
  SmallVector<Value> in;
  for (int i = 0; i < operands; ++i)
    in.push_back(block.addArgument(type, UnknownLoc::get(&c.ctx)));
  b.setInsertionPointToEnd(&block);
  std::string error;
  Operation* op = mc::buildRegistryOp(b, UnknownLoc::get(&c.ctx), id, in,
                                      type, attrs, &error);
  if (op)
    op->erase();
  return op ? "" : error;
}

TEST(RegistryOps, BadRecordsAreRefusedByName) {
  using rt::OpAttr;
  EXPECT_EQ(buildError(rt::OpId::Softmax, 1, {OpAttr::integer("axis", 1)}),
            "");
  EXPECT_EQ(buildError(rt::OpId::Softmax, 1, {}),
            "mc.softmax needs attribute 'axis'");
  EXPECT_EQ(buildError(rt::OpId::Softmax, 1,
                       {OpAttr::integer("axis", 1), OpAttr::integer("dim", 0)}),
            "mc.softmax has no attribute 'dim'");
  EXPECT_EQ(buildError(rt::OpId::Softmax, 1, {OpAttr::real("axis", 1)}),
            "mc.softmax attribute 'axis' must be an integer, got a number");
  EXPECT_EQ(buildError(rt::OpId::Add, 1, {}),
            "mc.add takes 2 operand(s), got 1");
  // Optional (unit) attributes may be left out.
  EXPECT_EQ(buildError(rt::OpId::Gelu, 1, {}), "");
}

} // namespace

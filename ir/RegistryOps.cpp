#include "ir/RegistryOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Diagnostics.h"

#include <cstring>
#include <string_view>

using namespace mlir;

namespace mc {

FailureOr<rt::OpAttrs> registryAttributes(Operation* op,
                                          const rt::OpInfo& info) {
  rt::OpAttrs out;
  for (const rt::AttrSpec& spec : info.attrs) {
    std::optional<Attribute> attr = op->getInherentAttr(spec.name);
    if (!attr || !*attr) {
      if (spec.optional) {
        out.all().push_back(rt::OpAttr::boolean(spec.name, false));
        continue;
      }
      return op->emitOpError() << "has no attribute '" << spec.name << "'";
    }
    switch (spec.kind) {
    case rt::AttrKind::Bool:
      if (auto b = llvm::dyn_cast<BoolAttr>(*attr)) {
        out.all().push_back(rt::OpAttr::boolean(spec.name, b.getValue()));
        continue;
      }
      if (llvm::isa<UnitAttr>(*attr)) {
        out.all().push_back(rt::OpAttr::boolean(spec.name, true));
        continue;
      }
      break;
    case rt::AttrKind::Int:
      if (auto i = llvm::dyn_cast<IntegerAttr>(*attr)) {
        out.all().push_back(rt::OpAttr::integer(spec.name, i.getInt()));
        continue;
      }
      break;
    case rt::AttrKind::Float:
      if (auto f = llvm::dyn_cast<FloatAttr>(*attr)) {
        out.all().push_back(rt::OpAttr::real(spec.name, f.getValueAsDouble()));
        continue;
      }
      break;
    case rt::AttrKind::Ints:
      if (auto a = llvm::dyn_cast<DenseI64ArrayAttr>(*attr)) {
        out.all().push_back(rt::OpAttr::list(
            spec.name, std::vector<int64_t>(a.asArrayRef().begin(),
                                            a.asArrayRef().end())));
        continue;
      }
      break;
    }
    return op->emitOpError() << "attribute '" << spec.name << "' is " << *attr
                             << ", which the op registry does not encode";
  }
  return out;
}

rt::Status applyViewOf(Operation* op, rt::shapes::StridedView* view) {
  auto type = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
  rt::OpId id;
  if (!type || !type.hasStaticShape() ||
      !rt::findOp(op->getName().getStringRef(), &id))
    return rt::Status::error(op->getName().getStringRef().str() +
                             " of a dynamic or unknown shape is no view");
  FailureOr<rt::OpAttrs> attrs = registryAttributes(op, rt::opInfo(id));
  if (failed(attrs))
    return rt::Status::error("the attributes of " +
                             op->getName().getStringRef().str());
  return rt::shapes::applyView(
      id, *attrs, rt::shapes::Dims(type.getShape().begin(), type.getShape().end()),
      view);
}

namespace {

const char* kindName(rt::AttrKind k) {
  switch (k) {
  case rt::AttrKind::Bool:
    return "a flag";
  case rt::AttrKind::Int:
    return "an integer";
  case rt::AttrKind::Float:
    return "a number";
  case rt::AttrKind::Ints:
    return "a list of integers";
  }
  return "?";
}

/// The MLIR attribute ODS declares for `spec` holding `a`; null for a unit
/// attribute that is false (absent). Sets `*error` on a storage the
/// registry does not know.
Attribute toAttribute(Builder& b, const rt::AttrSpec& spec, const rt::OpAttr& a,
                      std::string* error) {
  std::string_view storage = spec.storage;
  if (storage == "unit")
    return a.i ? b.getUnitAttr() : Attribute();
  if (storage == "bool")
    return b.getBoolAttr(a.i != 0);
  if (storage == "i64")
    return b.getI64IntegerAttr(a.i);
  if (storage == "i32")
    return b.getI32IntegerAttr(static_cast<int32_t>(a.i));
  if (storage == "f64")
    return b.getF64FloatAttr(a.f);
  if (storage == "f32")
    return b.getF32FloatAttr(static_cast<float>(a.f));
  if (storage == "i64s")
    return b.getDenseI64ArrayAttr(a.ints);
  *error = "attribute '" + std::string(spec.name) + "' has storage '" +
           std::string(storage) + "', which buildRegistryOp cannot build";
  return Attribute();
}

} // namespace

Operation* buildRegistryOp(OpBuilder& builder, Location loc, rt::OpId id,
                           ValueRange operands, Type resultType,
                           const rt::OpAttrs& attrs, std::string* error) {
  const rt::OpInfo& info = rt::opInfo(id);
  std::string op = std::string("mc.") + info.mnemonic;
  for (const rt::OpAttr& a : attrs.all()) {
    bool declared = false;
    for (const rt::AttrSpec& spec : info.attrs)
      declared |= a.name == spec.name;
    if (!declared) {
      *error = op + " has no attribute '" + a.name + "'";
      return nullptr;
    }
  }
  if (info.operands >= 0 &&
      operands.size() != static_cast<size_t>(info.operands)) {
    *error = op + " takes " + std::to_string(info.operands) +
             " operand(s), got " + std::to_string(operands.size());
    return nullptr;
  }
  OperationState state(loc, op);
  state.addOperands(operands);
  state.addTypes(resultType);
  for (const rt::AttrSpec& spec : info.attrs) {
    const rt::OpAttr* a = attrs.find(spec.name);
    if (!a) {
      if (spec.optional)
        continue;
      *error = op + " needs attribute '" + spec.name + "'";
      return nullptr;
    }
    if (a->kind != spec.kind) {
      *error = op + " attribute '" + spec.name + "' must be " +
               kindName(spec.kind) + ", got " + kindName(a->kind);
      return nullptr;
    }
    std::string why;
    Attribute attr = toAttribute(builder, spec, *a, &why);
    if (!why.empty()) {
      *error = why;
      return nullptr;
    }
    if (attr)
      state.addAttribute(spec.name, attr);
  }
  return builder.create(state);
}

FailureOr<rt::DType> elementDType(Type t) {
  if (t.isF32())
    return rt::DType::F32;
  if (t.isF16())
    return rt::DType::F16;
  if (t.isBF16())
    return rt::DType::BF16;
  if (t.isInteger(32))
    return rt::DType::I32;
  if (t.isInteger(64))
    return rt::DType::I64;
  if (t.isInteger(1))
    return rt::DType::I1;
  return failure();
}

std::optional<ArrayRef<char>> elementsBytesView(ElementsAttr attr) {
  auto type = llvm::cast<ShapedType>(attr.getType());
  Type et = type.getElementType();
  if (et.isInteger(1) || !type.hasStaticShape() || !et.isIntOrFloat())
    return std::nullopt;
  size_t bytes = static_cast<size_t>(type.getNumElements()) *
                 (et.getIntOrFloatBitWidth() / 8);
  ArrayRef<char> raw;
  if (auto dense = llvm::dyn_cast<DenseElementsAttr>(attr)) {
    if (dense.isSplat())
      return std::nullopt;
    raw = dense.getRawData();
  } else if (auto resource = llvm::dyn_cast<DenseResourceElementsAttr>(attr)) {
    auto blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    raw = blob->getData();
  } else {
    return std::nullopt;
  }
  if (raw.size() != bytes)
    return std::nullopt; // elementsBytes reports it
  return raw;
}

FailureOr<std::vector<uint8_t>> elementsBytes(ElementsAttr attr,
                                              Operation* op) {
  auto type = llvm::cast<RankedTensorType>(attr.getType());
  Type et = type.getElementType();
  int64_t n = type.getNumElements();
  std::vector<uint8_t> out;
  if (auto dense = llvm::dyn_cast<DenseElementsAttr>(attr)) {
    if (et.isInteger(1)) {
      out.reserve(n);
      for (bool b : dense.getValues<bool>())
        out.push_back(b ? 1 : 0);
      return out;
    }
    size_t width = et.getIntOrFloatBitWidth() / 8;
    out.resize(n * width);
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out.data() + i * width, raw.data(), width);
    } else if (!out.empty()) { // an empty tensor's data may be null
      std::memcpy(out.data(), raw.data(), out.size());
    }
    return out;
  }
  if (auto resource = llvm::dyn_cast<DenseResourceElementsAttr>(attr)) {
    auto blob = resource.getRawHandle().getBlob();
    if (!blob) {
      if (op)
        op->emitOpError() << "refers to a dense resource with no data";
      return failure();
    }
    ArrayRef<char> raw = blob->getData();
    size_t width = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
    if (raw.size() != static_cast<size_t>(n) * width) {
      if (op)
        op->emitOpError() << "dense resource holds " << raw.size()
                          << " bytes, expected " << n * width;
      return failure();
    }
    out.assign(raw.begin(), raw.end());
    return out;
  }
  if (op)
    op->emitOpError() << "has a constant kind codegen cannot read: " << attr;
  return failure();
}

} // namespace mc

#include "ir/Batch.h"
#include "ir/MCDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace mc {

namespace {
/// The runtime's limit (artifact verifier): sizes fit an int32 index.
constexpr int64_t kMaxBatch = (int64_t(1) << 31) - 1;

bool valid(const BatchBounds& b) {
  return b.min >= 1 && b.min <= b.opt && b.opt <= b.max && b.max <= kMaxBatch;
}
} // namespace

std::optional<BatchBounds> getBatchBounds(Operation* fn) {
  auto attr = fn->getAttrOfType<DenseI64ArrayAttr>(kBatchAttrName);
  if (!attr || attr.size() != 3)
    return std::nullopt;
  BatchBounds b{attr[0], attr[1], attr[2]};
  if (!valid(b))
    return std::nullopt;
  return b;
}

void setBatchBounds(Operation* fn, const BatchBounds& b) {
  Builder builder(fn->getContext());
  fn->setAttr(kBatchAttrName,
              builder.getDenseI64ArrayAttr({b.min, b.max, b.opt}));
}

LogicalResult verifyBatchAttribute(Operation* op, Attribute value) {
  auto attr = llvm::dyn_cast<DenseI64ArrayAttr>(value);
  if (!attr || attr.size() != 3)
    return op->emitOpError()
           << "attribute 'mc.batch' must be array<i64: MIN, MAX, OPT>, got "
           << value;
  BatchBounds b{attr[0], attr[1], attr[2]};
  if (!valid(b))
    return op->emitOpError()
           << "batch bounds [" << b.min << ", " << b.max << "] with opt "
           << b.opt << " must satisfy 1 <= min <= opt <= max <= "
           << kMaxBatch;
  return success();
}

SmallVector<int64_t> symbolicShape(RankedTensorType type) {
  SmallVector<int64_t> shape(type.getShape());
  ArrayRef<int64_t> multiples;
  if (auto enc = llvm::dyn_cast_or_null<BatchEncodingAttr>(type.getEncoding()))
    multiples = enc.getMultiples();
  size_t k = 0;
  for (int64_t& d : shape)
    if (ShapedType::isDynamic(d)) {
      d = -(k < multiples.size() ? multiples[k] : 1);
      ++k;
    }
  return shape;
}

SmallVector<int64_t> symbolicShape(Type type) {
  return symbolicShape(llvm::cast<RankedTensorType>(type));
}

RankedTensorType symbolicType(ArrayRef<int64_t> shape, Type element) {
  SmallVector<int64_t> dims(shape);
  SmallVector<int64_t> multiples;
  bool plain = true;
  for (int64_t& d : dims)
    if (d < 0) {
      multiples.push_back(-d);
      plain &= d == -1;
      d = ShapedType::kDynamic;
    }
  Attribute encoding;
  if (!plain)
    encoding = BatchEncodingAttr::get(element.getContext(), multiples);
  return RankedTensorType::get(dims, element, encoding);
}

RankedTensorType withElementType(RankedTensorType type, Type element) {
  return RankedTensorType::get(type.getShape(), element, type.getEncoding());
}

std::optional<BatchBounds> parseBatchBounds(llvm::StringRef text,
                                            std::string* error) {
  llvm::StringRef rest = text;
  BatchBounds b;
  auto number = [&](llvm::StringRef s, int64_t* out) {
    return !s.empty() && !s.getAsInteger(10, *out);
  };
  auto [range, opt] = rest.split('@');
  auto [lo, hi] = range.split("..");
  bool ok = range.contains("..") && number(lo, &b.min) && number(hi, &b.max);
  b.opt = b.max;
  if (ok && text.contains('@'))
    ok = number(opt, &b.opt);
  if (!ok) {
    *error = "--batch takes MIN..MAX or MIN..MAX@OPT (for example 1..64), "
             "got '" + text.str() + "'";
    return std::nullopt;
  }
  if (!valid(b)) {
    *error = "--batch " + text.str() + ": the bounds must satisfy 1 <= MIN "
             "<= OPT <= MAX <= " + std::to_string(kMaxBatch);
    return std::nullopt;
  }
  return b;
}

} // namespace mc

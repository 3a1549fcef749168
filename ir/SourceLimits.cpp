// Pre-parse checks of .mlir input (see SourceLimits.h).
#include "ir/SourceLimits.h"
#include "modelc/kernels.h" // rt::kMaxTensorElements (a constant)

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/Bytecode/Encoding.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"

#include <cstring>
#include <deque>

namespace mc {

std::optional<std::string> findExcessNesting(llvm::StringRef text,
                                             unsigned limit) {
  unsigned depth = 0, line = 1;
  size_t lineStart = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    switch (c) {
    case '\n':
      ++line;
      lineStart = i + 1;
      break;
    case '"': // a string literal: skip to its closing quote
      for (++i; i < n && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n') { // unterminated: the parser reports it
          ++line;
          lineStart = i + 1;
        }
      }
      break;
    case '/': // a comment runs to the end of the line
      if (i + 1 < n && text[i + 1] == '/')
        while (i + 1 < n && text[i + 1] != '\n')
          ++i;
      break;
    case '{':
    case '[':
    case '(':
    case '<':
      if (++depth > limit)
        return "line " + std::to_string(line) + ", column " +
               std::to_string(i - lineStart + 1);
      break;
    case '>':
      if (i > 0 && text[i - 1] == '-') // `->` closes nothing
        break;
      [[fallthrough]];
    case '}':
    case ']':
    case ')':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

namespace {

/// A cursor over MLIR bytecode: its prefix varints (the count of trailing
/// zeros of the first byte is the count of bytes that follow), bytes and
/// sections. Every read returns false at the end of its span.
struct ByteReader {
  const uint8_t *p = nullptr, *end = nullptr;
  /// Where a count too large for the bytes left was read, and the count.
  const uint8_t *oversized = nullptr;
  uint64_t oversizedCount = 0;

  bool byte(uint64_t &value) {
    if (p == end)
      return false;
    value = *p++;
    return true;
  }
  bool varint(uint64_t &value) {
    if (p == end)
      return false;
    unsigned extra = *p == 0 ? 8 : llvm::countr_zero(unsigned(*p));
    if (size_t(end - p) < extra + 1)
      return false;
    if (extra == 8) {
      value = 0;
      for (unsigned i = 0; i < 8; ++i)
        value |= uint64_t(p[1 + i]) << (8 * i);
    } else {
      uint64_t raw = 0;
      for (unsigned i = 0; i <= extra; ++i)
        raw |= uint64_t(p[i]) << (8 * i);
      value = raw >> (extra + 1);
    }
    p += extra + 1;
    return true;
  }
  /// A count of things that follow, each taking at least one byte: one
  /// larger than the bytes left is refused before MLIR's reader allocates
  /// for it (a few bytes asked it for 10 GB).
  bool count(uint64_t &value) {
    const uint8_t *at = p;
    return varint(value) && fits(at, value);
  }
  bool flaggedCount(uint64_t &value, bool &flag) {
    const uint8_t *at = p;
    return flagged(value, flag) && fits(at, value);
  }
  bool fits(const uint8_t *at, uint64_t value) {
    if (value <= uint64_t(end - p))
      return true;
    oversized = at;
    oversizedCount = value;
    return false;
  }
  /// `(value << 1) | flag`.
  bool flagged(uint64_t &value, bool &flag) {
    if (!varint(value))
      return false;
    flag = value & 1;
    value >>= 1;
    return true;
  }
  bool skipVarints(uint64_t count) {
    uint64_t ignored;
    for (; count > 0; --count)
      if (!varint(ignored))
        return false;
    return true;
  }
  bool skipCString() {
    const void *nul = std::memchr(p, 0, end - p);
    if (!nul)
      return false;
    p = static_cast<const uint8_t *>(nul) + 1;
    return true;
  }
  /// A section: its ID (high bit: aligned), length, the padding bytes that
  /// align it (to the address, as MLIR's reader does), then `length` bytes.
  bool section(uint8_t &id, ByteReader &data) {
    uint64_t idAndAlignment, length, alignment;
    if (!byte(idAndAlignment) || !varint(length))
      return false;
    id = idAndAlignment & 0x7f;
    if (idAndAlignment & 0x80) {
      if (!varint(alignment) || !llvm::isPowerOf2_64(alignment))
        return false;
      while (reinterpret_cast<uintptr_t>(p) & (alignment - 1))
        if (p == end || *p++ != mlir::bytecode::kAlignmentByte)
          return false;
    }
    if (length > uint64_t(end - p))
      return false;
    data = {p, p + length};
    p += length;
    return true;
  }
};

/// The use-list orders of NUM_VALUES values (results or block arguments).
bool skipUseListOrders(ByteReader &r, uint64_t numValues) {
  uint64_t count = 1, ignored, numIndices;
  bool pairs;
  if (numValues > 1 && !r.varint(count))
    return false;
  for (; count > 0; --count)
    if ((numValues > 1 && !r.varint(ignored)) ||
        !r.flagged(numIndices, pairs) || !r.skipVarints(numIndices))
      return false;
  return true;
}

/// A block header: the count of operations, then the arguments.
bool readBlockHeader(ByteReader &r, uint64_t version, uint64_t &numOps) {
  bool hasArgs;
  uint64_t numArgs = 0, ignored, hasOrders;
  if (!r.flagged(numOps, hasArgs) || (hasArgs && !r.count(numArgs)))
    return false;
  for (uint64_t i = 0; hasArgs && i < numArgs; ++i) {
    bool hasLoc = true; // before version 4 every argument has one
    bool ok = version >= mlir::bytecode::kElideUnknownBlockArgLocation
                  ? r.flagged(ignored, hasLoc)
                  : r.varint(ignored);
    if (!ok || (hasLoc && !r.varint(ignored)))
      return false;
  }
  if (version < mlir::bytecode::kUseListOrdering || !hasArgs)
    return true;
  return r.byte(hasOrders) && (!hasOrders || skipUseListOrders(r, numArgs));
}

/// An operation up to its regions: how many it has, and whether they are
/// isolated from above (then encoded as a nested IR section).
bool readOp(ByteReader &r, uint64_t version, uint64_t &numRegions,
            bool &isolated) {
  namespace mask = mlir::bytecode::OpEncodingMask;
  uint64_t ignored, bits, numResults = 0, count;
  // The name, the encoding mask, the location.
  if (!r.varint(ignored) || !r.byte(bits) || !r.varint(ignored))
    return false;
  if ((bits & mask::kHasAttrs) && !r.varint(ignored))
    return false;
  if ((bits & mask::kHasProperties) && !r.varint(ignored))
    return false;
  if ((bits & mask::kHasResults) &&
      (!r.count(numResults) || !r.skipVarints(numResults)))
    return false;
  for (uint8_t list : {mask::kHasOperands, mask::kHasSuccessors})
    if ((bits & list) && (!r.count(count) || !r.skipVarints(count)))
      return false;
  if (version >= mlir::bytecode::kUseListOrdering &&
      (bits & mask::kHasUseListOrders) && !skipUseListOrders(r, numResults))
    return false;
  numRegions = 0;
  isolated = false;
  return !(bits & mask::kHasInlineRegions) ||
         r.flaggedCount(numRegions, isolated);
}

/// What is wrong with a reader that stopped: a count too large (the rest,
/// malformed bytes MLIR's reader reports, is not ours to describe).
std::optional<std::string> oversized(const ByteReader &r,
                                     const uint8_t *begin) {
  if (!r.oversized)
    return std::nullopt;
  return "a count of " + std::to_string(r.oversizedCount) + " at byte " +
         std::to_string(r.oversized - begin) +
         ", more than the bytes that follow (malformed bytecode)";
}

/// The region nesting of the IR section, with an explicit stack (one frame
/// per region being read, as MLIR's reader does), and the counts MLIR
/// allocates for before reading what they count.
std::optional<std::string> checkIRSection(ByteReader ir, uint64_t version,
                                          unsigned limit,
                                          const uint8_t *begin) {
  struct Frame {
    ByteReader own; // an isolated region's section
    ByteReader *r;  // where the region's contents are read from
    uint64_t regions = 0, blocks = 0, ops = 0; // still to read
  };
  std::deque<Frame> stack; // deque: push_back keeps references valid
  stack.push_back({ir, nullptr});
  stack.back().r = &stack.back().own;
  // The top-level block has no arguments (MLIR's writer gives it none, and
  // its reader defines them before it has a scope for them: a crash).
  const uint8_t *top = stack.back().r->p;
  uint64_t topOps;
  bool topHasArgs;
  ByteReader peek = *stack.back().r;
  if (peek.flagged(topOps, topHasArgs) && topHasArgs)
    return "the top-level block at byte " + std::to_string(top - begin) +
           " has an argument list; it has none (malformed bytecode)";
  if (!readBlockHeader(*stack.back().r, version, stack.back().ops))
    return oversized(*stack.back().r, begin);
  while (!stack.empty()) {
    Frame &f = stack.back();
    if (f.ops > 0) {
      --f.ops;
      const uint8_t *at = f.r->p;
      uint64_t numRegions;
      bool isolated;
      if (!readOp(*f.r, version, numRegions, isolated))
        return oversized(*f.r, begin);
      if (numRegions == 0)
        continue;
      if (stack.size() > limit)
        return "nesting deeper than " + std::to_string(limit) + " at byte " +
               std::to_string(at - begin) + " (an operation's regions)";
      ByteReader *parent = f.r;
      stack.push_back({{}, parent, numRegions});
      Frame &child = stack.back();
      if (version >= mlir::bytecode::kLazyLoading && isolated) {
        uint8_t id;
        if (!parent->section(id, child.own) ||
            id != mlir::bytecode::Section::kIR)
          return std::nullopt;
        child.r = &child.own;
      }
    } else if (f.blocks > 0) {
      --f.blocks;
      if (!readBlockHeader(*f.r, version, f.ops))
        return oversized(*f.r, begin);
    } else if (f.regions > 0) {
      --f.regions;
      uint64_t numValues;
      if (!f.r->count(f.blocks) || (f.blocks > 0 && !f.r->count(numValues)))
        return oversized(*f.r, begin);
    } else {
      stack.pop_back();
    }
  }
  return std::nullopt;
}

/// The attribute and type offset section lists the attributes, then the
/// types, in dialect groups (a dialect, a count, then that many entry
/// sizes). MLIR's reader stores each entry of a group into its table
/// without checking that the group fits what is left of it: a group larger
/// than the rest of the attributes (or types) wrote past the end of the
/// table's heap block (found by valgrind on the fuzz target's inputs, a
/// corruption ASan cannot see in the prebuilt library). Such a group is
/// refused here. Attributes and types kept as text (those without a
/// dialect encoding) go through the recursive-descent text parser: the
/// bracket pre-scan of each.
/// Walks the attribute and type offset section OFFSETS: for each entry,
/// ENTRY(kind, size, custom) (kind "attribute" or "type"), stopping at the
/// first one that returns a problem. A group larger than the entries left
/// of its kind is a problem (see above); a truncated section is not (MLIR's
/// reader reports it).
template <typename Fn>
std::optional<std::string> walkAttrTypeEntries(ByteReader offsets,
                                               const uint8_t *begin,
                                               Fn &&entry) {
  uint64_t numAttrs, numTypes, dialect, groupSize, size;
  bool custom;
  if (!offsets.varint(numAttrs) || !offsets.varint(numTypes))
    return std::nullopt;
  for (auto [kind, count] : {std::pair<const char *, uint64_t>{"attribute",
                                                               numAttrs},
                             {"type", numTypes}}) {
    for (uint64_t left = count; left > 0;) {
      const uint8_t *group = offsets.p;
      if (!offsets.varint(dialect) || !offsets.varint(groupSize))
        return std::nullopt;
      if (groupSize > left)
        return std::string("a dialect group of ") +
               std::to_string(groupSize) + " " + kind + " entries at byte " +
               std::to_string(group - begin) + " where " +
               std::to_string(left) + " of the file's " +
               std::to_string(count) + " are left (malformed bytecode)";
      for (; groupSize > 0; --groupSize, --left) {
        if (!offsets.flagged(size, custom))
          return std::nullopt;
        if (auto problem = entry(size, custom))
          return problem;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> checkAttrTypeSections(ByteReader offsets,
                                                 ByteReader data,
                                                 unsigned limit,
                                                 const uint8_t *begin) {
  uint64_t numAttrs, numTypes, used = 0;
  const uint8_t *at = offsets.p;
  ByteReader counts = offsets;
  if (!counts.count(numAttrs) || !counts.count(numTypes) ||
      !counts.fits(at, numAttrs + numTypes))
    return oversized(counts, begin);
  bool truncated = false;
  auto problem = walkAttrTypeEntries(
      offsets, begin,
      [&](uint64_t size, bool custom) -> std::optional<std::string> {
        if (truncated || size > uint64_t(data.end - data.p) - used) {
          truncated = true; // MLIR's reader reports it
          return std::nullopt;
        }
        llvm::StringRef text(reinterpret_cast<const char *>(data.p + used),
                             size);
        if (!custom && findExcessNesting(text, limit))
          return "nesting deeper than " + std::to_string(limit) +
                 " at byte " + std::to_string(data.p + used - begin) +
                 " (an attribute or type kept as text)";
        used += size;
        return std::nullopt;
      });
  return problem;
}

/// The sections of bytecode BYTES, as far as they can be read.
struct Sections {
  uint64_t version = 0;
  ByteReader data[mlir::bytecode::Section::kNumSections];
  bool found[mlir::bytecode::Section::kNumSections] = {};
};

bool readSections(llvm::StringRef bytes, Sections &out) {
  if (!bytes.starts_with("ML\xefR"))
    return false;
  const auto *begin = reinterpret_cast<const uint8_t *>(bytes.data());
  ByteReader r{begin + 4, begin + bytes.size()};
  if (!r.varint(out.version) || !r.skipCString()) // the producer
    return false;
  while (r.p != r.end) {
    uint8_t id;
    ByteReader data;
    if (!r.section(id, data) || id >= mlir::bytecode::Section::kNumSections)
      break;
    out.data[id] = data;
    out.found[id] = true;
  }
  return true;
}

} // namespace

std::optional<std::string> checkBytecode(llvm::StringRef bytes,
                                         unsigned limit) {
  Sections s;
  if (!readSections(bytes, s))
    return std::nullopt;
  const auto *begin = reinterpret_cast<const uint8_t *>(bytes.data());
  uint64_t version = s.version, n;
  using namespace mlir::bytecode::Section;
  ByteReader(&sections)[kNumSections] = s.data;
  bool(&found)[kNumSections] = s.found;
  ByteReader dialects = sections[kDialect]; // (the loop below reads on)
  // Sections that start with the count of their entries, each at least a
  // byte: strings, dialects, properties.
  for (ID id : {kString, kDialect, kProperties})
    if (found[id] && sections[id].p != sections[id].end &&
        !sections[id].count(n))
      if (auto problem = oversized(sections[id], begin))
        return problem;
  // The dialect section: its dialects (each a name, then maybe a version
  // section), then, from version 4, the count of operation names that
  // follow (each at least a byte), which MLIR's reader reserves for.
  if (found[kDialect] && version >= mlir::bytecode::kElideUnknownBlockArgLocation) {
    ByteReader d = dialects;
    uint64_t numDialects, name;
    bool hasVersion, ok = d.count(numDialects);
    for (uint64_t i = 0; ok && i < numDialects; ++i) {
      ok = d.flagged(name, hasVersion);
      uint8_t id;
      ByteReader versionData;
      if (ok && hasVersion)
        ok = d.section(id, versionData);
    }
    if (ok && !d.count(n))
      if (auto problem = oversized(d, begin))
        return problem;
  }
  if (found[kAttrType] && found[kAttrTypeOffset])
    if (auto problem = checkAttrTypeSections(sections[kAttrTypeOffset],
                                             sections[kAttrType], limit, begin))
      return problem;
  if (found[kIR])
    return checkIRSection(sections[kIR], version, limit, begin);
  return std::nullopt;
}

namespace {

/// The builtin dialect's attribute codes (mlir/IR/BuiltinDialectBytecode.td,
/// stable across versions: the bytecode format depends on them) that the
/// checked reader treats specially: those whose first field is the shaped
/// type of their elements, and those whose varints are values, not list
/// lengths.
enum BuiltinAttrCode : uint64_t {
  kFileLineColLoc = 11,
  kDenseResourceElements = 16,
  kDenseArray = 17,
  kDenseIntOrFPElements = 18,
  kDenseStringElements = 19,
  kSparseElements = 20,
  kFileLineColRange = 22,
};
/// The builtin dialect's type code for IntegerType.
constexpr uint64_t kIntegerTypeCode = 0;

/// The size of the largest attribute or type entry of bytecode S.
uint64_t largestAttrTypeEntry(const Sections &s) {
  using namespace mlir::bytecode::Section;
  if (!s.found[kAttrTypeOffset])
    return 0;
  uint64_t largest = 0;
  (void)walkAttrTypeEntries(
      s.data[kAttrTypeOffset], s.data[kAttrTypeOffset].p,
      [&](uint64_t size, bool) -> std::optional<std::string> {
        largest = std::max(largest, size);
        return std::nullopt;
      });
  return largest;
}

/// A DialectBytecodeReader that forwards to the reader of one builtin
/// attribute or type entry and checks what MLIR's builtin reader takes on
/// trust: each type read is verified as its own `getChecked` would, and
/// the type of a dense elements attribute must be one its constructor can
/// measure (MLIR's getFromRawBuffer dereferenced a null FloatType for
/// `tensor<2xnone>`: a fuzz finding). Errors name the bad type.
class CheckedBuiltinReader : public mlir::DialectBytecodeReader {
public:
  /// MAX_ENTRY_BYTES: the largest attribute or type entry of the file; a
  /// list in an entry has at most that many elements (each takes a byte).
  CheckedBuiltinReader(mlir::DialectBytecodeReader &inner, bool isType,
                       uint64_t maxEntryBytes)
      : inner(inner), isType(isType), maxEntryBytes(maxEntryBytes) {}

  mlir::InFlightDiagnostic emitError(const llvm::Twine &msg) const override {
    return inner.emitError(msg);
  }
  llvm::FailureOr<const mlir::DialectVersion *>
  getDialectVersion(llvm::StringRef dialectName) const override {
    return inner.getDialectVersion(dialectName);
  }
  mlir::MLIRContext *getContext() const override { return inner.getContext(); }
  uint64_t getBytecodeVersion() const override {
    return inner.getBytecodeVersion();
  }
  llvm::LogicalResult readAttribute(mlir::Attribute &result) override {
    return inner.readAttribute(result);
  }
  llvm::LogicalResult readOptionalAttribute(mlir::Attribute &attr) override {
    return inner.readOptionalAttribute(attr);
  }
  llvm::LogicalResult readType(mlir::Type &result) override {
    if (failed(inner.readType(result)))
      return llvm::failure();
    bool first = typesRead++ == 0;
    if (failed(verifyType(result)))
      return llvm::failure();
    if (first)
      firstType = result;
    if (first && code && (*code == kDenseResourceElements ||
                          *code == kDenseIntOrFPElements ||
                          *code == kDenseStringElements ||
                          *code == kSparseElements))
      return checkDenseType(result);
    if (first && code && *code == kDenseArray && !result.isIntOrFloat())
      return inner.emitError() << "malformed bytecode: a dense array of " << result
                         << " (it holds integers or floats)";
    return llvm::success();
  }
  llvm::LogicalResult readVarInt(uint64_t &result) override {
    if (failed(inner.readVarInt(result)))
      return llvm::failure();
    if (!code) {
      code = result; // the entry's kind, read first
      return llvm::success();
    }
    // Every other varint the builtin reader reads itself is the length of
    // a list it reserves for (MLIR's readList; a 3-byte count asked for 51
    // billion elements: a fuzz finding), but for these values: a dense
    // array's size (checked once built), a dense string attribute's splat
    // flag, a location's lines and columns, an integer type's width.
    if (!isType && *code == kDenseStringElements)
      return checkStringCount(result);
    bool value = isType ? *code == kIntegerTypeCode
                        : *code == kDenseArray || *code == kFileLineColLoc ||
                              *code == kFileLineColRange;
    if (!value && result > maxEntryBytes)
      return inner.emitError()
             << "malformed bytecode: a list of " << result
             << " elements in an entry of at most " << maxEntryBytes
             << " bytes";
    return llvm::success();
  }
  llvm::LogicalResult readSignedVarInt(int64_t &result) override {
    return inner.readSignedVarInt(result);
  }
  llvm::FailureOr<llvm::APInt>
  readAPIntWithKnownWidth(unsigned bitWidth) override {
    return inner.readAPIntWithKnownWidth(bitWidth);
  }
  llvm::FailureOr<llvm::APFloat>
  readAPFloatWithKnownSemantics(const llvm::fltSemantics &semantics) override {
    return inner.readAPFloatWithKnownSemantics(semantics);
  }
  llvm::LogicalResult readString(llvm::StringRef &result) override {
    return inner.readString(result);
  }
  llvm::LogicalResult readBlob(llvm::ArrayRef<char> &result) override {
    if (failed(inner.readBlob(result)))
      return llvm::failure();
    // MLIR's getFromRawBuffer only asserts that the data fits the type: a
    // short blob was hashed past its end (a fuzz finding).
    auto shaped = llvm::dyn_cast_if_present<mlir::ShapedType>(firstType);
    bool splat = false;
    if (code && *code == kDenseIntOrFPElements && shaped &&
        !mlir::DenseElementsAttr::isValidRawBuffer(shaped, result, splat))
      return inner.emitError()
             << "malformed bytecode: dense elements of type " << shaped
             << " with " << result.size()
             << " bytes of data (neither one element nor all of them)";
    return llvm::success();
  }
  llvm::LogicalResult readBool(bool &result) override {
    return inner.readBool(result);
  }

  /// The checks of a type the builtin reader built (with `get`, unchecked).
  llvm::LogicalResult verifyType(mlir::Type type) const {
    auto emit = [&]() -> mlir::InFlightDiagnostic {
      return inner.emitError("malformed bytecode: invalid type: ");
    };
    using namespace mlir;
    if (auto t = llvm::dyn_cast<RankedTensorType>(type))
      return RankedTensorType::verify(emit, t.getShape(), t.getElementType(),
                                      t.getEncoding());
    if (auto t = llvm::dyn_cast<UnrankedTensorType>(type))
      return UnrankedTensorType::verify(emit, t.getElementType());
    if (auto t = llvm::dyn_cast<VectorType>(type))
      return VectorType::verify(emit, t.getShape(), t.getElementType(),
                                t.getScalableDims());
    if (auto t = llvm::dyn_cast<MemRefType>(type))
      return MemRefType::verify(emit, t.getShape(), t.getElementType(),
                                t.getLayout(), t.getMemorySpace());
    if (auto t = llvm::dyn_cast<UnrankedMemRefType>(type))
      return UnrankedMemRefType::verify(emit, t.getElementType(),
                                        t.getMemorySpace());
    if (auto t = llvm::dyn_cast<ComplexType>(type))
      return ComplexType::verify(emit, t.getElementType());
    if (auto t = llvm::dyn_cast<IntegerType>(type))
      return IntegerType::verify(emit, t.getWidth(), t.getSignedness());
    return llvm::success();
  }

  /// The attribute read, checked as its `getChecked` would have.
  llvm::LogicalResult verifyAttribute(mlir::Attribute attr) const {
    auto emit = [&]() -> mlir::InFlightDiagnostic {
      return inner.emitError("malformed bytecode: invalid attribute: ");
    };
    if (auto a = llvm::dyn_cast<mlir::DenseArrayAttr>(attr))
      return mlir::DenseArrayAttr::verify(emit, a.getElementType(), a.getSize(),
                                          a.getRawData());
    if (auto a = llvm::dyn_cast<mlir::SparseElementsAttr>(attr))
      return mlir::SparseElementsAttr::verify(emit, a.getType(), a.getIndices(),
                                              a.getValues());
    return llvm::success();
  }

private:
  /// The type of dense elements: statically shaped, within the element
  /// limit, of elements MLIR can store densely.
  llvm::LogicalResult checkDenseType(mlir::Type type) const {
    auto shaped = llvm::dyn_cast<mlir::ShapedType>(type);
    if (!shaped)
      return llvm::success(); // the builtin reader reports it
    mlir::Type et = shaped.getElementType();
    auto complex = llvm::dyn_cast<mlir::ComplexType>(et);
    bool storable = *code == kDenseStringElements
                        ? true
                        : et.isIntOrIndexOrFloat() ||
                              (complex &&
                               complex.getElementType().isIntOrFloat());
    if (!storable)
      return inner.emitError() << "malformed bytecode: dense elements of type "
                         << type
                         << " (an integer, index, float or complex element "
                            "type is needed)";
    if (!shaped.hasRank())
      return inner.emitError() << "malformed bytecode: dense elements of type "
                         << type << " (a static shape is needed)";
    int64_t count = 1;
    for (int64_t d : shaped.getShape()) {
      if (d < 0)
        return inner.emitError() << "malformed bytecode: dense elements of type "
                           << type << " (a static shape is needed)";
      if (d != 0 && count > rt::kMaxTensorElements / d)
        count = rt::kMaxTensorElements + 1;
      else
        count *= d;
    }
    if (count > rt::kMaxTensorElements)
      return inner.emitError() << "malformed bytecode: dense elements of type "
                         << type << " (more than 2^36 elements)";
    return llvm::success();
  }

  /// A dense string attribute that is not a splat has a string (at least a
  /// byte) per element, which the reader allocates for first.
  llvm::LogicalResult checkStringCount(uint64_t isSplat) const {
    auto shaped = llvm::dyn_cast_if_present<mlir::ShapedType>(firstType);
    if (isSplat || !shaped || !shaped.hasStaticShape() ||
        uint64_t(shaped.getNumElements()) <= maxEntryBytes)
      return llvm::success();
    return inner.emitError()
           << "malformed bytecode: dense strings of type " << shaped
           << " in an entry of at most " << maxEntryBytes << " bytes";
  }

  llvm::FailureOr<mlir::AsmDialectResourceHandle>
  readResourceHandle() override {
    return inner.readResourceHandle<mlir::AsmDialectResourceHandle>();
  }

  mlir::DialectBytecodeReader &inner;
  bool isType;
  uint64_t maxEntryBytes;
  std::optional<uint64_t> code;
  unsigned typesRead = 0;
  mlir::Type firstType;
};

} // namespace

void guardBytecodeReader(mlir::ParserConfig &config, llvm::StringRef bytes,
                         unsigned limit) {
  Sections sections;
  if (!readSections(bytes, sections))
    return;
  uint64_t maxEntryBytes = largestAttrTypeEntry(sections);
  struct State {
    uint64_t limit;
    uint64_t failedInARow = 0;
    bool stopped = false;
  };
  // Why 8 reads per level: the reader defers an entry nested 6 levels below
  // the one it resolves and retries the deferred entries' ancestors after
  // them, so within the nesting limit a run of failed reads is at most one
  // per level (the first descent of a chain), plus the few retried
  // ancestors. A chain far deeper than the limit (which
  // findExcessAttributeNesting refuses once parsed) stops here early too:
  // the reader's time on one grows with the square of its depth.
  auto state = std::make_shared<State>(State{uint64_t(8) * limit});
  // Parses one entry as MLIR's reader would (the dialect is loaded before
  // the callbacks run); a dialect without the interface falls through to
  // the reader, which reports it.
  auto read = [state, maxEntryBytes](mlir::DialectBytecodeReader &reader,
                      llvm::StringRef dialectName, auto &entry,
                      auto parse) -> llvm::LogicalResult {
    mlir::Dialect *dialect = reader.getContext()->getLoadedDialect(dialectName);
    const auto *iface =
        dialect ? dialect->getRegisteredInterface<mlir::BytecodeDialectInterface>()
                : nullptr;
    if (!iface)
      return llvm::success();
    // Once stopped, every read fails before it reads (and so before it can
    // defer another entry): that is what ends the reader's worklist.
    if (state->stopped)
      return llvm::failure();
    // The builtin dialect's reader builds attributes and types unchecked:
    // through a reader that checks them.
    if (dialectName == "builtin") {
      constexpr bool isType =
          std::is_same_v<std::decay_t<decltype(entry)>, mlir::Type>;
      CheckedBuiltinReader checked(reader, isType, maxEntryBytes);
      entry = parse(*iface, checked);
      if (entry) {
        bool valid;
        if constexpr (std::is_same_v<std::decay_t<decltype(entry)>,
                                     mlir::Type>)
          valid = succeeded(checked.verifyType(entry));
        else
          valid = succeeded(checked.verifyAttribute(entry));
        if (!valid)
          entry = {};
      }
    } else {
      entry = parse(*iface, reader);
    }
    if (entry) {
      state->failedInARow = 0;
      return llvm::success();
    }
    // (An enclosing entry's read fails after the guard stopped a nested
    // one: reported once.)
    if (++state->failedInARow <= state->limit || state->stopped)
      return llvm::failure();
    state->stopped = true;
    return reader.emitError()
           << "attribute and type entries do not resolve: " << state->limit
           << " reads of them failed in a row (a reference cycle, or nesting "
              "far deeper than "
           << state->limit / 8 << "; malformed bytecode)";
  };
  config.getBytecodeReaderConfig().attachAttributeCallback(
      [read](mlir::DialectBytecodeReader &reader, llvm::StringRef dialectName,
             mlir::Attribute &entry) {
        return read(reader, dialectName, entry,
                    [](const mlir::BytecodeDialectInterface &iface,
                       mlir::DialectBytecodeReader &r) {
                      return iface.readAttribute(r);
                    });
      });
  config.getBytecodeReaderConfig().attachTypeCallback(
      [read](mlir::DialectBytecodeReader &reader, llvm::StringRef dialectName,
             mlir::Type &entry) {
        return read(reader, dialectName, entry,
                    [](const mlir::BytecodeDialectInterface &iface,
                       mlir::DialectBytecodeReader &r) {
                      return iface.readType(r);
                    });
      });
}

std::optional<std::string> findExcessAttributeNesting(mlir::Operation *root,
                                                      unsigned limit) {
  // Attributes and types are uniqued and shared: each one's height (1 + its
  // highest sub-element) is computed once, bottom-up, on an explicit stack.
  struct Item {
    const void *ptr;
    bool isType, expanded;
  };
  constexpr unsigned kInProgress = ~0u;
  llvm::DenseMap<const void *, unsigned> height;
  std::vector<Item> stack;
  auto forEachChild = [](const Item &it, auto fn) {
    auto onAttr = [&](mlir::Attribute a) {
      fn(Item{a.getAsOpaquePointer(), false, false});
    };
    auto onType = [&](mlir::Type t) {
      fn(Item{t.getAsOpaquePointer(), true, false});
    };
    if (it.isType)
      mlir::Type::getFromOpaquePointer(it.ptr).walkImmediateSubElements(onAttr,
                                                                        onType);
    else
      mlir::Attribute::getFromOpaquePointer(it.ptr).walkImmediateSubElements(
          onAttr, onType);
  };
  // Whether ROOT is within the limit.
  auto shallow = [&](Item top) {
    stack.assign(1, top);
    while (!stack.empty()) {
      Item it = stack.back();
      if (!it.expanded) {
        if (!height.try_emplace(it.ptr, kInProgress).second) {
          stack.pop_back(); // done already, or an ancestor (a cycle)
          continue;
        }
        stack.back().expanded = true;
        forEachChild(it, [&](Item c) {
          if (!height.count(c.ptr))
            stack.push_back(c);
        });
        continue;
      }
      stack.pop_back();
      unsigned h = 0;
      forEachChild(it, [&](Item c) {
        auto found = height.find(c.ptr);
        if (found != height.end() && found->second != kInProgress)
          h = std::max(h, found->second);
      });
      height[it.ptr] = h + 1;
      if (h + 1 > limit)
        return false;
    }
    return true;
  };
  auto attr = [](mlir::Attribute a) {
    return Item{a.getAsOpaquePointer(), false, false};
  };
  auto type = [](mlir::Type t) {
    return Item{t.getAsOpaquePointer(), true, false};
  };
  // Region nesting is bounded before this runs (the pre-scans), so the
  // recursive walk over operations is safe.
  std::optional<std::string> found;
  root->walk([&](mlir::Operation *op) {
    bool ok = shallow(attr(op->getAttrDictionary())) &&
              shallow(attr(mlir::LocationAttr(op->getLoc())));
    for (mlir::Type t : op->getResultTypes())
      ok = ok && shallow(type(t));
    for (mlir::Region &region : op->getRegions())
      for (mlir::Block &block : region)
        for (mlir::BlockArgument arg : block.getArguments())
          ok = ok && shallow(type(arg.getType())) &&
               shallow(attr(mlir::LocationAttr(arg.getLoc())));
    if (ok)
      return mlir::WalkResult::advance();
    found = "an attribute, type or location of '" +
            op->getName().getStringRef().str() + "'";
    return mlir::WalkResult::interrupt();
  });
  return found;
}

bool checkMlirSource(llvm::StringRef buffer, const std::string &name,
                     std::string *error) {
  if (buffer.starts_with("ML\xefR")) {
    std::optional<std::string> problem = checkBytecode(buffer);
    if (problem)
      *error = name + ": " + *problem;
    return !problem;
  }
  std::optional<std::string> where = findExcessNesting(buffer);
  if (where)
    *error = name + ": nesting deeper than " + std::to_string(kMaxMlirNesting) +
             " at " + *where;
  return !where;
}

std::unique_ptr<llvm::MemoryBuffer> loadMlirSource(const std::string &path,
                                                   std::string *error) {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (path == "-") {
    auto in = llvm::MemoryBuffer::getSTDIN();
    if (!in) {
      *error = "<stdin>: cannot read: " + in.getError().message();
      return nullptr;
    }
    buffer = std::move(*in);
  } else {
    // Checked before the file is opened: a FIFO would block the open and
    // /dev/zero never ends. (ir/ does not link the runtime, whose
    // modelc/fileio.h does the same for the other inputs.)
    llvm::sys::fs::file_status status;
    if (std::error_code ec = llvm::sys::fs::status(path, status)) {
      *error = path + ": cannot open: " + ec.message();
      return nullptr;
    }
    using llvm::sys::fs::file_type;
    if (status.type() != file_type::regular_file) {
      file_type t = status.type();
      *error = path + ": not a regular file (" +
               (t == file_type::directory_file   ? "a directory"
                : t == file_type::fifo_file      ? "a FIFO"
                : t == file_type::character_file ? "a character device"
                : t == file_type::block_file     ? "a block device"
                : t == file_type::socket_file    ? "a socket"
                                                 : "not a regular file") +
               "); modelc reads only regular files";
      return nullptr;
    }
    if (status.getSize() > kMaxMlirFileBytes) {
      *error = path + ": the file has " + std::to_string(status.getSize()) +
               " bytes, more than the limit of " +
               std::to_string(kMaxMlirFileBytes);
      return nullptr;
    }
    auto in = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/true);
    if (!in) {
      *error = path + ": cannot open: " + in.getError().message();
      return nullptr;
    }
    buffer = std::move(*in);
  }
  std::string name = path == "-" ? std::string("<stdin>") : path;
  if (!checkMlirSource(buffer->getBuffer(), name, error))
    return nullptr;
  return buffer;
}

} // namespace mc

// The op registry: every mc op's identity and what the layers after the
// dialect need of it, from the one table generated out of ir/MCOps.td
// (modelc/ops.inc). Header-only and MLIR-free, so the runtime, codegen, the
// passes and the frontend all use the same enum. Steps carry attributes in
// one generic form (OpAttr): a new op needs no schema change.
#ifndef MODELC_OPS_H
#define MODELC_OPS_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace mc::rt {

/// One enumerator per mc op, named after its mnemonic ("batch_norm" ->
/// BatchNorm). The only op enum in the tree.
enum class OpId : uint16_t {
#define MC_OP(id, name) id,
#include "modelc/ops.inc"
};
inline constexpr size_t kNumOps = 0
#define MC_OP(id, name) +1
#include "modelc/ops.inc"
    ;

/// The comparison directions of mc.compare, in the order of the dialect's
/// ComparisonDirection enum (ir/MCEnums.td; a static_assert in ir/MCOps.cpp
/// ties the two): the value a compare step's "direction" attribute holds.
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

enum class AmpClass : uint8_t { Follow, Low, F32 };
enum class AttrKind : uint8_t { Bool, Int, Float, Ints };

struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool optional;       // unit attributes: absent means false
  const char* storage; // the MLIR attribute holding it: unit, bool, i32,
                       // i64, f32, f64, i64s (compiler side only)
};

struct OpInfo {
  OpId id;
  const char* mnemonic; // "batch_norm"; the dialect name is "mc." + this
  int operands;         // -1: variadic
  bool isStep;          // false: codegen handles it (constant, reshape)
  AmpClass amp;
  bool fusible;         // elementwise: mc-fuse may put it in a fused region
  bool epilogueAnchor = false; // matmul, conv2d: may lead a fused region
                               // whose elementwise rest is its epilogue
  const char* cpuTypes; // "f32,f16,bf16"; "" = whatever ODS accepts
  const char* types;    // element types of operand 0 in the dialect; "" = any
  std::vector<AttrSpec> attrs;
};

namespace detail {
inline std::vector<OpInfo> buildOpTable() {
  std::vector<OpInfo> table;
#define MC_OP_INFO(id, operands, step, amp, fusible, cpuTypes, types)          \
  table.push_back(OpInfo{OpId::id, nullptr, operands, step, amp, fusible,      \
                         false, cpuTypes, types, {}});
#include "modelc/ops.inc"
#define MC_OP(id, name) table[size_t(OpId::id)].mnemonic = name;
#include "modelc/ops.inc"
#define MC_OP_EPILOGUE_ANCHOR(id) table[size_t(OpId::id)].epilogueAnchor = true;
#include "modelc/ops.inc"
#define MC_OP_ATTR(id, name, kind, optional, storage)                          \
  table[size_t(OpId::id)].attrs.push_back(                                     \
      AttrSpec{name, AttrKind::kind, optional, storage});
#include "modelc/ops.inc"
  return table;
}
} // namespace detail

/// Every op, indexed by OpId.
inline const std::vector<OpInfo>& opTable() {
  static const std::vector<OpInfo> table = detail::buildOpTable();
  return table;
}
inline const OpInfo& opInfo(OpId id) { return opTable()[size_t(id)]; }
inline const char* opName(OpId id) { return opInfo(id).mnemonic; }
/// reduce_sum, reduce_mean, reduce_max, reduce_min.
inline bool isReduction(OpId id) {
  return id == OpId::ReduceSum || id == OpId::ReduceMean ||
         id == OpId::ReduceMax || id == OpId::ReduceMin;
}
/// A fused region that is elementwise as a whole: not attention, not led
/// by an epilogue anchor, not ended by a reduction. Each output element is
/// computed from the same element of each input of the output's shape, so
/// (like an elementwise op) it may write a State buffer and run in place
/// (docs/artifact-format.md, "Steps").
inline bool isElementwiseRegion(bool attention, OpId first, OpId last) {
  return !attention && !opInfo(first).epilogueAnchor && !isReduction(last);
}
/// The op called `mnemonic` ("gelu"; "mc.gelu" also accepted); false when
/// there is none.
inline bool findOp(std::string_view mnemonic, OpId* out) {
  if (mnemonic.substr(0, 3) == "mc.")
    mnemonic.remove_prefix(3);
  for (const OpInfo& info : opTable())
    if (mnemonic == info.mnemonic) {
      *out = info.id;
      return true;
    }
  return false;
}

/// One attribute of a step, in the form the artifact stores it.
struct OpAttr {
  std::string name;
  AttrKind kind = AttrKind::Int;
  int64_t i = 0; // Bool (0/1) and Int
  double f = 0;  // Float
  std::vector<int64_t> ints;

  static OpAttr boolean(std::string n, bool v) {
    return OpAttr{std::move(n), AttrKind::Bool, v ? 1 : 0, 0, {}};
  }
  static OpAttr integer(std::string n, int64_t v) {
    return OpAttr{std::move(n), AttrKind::Int, v, 0, {}};
  }
  static OpAttr real(std::string n, double v) {
    return OpAttr{std::move(n), AttrKind::Float, 0, v, {}};
  }
  static OpAttr list(std::string n, std::vector<int64_t> v) {
    return OpAttr{std::move(n), AttrKind::Ints, 0, 0, std::move(v)};
  }
};

/// A step's attributes with typed lookups. Lookups of absent attributes
/// give the default (the verifier has checked that required ones exist and
/// have their registered kind).
class OpAttrs {
public:
  OpAttrs() = default;
  explicit OpAttrs(std::vector<OpAttr> attrs) : attrs_(std::move(attrs)) {}
  OpAttrs(std::initializer_list<OpAttr> attrs) : attrs_(attrs) {}

  const OpAttr* find(std::string_view name) const {
    for (const OpAttr& a : attrs_)
      if (a.name == name)
        return &a;
    return nullptr;
  }
  bool getBool(std::string_view name) const {
    const OpAttr* a = find(name);
    return a && a->i != 0;
  }
  int64_t getInt(std::string_view name, int64_t dflt = 0) const {
    const OpAttr* a = find(name);
    return a ? a->i : dflt;
  }
  double getFloat(std::string_view name, double dflt = 0) const {
    const OpAttr* a = find(name);
    return a ? a->f : dflt;
  }
  std::vector<int64_t> getInts(std::string_view name) const {
    const OpAttr* a = find(name);
    return a ? a->ints : std::vector<int64_t>();
  }
  /// Replaces the attribute of A's name, or adds A.
  void set(OpAttr a) {
    for (OpAttr& x : attrs_)
      if (x.name == a.name) {
        x = std::move(a);
        return;
      }
    attrs_.push_back(std::move(a));
  }
  const std::vector<OpAttr>& all() const { return attrs_; }
  std::vector<OpAttr>& all() { return attrs_; }

private:
  std::vector<OpAttr> attrs_;
};

} // namespace mc::rt

#endif // MODELC_OPS_H

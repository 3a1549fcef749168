#include "codegen/GraphDot.h"

#include "ir/MCDialect.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

using namespace mlir;

namespace mc::codegen {
namespace {

/// `s` inside a DOT double-quoted string.
std::string quoted(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// "f32[8, 64, 56, 56]" ("?" for a dynamic dim), or the type as printed.
std::string typeLabel(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto ranked = dyn_cast<RankedTensorType>(t);
  if (!ranked) {
    t.print(os);
    return s;
  }
  ranked.getElementType().print(os);
  os << "[";
  for (int64_t i = 0; i < ranked.getRank(); ++i) {
    if (i)
      os << ", ";
    if (ranked.isDynamicDim(i))
      os << "?";
    else
      os << ranked.getDimSize(i);
  }
  os << "]";
  return s;
}

/// The name an importer gave the op (an ONNX node: "/layer1/conv (Conv)"),
/// or "".
std::string sourceName(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string n = sourceName(l); !n.empty())
        return n;
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return "";
}

/// A fill colour by what the op does: anchors (matmul, convolution,
/// attention) orange, data movement grey, reductions and norms green,
/// collectives red, state blue, elementwise ops pale yellow.
const char* colorOf(Operation* op) {
  llvm::StringRef name = op->getName().stripDialect();
  if (name == "matmul" || name == "conv2d" || name == "fused")
    return "#fdd49e";
  if (name.starts_with("all_reduce"))
    return "#fc9272";
  if (isa<ml_program::GlobalLoadOp, ml_program::GlobalStoreOp>(op))
    return "#c6dbef";
  if (name.starts_with("reduce") || name.ends_with("softmax") ||
      name.ends_with("_norm") || name.ends_with("pool2d"))
    return "#c7e9c0";
  if (name == "reshape" || name == "transpose" || name == "slice" ||
      name == "concat" || name == "gather" || name == "pad" ||
      name == "broadcast_in_dim" || name == "copy" || name == "cast")
    return "#e0e0e0";
  return "#ffffcc";
}

class DotWriter {
public:
  explicit DotWriter(llvm::raw_ostream& os) : os_(os) {}

  void write(func::FuncOp fn) {
    os_ << "digraph " << quoted(fn.getSymName()) << " {\n"
        << "  node [shape=box, style=\"rounded,filled\", "
           "fontname=\"Helvetica\", fontsize=10];\n"
        << "  edge [color=\"#606060\"];\n";
    Block& body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      std::string id = "in" + std::to_string(arg.getArgNumber());
      auto name =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "mc.name");
      node(id,
           (name ? name.getValue().str()
                 : "input " + std::to_string(arg.getArgNumber())) +
               "\n" + typeLabel(arg.getType()),
           "shape=oval, fillcolor=\"#deebf7\"");
      producer_[arg] = id;
    }
    ops(body, "  ");
    Operation* ret = body.getTerminator();
    for (OpOperand& use : ret->getOpOperands()) {
      unsigned i = use.getOperandNumber();
      std::string id = "out" + std::to_string(i);
      auto name = fn.getResultAttrOfType<StringAttr>(i, "mc.name");
      node(id,
           (name ? name.getValue().str() : "output " + std::to_string(i)) +
               "\n" + typeLabel(use.get().getType()),
           "shape=oval, fillcolor=\"#deebf7\"");
      edge(use.get(), id);
    }
    os_ << edges_ << "}\n";
  }

private:
  /// Constants and weights: not drawn, nor are the edges from them.
  static bool hidden(Operation* op) {
    return isa<ml_program::GlobalLoadConstOp>(op) ||
           op->getName().getStringRef() == "mc.constant";
  }

  void node(const std::string& id, const std::string& label,
            const std::string& style, const std::string& indent = "  ") {
    os_ << indent << id << " [label=" << quoted(label) << ", " << style
        << "];\n";
  }

  /// Edges are written after every node: one written inside a cluster
  /// would pull its outside end into the cluster.
  void edge(Value from, const std::string& to) {
    auto it = producer_.find(from);
    if (it != producer_.end())
      edges_ += "  " + it->second + " -> " + to + ";\n";
  }

  std::string label(Operation* op) {
    std::string l = op->getName().stripDialect().str();
    // State: which global a training step reads or writes.
    if (auto global = op->getAttrOfType<SymbolRefAttr>("global"))
      l += " " + global.getLeafReference().str();
    if (op->getNumResults() > 0)
      l += "\n" + typeLabel(op->getResult(0).getType());
    if (std::string src = sourceName(op->getLoc()); !src.empty())
      l += "\n" + (src.size() > 48 ? src.substr(0, 45) + "..." : src);
    return l;
  }

  void ops(Block& block, const std::string& indent) {
    for (Operation& op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>() || hidden(&op))
        continue;
      std::string id = "n" + std::to_string(next_++);
      auto fused = dyn_cast<FusedOp>(op);
      if (!fused) {
        node(id, label(&op), std::string("fillcolor=\"") + colorOf(&op) + "\"",
             indent);
        for (Value v : op.getOperands())
          edge(v, id);
        for (Value r : op.getResults())
          producer_[r] = id;
        continue;
      }
      // A fused region: a box of its ops, entered where its body reads
      // each operand and left from the op that yields each result.
      Block& inner = fused.getBody().front();
      os_ << indent << "subgraph cluster_" << id << " {\n"
          << indent << "  label="
          << quoted(
                 "fused: " + std::to_string(inner.getOperations().size() - 1) +
                 " ops" + (fused->hasAttr("attention") ? " (attention)" : ""))
          << "; style=\"rounded,filled\"; fillcolor=\"#f4f4f4\"; "
             "color=\"#a0a0a0\"; fontname=\"Helvetica\"; fontsize=10;\n";
      for (auto [arg, operand] :
           llvm::zip(inner.getArguments(), fused->getOperands())) {
        // (Copied first: inserting `arg` may grow the map and move it.)
        auto it = producer_.find(operand);
        if (it != producer_.end()) {
          std::string id = it->second;
          producer_[arg] = id;
        }
      }
      ops(inner, indent + "  ");
      os_ << indent << "}\n";
      Operation* yield = inner.getTerminator();
      for (auto [result, yielded] :
           llvm::zip(fused->getResults(), yield->getOperands())) {
        auto it = producer_.find(yielded);
        if (it != producer_.end()) {
          std::string id = it->second;
          producer_[result] = id;
        }
      }
    }
  }

  llvm::raw_ostream& os_;
  llvm::DenseMap<Value, std::string> producer_;
  std::string edges_;
  unsigned next_ = 0;
};

} // namespace

void writeGraphDot(func::FuncOp fn, llvm::raw_ostream& os) {
  DotWriter(os).write(fn);
}

} // namespace mc::codegen

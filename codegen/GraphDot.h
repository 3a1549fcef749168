// The model's graph as Graphviz DOT (`modelc compile --emit=dot`): what a
// person would rather look at than read. One node per op of the entry
// function with its result's dtype and shape (and the ONNX node it came
// from), the inputs and outputs by name, edges along the data flow, and
// each fused region a box holding its ops. Constants and weights are left
// out (they would outnumber the ops); state read and written by a training
// step shows as nodes of its own.
//
// Why not MLIR's view-op-graph pass: it writes a port per value named
// after the value's SSA name, unquoted, so a name with a dot in it (an
// imported model's `%fc.bias`) makes the file unreadable to Graphviz; and
// it draws every weight and the module's globals.
#ifndef MODELC_CODEGEN_GRAPHDOT_H
#define MODELC_CODEGEN_GRAPHDOT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mc::codegen {

/// Writes `fn`'s graph to `os` as a DOT digraph.
void writeGraphDot(mlir::func::FuncOp fn, llvm::raw_ostream& os);

} // namespace mc::codegen

#endif // MODELC_CODEGEN_GRAPHDOT_H

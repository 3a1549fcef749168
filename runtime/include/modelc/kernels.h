// CPU kernels: the definition of what every mc op computes. The runtime's
// executor and the eager frontend both call these, so eager and compiled
// results come from the same code ("one source of numerical truth").
//
// Kernels trust shapes they are given only after checkShapes-style
// validation by the caller; each still returns a Status (never aborts) for
// dtype combinations it does not implement.
#ifndef MODELC_KERNELS_H
#define MODELC_KERNELS_H

#include "modelc/status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mc::rt {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, I1 = 5 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t); // "f32", "f16", "bf16", "i32", "i64", "i1"

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape& shape);
std::string shapeString(const Shape& shape); // "[4, 8]"

struct ConstTensor {
  DType dtype;
  Shape shape;
  const void* data;
};
struct MutTensor {
  DType dtype;
  Shape shape;
  void* data;
};

enum class UnaryOp { Neg, Exp, Log, Tanh, Sigmoid, Relu, Sqrt };
enum class BinaryOp { Add, Sub, Mul, Div, Maximum };
enum class ReduceOp { Sum, Mean, Max };

/// out = op(a); same shape and dtype. f32 for all ops; i32/i64 for Neg, Relu.
Status unary(UnaryOp op, const ConstTensor& a, const MutTensor& out);
/// out = op(a, b); all three have one shape and dtype. f32, i32, i64.
Status binary(BinaryOp op, const ConstTensor& a, const ConstTensor& b,
              const MutTensor& out);
/// Element type conversion between any two of the six dtypes (f->int
/// truncates toward zero, x->i1 is x != 0, f32->f16/bf16 rounds to nearest
/// even).
Status cast(const ConstTensor& a, const MutTensor& out);
/// out[i_0..i_n] = a[i_dims[0]..]: operand dim k maps to result dim dims[k],
/// operand dim size 1 broadcasts. Any dtype.
Status broadcastInDim(const ConstTensor& a, const std::vector<int64_t>& dims,
                      const MutTensor& out);
/// out.shape[i] == a.shape[perm[i]]. Any dtype.
Status transpose(const ConstTensor& a, const std::vector<int64_t>& perm,
                 const MutTensor& out);
/// Reduce over `dims` (sorted, unique); out has those dims removed, or kept
/// as size 1 when keepdim. f32 (Max also i32/i64).
Status reduce(ReduceOp op, const ConstTensor& a,
              const std::vector<int64_t>& dims, bool keepdim,
              const MutTensor& out);
/// Numerically stable softmax along `axis` (max subtracted). f32.
Status softmax(const ConstTensor& a, int64_t axis, const MutTensor& out);
/// Batched matmul: a [..., M, K] (or [..., K, M] when transposeA), b [..., K,
/// N] (or [..., N, K]); batch dims equal; out [..., M, N]. f32 via BLAS.
Status matmul(const ConstTensor& a, const ConstTensor& b, bool transposeA,
              bool transposeB, const MutTensor& out);
/// Byte copy; same dtype and element count.
Status copy(const ConstTensor& a, const MutTensor& out);

/// f16 / bf16 <-> f32 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

} // namespace mc::rt

#endif // MODELC_KERNELS_H

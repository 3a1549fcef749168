// Reading and writing NumPy .npy files (format v1/v2/v3, little-endian,
// C order), the tensor exchange format of modelc-run and the tests.
//
// dtype mapping: f32 '<f4', f16 '<f2', i32 '<i4', i64 '<i8', i1 '|b1' (also
// read: '?'). NumPy has no bfloat16, so a bf16 tensor is written as '<f4'
// (exact: every bf16 is an f32) and read back as f32; callers that need bf16
// round it with cast() (round to nearest even).
#ifndef MODELC_NPY_H
#define MODELC_NPY_H

#include "modelc/kernels.h"
#include "modelc/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt {

struct NpyArray {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data; // numElements(shape) * dtypeSize(dtype) bytes
};

/// Parses the bytes of a .npy file; `name` (usually the path) prefixes every
/// error message.
Status parseNpy(const void *bytes, size_t size, const std::string &name,
                NpyArray *out);
Status readNpy(const std::string &path, NpyArray *out);

/// Encodes `data` (numElements(shape) * dtypeSize(dtype) bytes); bf16 is
/// widened to f4 as described above.
Status encodeNpy(DType dtype, const Shape &shape, const void *data,
                 std::vector<uint8_t> *out);
Status writeNpy(const std::string &path, DType dtype, const Shape &shape,
                const void *data);

} // namespace mc::rt

#endif // MODELC_NPY_H

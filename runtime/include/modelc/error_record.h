// Errors a generated kernel finds (an index out of range in a gather by
// computed indices, an integer division by zero), reported the way the
// CPU's kernels report them (docs/cuda.md, "Errors found by a kernel").
//
// A kernel that can fail gets, after its batch parameter, a pointer to a
// 16-byte record of two u64 words, zero when nothing failed. Every element
// that fails does
//
//   word[0] = atomic_max(word[0], key(position) | low 32 bits of value)
//   word[1] = atomic_max(word[1], key(position) | high 32 bits of value)
//
// with key(p) = (0xFFFFFFFF - min(p, 0xFFFFFFFE)) << 32, so both words end
// up holding the lowest failing position (the element the CPU names, since
// it stops at the first) with the two halves of that element's value:
// deterministic whatever the order the threads ran in, and exact because
// one position has one value. Plain 64-bit atomics (PTX atom.max.u64,
// SPIR-V OpAtomicUMax), no compare-and-swap loop. MLIR-free: the compiler
// uses the layout, the device decodes it.
#ifndef MODELC_ERROR_RECORD_H
#define MODELC_ERROR_RECORD_H

#include "modelc/ops.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt {

inline constexpr size_t kErrorRecordBytes = 16;
/// Positions at or above this are recorded as this (the key has 32 bits).
inline constexpr uint64_t kErrorRecordMaxPosition = 0xFFFFFFFEull;

struct ErrorRecord {
  bool failed = false;
  uint64_t position = 0; // the lowest failing element (capped, see above)
  int64_t value = 0;     // that element's value (a gather's index; 0
                         // for a division by zero)
};

/// Decodes a record's two words.
ErrorRecord decodeErrorRecord(const uint64_t words[2]);
/// The two words element `position` failing with `value` contributes (each
/// atomic-maxed into the record). Inline: the tests' fake driver uses it.
inline void encodeErrorRecord(uint64_t position, int64_t value,
                              uint64_t words[2]) {
  uint64_t p = position < kErrorRecordMaxPosition ? position
                                                  : kErrorRecordMaxPosition;
  uint64_t key = (0xFFFFFFFFull - p) << 32, bits = uint64_t(value);
  words[0] = key | (bits & 0xFFFFFFFFull);
  words[1] = key | (bits >> 32);
}

/// The CPU's messages, shared by its kernels and the device's report.
/// "gather: index 7 (at position 3 of the indices) is out of range for an
/// axis of size 5" (`op` gather or scatter_add).
std::string indexError(const char* op, int64_t index, uint64_t position,
                       int64_t axisSize);
/// "div: integer division by zero at element 12".
std::string integerDivisionError(uint64_t element);

/// The CPU kernel's message for the failed record `e` of the generated
/// kernel of a step `op` (its attributes, its inputs' shapes): a gather's
/// index out of range, else an integer division by zero (in a fused region
/// too: the CPU's message is the op's, and the step names the region).
std::string kernelErrorMessage(OpId op, const OpAttrs& attrs,
                               const std::vector<std::vector<int64_t>>& inputs,
                               const ErrorRecord& e);

} // namespace mc::rt

#endif // MODELC_ERROR_RECORD_H

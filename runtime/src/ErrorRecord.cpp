// Error records of generated kernels (see modelc/error_record.h).
#include "modelc/error_record.h"


namespace mc::rt {
namespace {

std::string positionText(uint64_t p) {
  return p >= kErrorRecordMaxPosition
             ? std::to_string(kErrorRecordMaxPosition) + " or later"
             : std::to_string(p);
}

} // namespace

ErrorRecord decodeErrorRecord(const uint64_t words[2]) {
  ErrorRecord r;
  if (!words[0] && !words[1])
    return r;
  r.failed = true;
  r.position = 0xFFFFFFFFull - (words[0] >> 32);
  uint64_t bits = (words[0] & 0xFFFFFFFFull) | (words[1] << 32);
  r.value = int64_t(bits);
  return r;
}

std::string indexError(const char* op, int64_t index, uint64_t position,
                       int64_t axisSize) {
  return std::string(op) + ": index " + std::to_string(index) +
         " (at position " + positionText(position) +
         " of the indices) is out of range for an axis of size " +
         std::to_string(axisSize);
}

std::string integerDivisionError(uint64_t element) {
  return "div: integer division by zero at element " + positionText(element);
}

std::string kernelErrorMessage(OpId op, const OpAttrs& attrs,
                               const std::vector<std::vector<int64_t>>& inputs,
                               const ErrorRecord& e) {
  if (op == OpId::Gather && inputs.size() == 2) {
    int64_t axis = attrs.getInt("axis");
    const std::vector<int64_t>& data = inputs[0];
    int64_t size = axis >= 0 && size_t(axis) < data.size() ? data[axis] : 0;
    return indexError("gather", e.value, e.position, size);
  }
  if (op == OpId::ScatterAdd)
    return indexError("scatter_add", e.value, e.position, attrs.getInt("size"));
  return integerDivisionError(e.position);
}

} // namespace mc::rt

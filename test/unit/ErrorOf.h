// Test helper: the message of the mc::Error a callable throws.
#ifndef MODELC_TEST_UNIT_ERROROF_H
#define MODELC_TEST_UNIT_ERROROF_H

#include "frontend/Tensor.h"

#include <string>

namespace mc::test {

/// The message of the Error that F throws ("" when it throws none).
template <typename F> std::string errorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

} // namespace mc::test

#endif // MODELC_TEST_UNIT_ERROROF_H

// Status: errors as values in the runtime (no exceptions cross its API).
#ifndef MODELC_STATUS_H
#define MODELC_STATUS_H

#include <string>
#include <utility>

namespace mc::rt {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

#define MC_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    ::mc::rt::Status _mc_status = (expr);                                      \
    if (!_mc_status.isOk())                                                    \
      return _mc_status;                                                       \
  } while (0)

} // namespace mc::rt

#endif // MODELC_STATUS_H

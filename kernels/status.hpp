// The result of a kernel entry point, a validation or a launch: success, or an error with the
// message a user reads (it names the argument or the CUDA error). Never ignored ([[nodiscard]]).
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>
#include <utility>

namespace kvq {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  // An error with this message; an empty message is success (launch::status of cudaSuccess).
  Status(std::string message) : message_(std::move(message)) {}  // NOLINT: implicit, `return "why";`
  Status(const char* message) : message_(message) {}             // NOLINT

  Status(const Status&) = default;
  Status(Status&&) = default;
  // Assignment returns nothing: nvcc's front end reports the Status& that a defaulted assignment
  // returns as a discarded [[nodiscard]] value at every `e = launch(...)`.
  void operator=(const Status& other) { message_ = other.message_; }
  void operator=(Status&& other) { message_ = std::move(other.message_); }

  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// The first error among several results, else success.
inline Status first_error(std::initializer_list<Status> all) {
  for (const Status& s : all)
    if (!s.ok()) return s;
  return {};
}

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.message(); }

}  // namespace kvq

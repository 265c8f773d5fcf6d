// Errors as values. Our own code never throws across a function boundary: every
// fallible call returns Status or StatusOr<T>; third-party exceptions are caught in
// the adapter that wraps that library.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gputriage {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something malformed (bad flag, bad value)
  kNotFound,         // a file or entity does not exist
  kDataLoss,         // input is corrupt or truncated beyond what can be imported
  kUnimplemented,    // a valid input we do not read (e.g. an unknown format)
  kIoError,          // the operating system refused a read or write
  kInternal,         // a broken invariant in our own code
};

/// The outcome of an operation: ok, or a code with a message that names the file,
/// position and field involved.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// "data_loss: file.json: byte 120: unterminated string" style text.
  std::string ToString() const;

  /// Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* StatusCodeName(StatusCode code);

inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "StatusOr built from an ok Status has no value");
    if (status_.ok()) status_ = InternalError("StatusOr constructed from ok Status without value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gputriage

#define GPUTRIAGE_CONCAT_INNER(a, b) a##b
#define GPUTRIAGE_CONCAT(a, b) GPUTRIAGE_CONCAT_INNER(a, b)

/// Returns the Status from the enclosing function when `expr` is not ok.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::gputriage::Status status_macro_ = (expr);      \
    if (!status_macro_.ok()) return status_macro_;   \
  } while (false)

/// `ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(GPUTRIAGE_CONCAT(statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

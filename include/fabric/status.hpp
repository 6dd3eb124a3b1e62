#pragma once
// Errors are values: every fallible call returns Status or Result<T>.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace fabric {

enum class Errc : std::uint8_t {
  ok = 0,
  invalid_argument,  // a request that can never succeed as written
  out_of_range,      // an offset/length/page index outside a registration
  malformed,         // a wire-format decode failed
  again,             // back-pressure: retry later; nothing was submitted
  timeout,           // a bounded wait ran out
  provider,          // the fabric provider reported an error (message carries its text)
  unsupported,       // the provider or build lacks a needed capability
  not_found,         // unknown handle, provider or device
  shutdown,          // the engine is stopping or stopped
  cancelled,         // outstanding work abandoned by stop()
};

[[nodiscard]] std::string_view errc_name(Errc code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return {}; }

  [[nodiscard]] bool ok() const noexcept { return code_ == Errc::ok; }
  [[nodiscard]] Errc code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  // "code: message", or "ok".
  [[nodiscard]] std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// Thrown by Result<T>::value() (and by * and ->) on a Result that holds an
// error: what() is the Status's "code: message", status() the Status itself.
// Check ok() first where an error is expected; this is for the unexpected.
class BadResultAccess : public std::runtime_error {
 public:
  explicit BadResultAccess(Status status);
  [[nodiscard]] const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

// Holds either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(state_).ok()) {
      state_ = Status(Errc::invalid_argument, "Result constructed from an ok Status");
    }
  }

  [[nodiscard]] bool ok() const noexcept { return std::holds_alternative<T>(state_); }
  explicit operator bool() const noexcept { return ok(); }

  // The value; throws BadResultAccess carrying the error when there is none.
  [[nodiscard]] T& value() & {
    throw_if_error();
    return std::get<T>(state_);
  }
  [[nodiscard]] const T& value() const& {
    throw_if_error();
    return std::get<T>(state_);
  }
  [[nodiscard]] T&& value() && {
    throw_if_error();
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error, or an ok Status when a value is held.
  [[nodiscard]] Status status() const {
    if (ok()) return Status::success();
    return std::get<Status>(state_);
  }

 private:
  void throw_if_error() const {
    if (!ok()) throw BadResultAccess(std::get<Status>(state_));
  }

  std::variant<T, Status> state_;
};

}  // namespace fabric

#pragma once
// Error types of sfb. Every failure throws one of these; the message names the file, line,
// field or rank and the values involved, and says what to do.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace sfb {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Bad user input: config keys, command-line flags, plugin files. sfbd exits with code 2.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// Malformed or inconsistent data files, model files and checkpoints. sfbd exits with code 2.
class DataError : public Error {
 public:
  using Error::Error;
};
// Transport failures and malformed wire messages.
class CommError : public Error {
 public:
  using Error::Error;
};
// A broken internal invariant: a bug in sfb, never the user's fault.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace sfb

// User input check: throws InvalidArgument with a formatted message.
#define SFB_CHECK(cond, ...)                                             \
  do {                                                                   \
    if (!(cond)) throw ::sfb::InvalidArgument(fmt::format(__VA_ARGS__)); \
  } while (0)

// Data check: throws DataError with a formatted message.
#define SFB_CHECK_DATA(cond, ...)                                  \
  do {                                                             \
    if (!(cond)) throw ::sfb::DataError(fmt::format(__VA_ARGS__)); \
  } while (0)

// Internal invariant: throws InternalError naming the source location.
#define SFB_ENFORCE(cond, ...)                                                                                       \
  do {                                                                                                               \
    if (!(cond))                                                                                                     \
      throw ::sfb::InternalError(fmt::format("{}:{}: internal invariant '{}' failed: {}", __FILE__, __LINE__, #cond, \
                                             fmt::format(__VA_ARGS__)));                                             \
  } while (0)

//===- ExpectedErrors.h - What a reader may throw on bad bytes --*- C++ -*-===//
//
// A reader given bad bytes must throw the project's error for it (the tools
// print its message, naming the file and key, and exit 1), or LibTorch's
// c10::Error from inside LibTorch's own loaders. Anything else escaping is
// a finding: an unchecked nlohmann access, a std::out_of_range, a
// std::bad_alloc from a size nobody checked against the file. It is
// reported and aborts, so libFuzzer keeps the input.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TEST_FUZZ_EXPECTEDERRORS_H
#define DS_TEST_FUZZ_EXPECTEDERRORS_H

#include "FuzzInput.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

namespace ds::fuzz {

[[noreturn]] inline void unexpectedError(const char *what, const char *type) {
  std::fprintf(stderr, "fuzz: unexpected exception (%s): %s\n", type, what);
  std::abort();
}

} // namespace ds::fuzz

/// Runs `body`, accepting the given error types and aborting on any other.
#define DS_FUZZ_GUARD(body, ...)                                               \
  try {                                                                        \
    body;                                                                      \
  } __VA_ARGS__ catch (const std::exception &error) {                          \
    ::ds::fuzz::unexpectedError(error.what(), typeid(error).name());           \
  }

#define DS_FUZZ_ACCEPT(type)                                                   \
  catch (const type &error) {                                                  \
    if (::ds::fuzz::verbose())                                                 \
      std::fprintf(stderr, "fuzz: accepted: %s\n", error.what());              \
  }

#endif // DS_TEST_FUZZ_EXPECTEDERRORS_H

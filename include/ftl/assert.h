// Assertions and fatal errors.
//
// FTL_ASSERT(cond, fmt, ...) checks an internal invariant or a precondition on
// a hot path. It is compiled in when FTL_ENABLE_ASSERTS is non-zero (the
// default in Debug builds; CI forces it on in Release too). A user may define
// FTL_ASSERT before including any ftl header to route it elsewhere.
//
// FTL_FATAL(fmt, ...) reports a state that must never happen, or a misuse the
// library cannot recover from, and aborts. It is always compiled in. Misuse
// checks that cost nothing on a hot path use it directly, so they fire in every
// build.
#pragma once

#include "ftl/detail/config.h"

namespace ftl {
namespace detail {

[[noreturn]] void Fatal(char const *file, int line, char const *format, ...) FTL_PRINTF_FORMAT(3, 4);

} // namespace detail
} // namespace ftl

#ifndef FTL_ENABLE_ASSERTS
#ifdef NDEBUG
#define FTL_ENABLE_ASSERTS 0
#else
#define FTL_ENABLE_ASSERTS 1
#endif
#endif

#define FTL_FATAL(...) ::ftl::detail::Fatal(__FILE__, __LINE__, __VA_ARGS__)

#ifndef FTL_ASSERT
#if FTL_ENABLE_ASSERTS
#define FTL_ASSERT(cond, ...)                                                                                \
    do {                                                                                                     \
        if (FTL_UNLIKELY(!(cond))) {                                                                         \
            ::ftl::detail::Fatal(__FILE__, __LINE__, __VA_ARGS__);                                           \
        }                                                                                                    \
    } while (0)
#else
#define FTL_ASSERT(cond, ...)                                                                                \
    do {                                                                                                     \
        (void)sizeof(cond);                                                                                  \
    } while (0)
#endif
#endif

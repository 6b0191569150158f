// Internal: the compiler-specific constructs of the public headers, each with
// a branch for GCC and Clang and one for every other compiler (MSVC), which
// gets plain C++. Nothing here is API.
#pragma once

// A condition that is almost never true, for the compiler's block layout.
#if defined(__GNUC__) || defined(__clang__)
#define FTL_UNLIKELY(condition) __builtin_expect(!!(condition), 0)
#else
#define FTL_UNLIKELY(condition) (condition)
#endif

// A function the optimizer must neither inline nor look into from its
// callers (GCC's noipa; Clang has only noinline).
#if defined(__clang__)
#define FTL_NO_IPA __attribute__((noinline))
#elif defined(__GNUC__)
#define FTL_NO_IPA __attribute__((noipa))
#else
#define FTL_NO_IPA
#endif

// printf-style checking of a format argument. GCC's gnu_printf: the library
// formats with C99 conversions (%zu) everywhere, MinGW-w64's printf
// included, which plain printf would take for Microsoft's; Clang knows only
// printf, which means the same to it.
#if defined(__clang__)
#define FTL_PRINTF_FORMAT(formatIndex, firstArgIndex)                                                        \
    __attribute__((format(printf, formatIndex, firstArgIndex)))
#elif defined(__GNUC__)
#define FTL_PRINTF_FORMAT(formatIndex, firstArgIndex)                                                        \
    __attribute__((format(gnu_printf, formatIndex, firstArgIndex)))
#else
#define FTL_PRINTF_FORMAT(formatIndex, firstArgIndex)
#endif

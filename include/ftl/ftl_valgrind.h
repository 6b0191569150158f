// Helgrind annotations, under the lineage's names: code written for
// FiberTaskingLib marks its intentionally racy variables with them.
//
// FTL_VALGRIND_HG_DISABLE_CHECKING(addr, len) and
// FTL_VALGRIND_HG_ENABLE_CHECKING(addr, len) turn Helgrind's race checks off
// and on for a range of memory. They expand to Valgrind's client requests when
// the program is compiled with FTL_VALGRIND defined and <valgrind/helgrind.h>
// is available (Debian package valgrind), and to nothing otherwise.
#pragma once

#if defined(FTL_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#define FTL_VALGRIND_HG_DISABLE_CHECKING(addr, len) VALGRIND_HG_DISABLE_CHECKING(addr, len)
#define FTL_VALGRIND_HG_ENABLE_CHECKING(addr, len) VALGRIND_HG_ENABLE_CHECKING(addr, len)
#endif
#endif

#ifndef FTL_VALGRIND_HG_DISABLE_CHECKING
#define FTL_VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)(addr), (void)(len))
#define FTL_VALGRIND_HG_ENABLE_CHECKING(addr, len) ((void)(addr), (void)(len))
#endif

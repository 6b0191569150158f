// <windows.h> for ftl's Windows files: without the rarely used parts, and
// without its Yield() macro, a 16-bit Windows relic that would rename
// TaskScheduler::Yield in any file that includes both.
#pragma once

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#undef Yield

// The systems the suite measures. Each returns its implementations of the
// workloads (see workloads.h); a peer that was not found at configure time is
// not compiled, and its column says "n/a".
#pragma once

#include "harness.h"

#include "ftl/task_scheduler.h"

#include <string>

namespace ftl {
namespace detail {
struct Mechanisms; // source/scheduler/mechanisms.h: the measurement switches
} // namespace detail
} // namespace ftl

namespace bench {

// ftl with the given scheduling mechanisms (all on: the default).
System MakeFtlSystem(std::string name, ftl::detail::Mechanisms const &mechanisms);
// Hand-written references and raw hardware limits: a plain std::thread loop
// for W6, a bare futex wake for W8, R1 and R2.
System MakeReferenceSystem();

// Defined only when the peer was found (FTL_BENCH_HAVE_TBB and friends).
System MakeTbbSystem();
System MakeOpenMpSystem();
System MakeBoostFiberSystem();

} // namespace bench

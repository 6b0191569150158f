// ftl_switch_cost: what one fiber switch costs with the backend this build
// uses (Boost.Context's fcontext, or the Win32 fiber API). A thread's own
// fiber and one pool fiber switch back and forth; the figure is the median
// over repetitions of the time per switch. Nothing of the scheduler runs.
//
//   ftl_switch_cost [--switches N] [--reps R]
//
// Prints one line: "backend=<boost|win32> os=<linux|windows>
// arch=<x86_64|aarch64> ns_per_switch=<median> min=<min> max=<max>".
// benchmarks/switch_cost.py runs it for each build and writes the results.
#include "fiber/fiber.h"
#include "platform/platform.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using ftl::detail::Fiber;

Fiber g_thread;
Fiber g_pool;

// The pool fiber's whole life: switch straight back, forever.
void Bounce(void * /*message*/) {
    for (;;) {
        ftl::detail::SwitchFiber(&g_pool, &g_thread, nullptr);
    }
}

char const *Backend() {
#if FTL_FIBER_WIN32
    return "win32";
#else
    return "boost";
#endif
}

char const *Os() {
#if defined(_WIN32)
    return "windows";
#else
    return "linux";
#endif
}

char const *Arch() {
#if defined(__x86_64__) || defined(_M_X64)
    return "x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
    return "aarch64";
#else
    return "other";
#endif
}

} // namespace

int main(int argc, char **argv) {
    unsigned long switches = 2000000;
    unsigned reps = 7;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--switches") == 0 && i + 1 < argc) {
            switches = std::strtoul(argv[++i], nullptr, 10);
        } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else {
            std::fprintf(stderr, "usage: ftl_switch_cost [--switches N] [--reps R]\n");
            return 2;
        }
    }
    if (switches < 2 || reps == 0) {
        std::fprintf(stderr, "ftl_switch_cost: --switches must be at least 2 and --reps at least 1\n");
        return 2;
    }
    ftl::detail::AdoptThreadStack(g_thread, 0, false);
    if (!ftl::detail::MakeFiberStack(g_pool, 1, 64 * 1024, 64 * 1024, &Bounce)) {
        std::fprintf(stderr, "ftl_switch_cost: no memory for a fiber stack\n");
        return 1;
    }
    unsigned long const roundTrips = switches / 2;
    ftl::detail::SwitchFiber(&g_thread, &g_pool, nullptr); // the first entry, untimed
    std::vector<double> perSwitch;
    for (unsigned rep = 0; rep < reps; ++rep) {
        std::uint64_t const start = ftl::detail::NowNs();
        for (unsigned long i = 0; i < roundTrips; ++i) {
            ftl::detail::SwitchFiber(&g_thread, &g_pool, nullptr);
        }
        std::uint64_t const end = ftl::detail::NowNs();
        perSwitch.push_back(static_cast<double>(end - start) / static_cast<double>(2 * roundTrips));
    }
    std::sort(perSwitch.begin(), perSwitch.end());
    std::printf("backend=%s os=%s arch=%s ns_per_switch=%.2f min=%.2f max=%.2f\n", Backend(), Os(), Arch(),
                perSwitch[perSwitch.size() / 2], perSwitch.front(), perSwitch.back());
    // The pool fiber is left suspended: the process ends here.
    ftl::detail::ReleaseThreadStack(g_thread);
    return 0;
}

// ftl_stress: runs randomized stress rounds (stress_core.h) and checks them.
//
//   ftl_stress [--seed S] [--threads T] [--rounds N] [--seconds S] [--scale X]
//              [--waves N] [--round-timeout S]
//
// Without --seconds it runs --rounds rounds (default 4, at 1, 2, 3 and 8
// threads). With --seconds it keeps starting rounds until the time is up (the
// soak), cycling through the same thread counts. --threads fixes the thread
// count of every round. The first round uses --seed (default: a random seed);
// every later round derives its own. Each round prints its seed and thread
// count before it starts, so a failing round reproduces with
//
//   ftl_stress --seed S --threads T --rounds 1
//
// The run stops at the first failing round. A round still running after
// --round-timeout seconds is reported as a hang (with its task counts so far)
// and the process aborts.
//
// The last line is the summary: rounds, tasks run, tasks lost (expected minus
// run, must be 0), wake latency (max, median and 99th percentile, in
// microseconds, of tasks added while the other workers slept). The exit
// status is 0 only if every round passed.
#include "stress_core.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned kThreadCycle[] = {1, 2, 3, 8};
constexpr unsigned kMaxThreads = 256;

struct Options {
    bool HaveSeed = false;
    std::uint64_t Seed = 0;
    unsigned Threads = 0; // 0: cycle through kThreadCycle
    unsigned Rounds = 4;
    double Seconds = 0; // > 0: run rounds until this much time has passed
    double Scale = ftl_stress::DefaultScale();
    unsigned Waves = ftl_stress::DefaultWaves();
    double RoundTimeout = ftl_stress::kSanitizedBuild ? 300.0 : 90.0;
};

void Usage(FILE *out) {
    std::fprintf(out,
                 "usage: ftl_stress [--seed S] [--threads T] [--rounds N] [--seconds S] [--scale X]\n"
                 "                  [--waves N] [--round-timeout S]\n"
                 "  --seed S           seed of the first round (decimal or 0x hex); default random\n"
                 "  --threads T        threads of every round; default cycles 1, 2, 3, 8\n"
                 "  --rounds N         rounds to run (default 4); ignored with --seconds\n"
                 "  --seconds S        run rounds until S seconds have passed (the soak)\n"
                 "  --scale X          workload size multiplier (default %.2f in this build)\n"
                 "  --waves N          workload mixes run one after another per round (default %u here)\n"
                 "  --round-timeout S  report a hang and abort when a round runs longer (default %.0f)\n",
                 ftl_stress::DefaultScale(), ftl_stress::DefaultWaves(), Options().RoundTimeout);
}

bool ParseUnsigned(char const *text, std::uint64_t &value) {
    if (text == nullptr || *text == '\0' || *text == '-') {
        return false;
    }
    char *end = nullptr;
    errno = 0;
    unsigned long long const parsed = std::strtoull(text, &end, 0);
    if (errno != 0 || end == nullptr || *end != '\0') {
        return false;
    }
    value = parsed;
    return true;
}

bool ParsePositive(char const *text, double &value) {
    if (text == nullptr || *text == '\0') {
        return false;
    }
    char *end = nullptr;
    double const parsed = std::strtod(text, &end);
    if (end == nullptr || *end != '\0' || !(parsed > 0)) {
        return false;
    }
    value = parsed;
    return true;
}

// Every option but --help takes one value.
bool ParseArgs(int argc, char **argv, Options &options) {
    for (int i = 1; i < argc; i += 2) {
        char const *const arg = argv[i];
        char const *const value = i + 1 < argc ? argv[i + 1] : nullptr;
        std::uint64_t number = 0;
        if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
            Usage(stdout);
            std::exit(0);
        } else if (std::strcmp(arg, "--seed") == 0 && ParseUnsigned(value, number)) {
            options.HaveSeed = true;
            options.Seed = number;
        } else if (std::strcmp(arg, "--threads") == 0 && ParseUnsigned(value, number) && number >= 1 &&
                   number <= kMaxThreads) {
            options.Threads = static_cast<unsigned>(number);
        } else if (std::strcmp(arg, "--rounds") == 0 && ParseUnsigned(value, number) && number >= 1 &&
                   number <= 1000000) {
            options.Rounds = static_cast<unsigned>(number);
        } else if (std::strcmp(arg, "--seconds") == 0 && ParsePositive(value, options.Seconds)) {
        } else if (std::strcmp(arg, "--scale") == 0 && ParsePositive(value, options.Scale)) {
        } else if (std::strcmp(arg, "--waves") == 0 && ParseUnsigned(value, number) && number >= 1 &&
                   number <= 1000) {
            options.Waves = static_cast<unsigned>(number);
        } else if (std::strcmp(arg, "--round-timeout") == 0 && ParsePositive(value, options.RoundTimeout)) {
        } else {
            std::fprintf(stderr, "ftl_stress: bad argument '%s'%s%s\n", arg, value != nullptr ? " " : "",
                         value != nullptr ? value : "");
            Usage(stderr);
            return false;
        }
    }
    return true;
}

std::uint64_t RoundSeed(std::uint64_t base, unsigned round) {
    if (round == 0) {
        return base;
    }
    // SplitMix64 of base + round: well spread, and different for every round.
    std::uint64_t x = base + 0x9e3779b97f4a7c15ull * round;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Aborts the process when a round hangs, after printing how far it got: a
// deadlock must fail with its seed, not run into CTest's timeout silently.
class Watchdog {
public:
    Watchdog(ftl_stress::RoundMonitor &monitor, double timeoutSeconds)
        : m_monitor(monitor), m_timeout(std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(timeoutSeconds))),
          m_thread([this] { Watch(); }) {}

    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_quit = true;
        }
        m_wake.notify_all();
        m_thread.join();
    }

    Watchdog(Watchdog const &) = delete;
    Watchdog &operator=(Watchdog const &) = delete;

    void RoundStarted(unsigned round, std::uint64_t seed, unsigned threads, std::string reproduce) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_running = true;
        m_round = round;
        m_seed = seed;
        m_threads = threads;
        m_reproduce = std::move(reproduce);
        m_start = Clock::now();
    }

    void RoundEnded() {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_running = false;
    }

private:
    void Watch() {
        std::unique_lock<std::mutex> lock(m_mutex);
        while (!m_quit) {
            m_wake.wait_for(lock, std::chrono::milliseconds(500));
            if (m_running && Clock::now() - m_start > m_timeout) {
                double const seconds = std::chrono::duration<double>(Clock::now() - m_start).count();
                std::fprintf(
                    stderr,
                    "\nftl_stress: HANG: round %u (seed %" PRIu64 ", %u threads) still running after %.0f s\n"
                    "  main thread: %s\n  task counts so far:\n%s"
                    "  reproduce: %s\n",
                    m_round, m_seed, m_threads, seconds, m_monitor.Phase.load(std::memory_order_relaxed),
                    m_monitor.Describe(true).c_str(), m_reproduce.c_str());
                std::fflush(stderr);
                std::abort();
            }
        }
    }

    ftl_stress::RoundMonitor &m_monitor;
    Clock::duration const m_timeout;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_quit = false;
    bool m_running = false;
    unsigned m_round = 0;
    std::uint64_t m_seed = 0;
    unsigned m_threads = 0;
    std::string m_reproduce;
    Clock::time_point m_start;
    std::thread m_thread; // last: starts once the members above exist
};

// The command that reruns one round. The seed fixes the plan only together
// with the scale and the wave count, so those are named when they are not
// this build's defaults.
std::string ReproduceCommand(std::uint64_t seed, unsigned threads, Options const &options) {
    char text[200];
    std::snprintf(text, sizeof(text), "ftl_stress --seed %" PRIu64 " --threads %u --rounds 1", seed, threads);
    std::string command = text;
    if (options.Scale != ftl_stress::DefaultScale()) {
        std::snprintf(text, sizeof(text), " --scale %.17g", options.Scale);
        command += text;
    }
    if (options.Waves != ftl_stress::DefaultWaves()) {
        command += " --waves " + std::to_string(options.Waves);
    }
    return command;
}

// The value below which `fraction` of the values lie (nearest rank).
double Percentile(std::vector<double> values, double fraction) {
    if (values.empty()) {
        return 0;
    }
    auto const rank = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank), values.end());
    return values[rank];
}

double Median(std::vector<double> values) {
    return Percentile(std::move(values), 0.5);
}

} // namespace

int main(int argc, char **argv) {
    Options options;
    if (!ParseArgs(argc, argv, options)) {
        return 2;
    }
    if (!options.HaveSeed) {
        std::random_device device;
        options.Seed = (std::uint64_t(device()) << 32) ^ device() ^
                       static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
    }
    // Line-buffered even into a pipe (CTest), so progress shows as it happens
    // and a hang's report follows the round it interrupts.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);

    std::string threadsText = options.Threads != 0 ? std::to_string(options.Threads) : "1,2,3,8 in turn";
    if (options.Seconds > 0) {
        std::printf("ftl_stress: seed %" PRIu64 ", threads %s, for %.0f s, scale %.2f, %u waves%s\n",
                    options.Seed, threadsText.c_str(), options.Seconds, options.Scale, options.Waves,
                    ftl_stress::kSanitizedBuild ? " (sanitizer build)" : "");
    } else {
        std::printf("ftl_stress: seed %" PRIu64 ", threads %s, %u rounds, scale %.2f, %u waves%s\n",
                    options.Seed, threadsText.c_str(), options.Rounds, options.Scale, options.Waves,
                    ftl_stress::kSanitizedBuild ? " (sanitizer build)" : "");
    }

    ftl_stress::RoundMonitor monitor;
    Watchdog watchdog(monitor, options.RoundTimeout);
    Clock::time_point const start = Clock::now();
    auto const elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    unsigned rounds = 0;
    std::uint64_t tasksRun = 0;
    std::int64_t tasksLost = 0;
    std::size_t failures = 0;
    std::vector<double> latencies;
    double roundSecondsMax = 0;

    for (unsigned round = 0;; ++round) {
        if (options.Seconds > 0 ? elapsed() >= options.Seconds : round >= options.Rounds) {
            break;
        }
        ftl_stress::RoundOptions roundOptions;
        roundOptions.Seed = RoundSeed(options.Seed, round);
        roundOptions.Threads = options.Threads != 0
                                   ? options.Threads
                                   : kThreadCycle[round % (sizeof(kThreadCycle) / sizeof(unsigned))];
        roundOptions.Scale = options.Scale;
        roundOptions.Waves = options.Waves;
        std::string const reproduce = ReproduceCommand(roundOptions.Seed, roundOptions.Threads, options);
        std::printf("round %u: seed %" PRIu64 " threads %u  (reproduce: %s)\n", round, roundOptions.Seed,
                    roundOptions.Threads, reproduce.c_str());

        watchdog.RoundStarted(round, roundOptions.Seed, roundOptions.Threads, reproduce);
        ftl_stress::RoundReport const report = ftl_stress::RunRound(roundOptions, monitor);
        watchdog.RoundEnded();

        ++rounds;
        tasksRun += report.TasksRun;
        tasksLost += report.TasksLost();
        failures += report.Failures.size();
        latencies.insert(latencies.end(), report.WakeLatencyUs.begin(), report.WakeLatencyUs.end());
        roundSecondsMax = std::max(roundSecondsMax, report.Seconds);
        double const roundMax = report.WakeLatencyUs.empty() ? 0.0
                                                             : *std::max_element(report.WakeLatencyUs.begin(),
                                                                                 report.WakeLatencyUs.end());
        std::printf("  %s %.2f s: %" PRIu64 " tasks run of %" PRIu64 " (lost %" PRId64
                    "), wake latency max %.0f us median %.0f us\n  %s\n",
                    report.Passed() ? "ok" : "FAILED", report.Seconds, report.TasksRun, report.TasksExpected,
                    report.TasksLost(), roundMax, Median(report.WakeLatencyUs), report.Plan.c_str());
        if (!report.Passed()) {
            for (std::string const &failure : report.Failures) {
                std::printf("  FAILURE: %s\n", failure.c_str());
            }
            std::printf("  reproduce: %s\n", reproduce.c_str());
            if (failures == 0) {
                failures = 1; // tasks ran but no check named the fault
            }
            break;
        }
    }

    double const maxLatency = latencies.empty() ? 0.0 : *std::max_element(latencies.begin(), latencies.end());
    bool const passed = failures == 0 && tasksLost == 0 && rounds > 0;
    std::printf("ftl_stress summary: %s rounds %u, tasks run %" PRIu64 ", tasks lost %" PRId64
                ", failures %zu, max wake latency %.0f us, median wake latency %.0f us (p99 %.0f us, %zu "
                "samples), longest round %.2f s, %.1f s\n",
                passed ? "PASS" : "FAIL", rounds, tasksRun, tasksLost, failures, maxLatency,
                Median(latencies), Percentile(latencies, 0.99), latencies.size(), roundSecondsMax, elapsed());
    return passed ? 0 : 1;
}

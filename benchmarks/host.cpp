// The host a run reports on (host.h), from /proc and the C library.
#include "host.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

namespace bench {
namespace {

std::string ReadFirstLine(char const *path) {
    std::ifstream file(path);
    std::string line;
    std::getline(file, line);
    return line;
}

} // namespace

unsigned AllowedCpuCount() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return 1;
    }
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

unsigned long MemoryLimit() {
    long const pages = sysconf(_SC_PHYS_PAGES);
    long const pageSize = sysconf(_SC_PAGE_SIZE);
    unsigned long const quarter = pages > 0 && pageSize > 0 ? static_cast<unsigned long>(pages) *
                                                                  static_cast<unsigned long>(pageSize) / 4
                                                            : 0;
    return std::max(quarter, 2ul << 30);
}

std::string LoadAverage() {
    std::istringstream fields(ReadFirstLine("/proc/loadavg"));
    std::string one;
    std::string five;
    std::string fifteen;
    fields >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

std::string CpuModel() {
    std::ifstream file("/proc/cpuinfo");
    std::string line;
    while (std::getline(file, line)) {
        if (line.rfind("model name", 0) == 0) {
            std::size_t const colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown CPU";
}

std::string UtcNow() {
    std::time_t const now = std::time(nullptr);
    std::tm parts{};
    gmtime_r(&now, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &parts);
    return text;
}

} // namespace bench

// ftl_trace_check FILE NAME COUNT: checks a trace ftl wrote. The file must be
// valid JSON in the Chrome trace-event format, with a "worker N" thread name
// for each worker track, exactly COUNT task spans ("ph": "X") named NAME, and
// at least one of them on every worker's track. Prints what it found; exits
// non-zero on the first check that fails.
#include "json_reader.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: ftl_trace_check FILE NAME COUNT\n");
        return 2;
    }
    std::string const name = argv[2];
    long const wanted = std::strtol(argv[3], nullptr, 10);
    try {
        ftl_test::Json const trace = ftl_test::ReadJsonFile(argv[1]);
        std::set<int> workers;
        std::map<int, long> spans; // per track
        long count = 0;
        for (ftl_test::Json const &event : trace["traceEvents"].Items) {
            std::string const phase = event["ph"].Text;
            int const tid = static_cast<int>(event["tid"].Number);
            if (phase == "M" && event["name"].Text == "thread_name") {
                if (event["args"]["name"].Text != "worker " + std::to_string(tid)) {
                    std::fprintf(stderr, "track %d is named \"%s\"\n", tid,
                                 event["args"]["name"].Text.c_str());
                    return 1;
                }
                workers.insert(tid);
            }
            if (phase == "X" && event["name"].Text == name) {
                ++count;
                ++spans[tid];
            }
        }
        std::printf("%s: %ld spans named %s on %zu worker tracks:", argv[1], count, name.c_str(),
                    workers.size());
        for (int worker : workers) {
            std::printf(" worker %d: %ld", worker, spans[worker]);
        }
        std::printf("\n");
        if (count != wanted) {
            std::fprintf(stderr, "expected %ld spans named %s, found %ld\n", wanted, name.c_str(), count);
            return 1;
        }
        for (auto const &track : spans) {
            if (workers.count(track.first) == 0) {
                std::fprintf(stderr, "spans on track %d, which is not a worker's\n", track.first);
                return 1;
            }
        }
        for (int worker : workers) {
            if (spans[worker] == 0) {
                std::fprintf(stderr, "no span on worker %d's track\n", worker);
                return 1;
            }
        }
    } catch (std::exception const &e) {
        std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
        return 1;
    }
    return 0;
}

// Loads the plugin (which links libftl.so) with dlopen and runs it: from
// the main thread, and from a thread that was running before the plugin
// and libftl.so were loaded. This program itself does not link ftl.
#include <dlfcn.h>

#include <cstdio>
#include <thread>

int main() {
    using RunPluginTasks = int (*)(unsigned threads, unsigned count);
    int fromEarlyThread = -1;
    bool loaded = false;
    RunPluginTasks run = nullptr;
    std::thread early([&] {
        // Waits for the main thread to load the plugin, then runs it here.
        while (!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
            std::this_thread::yield();
        }
        if (run != nullptr) {
            fromEarlyThread = run(2, 5000);
        }
    });
    void *plugin = dlopen(FTL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::fprintf(stderr, "plugin_host: dlopen failed: %s\n", dlerror());
        __atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
        early.join();
        return 1;
    }
    run = reinterpret_cast<RunPluginTasks>(dlsym(plugin, "RunPluginTasks"));
    if (run == nullptr) {
        std::fprintf(stderr, "plugin_host: no RunPluginTasks: %s\n", dlerror());
        __atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
        early.join();
        return 1;
    }
    int const fromMain = run(3, 20000);
    __atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
    early.join();
    int const single = run(1, 1000);
    std::printf("plugin_host: main thread %d, early thread %d, one worker %d (0: right)\n", fromMain,
                fromEarlyThread, single);
    return fromMain == 0 && fromEarlyThread == 0 && single == 0 ? 0 : 1;
}

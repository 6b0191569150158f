// SymbolName's lookup and cache, the same on every OS.
#include "platform/symbols.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>

namespace ftl {
namespace detail {

std::vector<char> ReadWholeFile(std::string const &path) {
    std::vector<char> image;
    if (std::FILE *file = std::fopen(path.c_str(), "rb")) {
        char buffer[65536];
        std::size_t n;
        while ((n = std::fread(buffer, 1, sizeof buffer, file)) != 0) {
            image.insert(image.end(), buffer, buffer + n);
        }
        std::fclose(file);
    }
    return image;
}

std::string SymbolName(void const *code) {
    // Never destroyed: a scheduler destroyed at exit may still name functions.
    static std::mutex &lock = *new std::mutex;
    static auto &objects = *new std::map<std::string, std::vector<Symbol>>;
    std::uintptr_t base = 0;
    std::string path;
    if (!FindLoadedObject(code, base, path)) {
        return {};
    }
    std::lock_guard<std::mutex> const guard(lock);
    auto it = objects.find(path);
    if (it == objects.end()) {
        std::vector<Symbol> symbols = ReadFunctionSymbols(path);
        // Aliases share an address: the one sorted last (by name) wins,
        // whatever the table's order.
        std::sort(symbols.begin(), symbols.end(), [](Symbol const &a, Symbol const &b) {
            return a.Start != b.Start ? a.Start < b.Start : a.Name < b.Name;
        });
        it = objects.emplace(path, std::move(symbols)).first;
    }
    std::vector<Symbol> const &symbols = it->second;
    std::uintptr_t const offset = reinterpret_cast<std::uintptr_t>(code) - base;
    auto after = std::upper_bound(symbols.begin(), symbols.end(), offset,
                                  [](std::uintptr_t value, Symbol const &s) { return value < s.Start; });
    if (after == symbols.begin()) {
        return {};
    }
    Symbol const &symbol = *std::prev(after);
    // A table without sizes (COFF) ends each function where the next begins.
    std::uintptr_t const end = symbol.Size != 0         ? symbol.Start + symbol.Size
                               : after != symbols.end() ? after->Start
                                                        : symbol.Start + 1;
    return offset < end ? symbol.Name : std::string();
}

} // namespace detail
} // namespace ftl

// Function names from the program's own symbol tables, for traces and
// TaskInfo: the ELF symbol tables of the loaded objects on Linux
// (linux/symbols.cpp), the COFF symbol table MinGW-w64 leaves in a PE image
// on Windows (windows/symbols.cpp). Nothing needs debug information.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ftl {
namespace detail {

// The name of the function whose code holds `code`, as the symbol table
// has it (mangled), or "" when no table names it.
std::string SymbolName(void const *code);

// What SymbolName is built on, one implementation per OS.
struct Symbol {
    std::uintptr_t Start; // relative to the object's load base
    std::uintptr_t Size;  // 0: up to the next symbol
    std::string Name;
};
// The loaded object holding `code`: its load base and file. False if none.
bool FindLoadedObject(void const *code, std::uintptr_t &base, std::string &path);
// An object file's function symbols, in any order.
std::vector<Symbol> ReadFunctionSymbols(std::string const &path);
// The whole of a file, or nothing when it cannot be read.
std::vector<char> ReadWholeFile(std::string const &path);

} // namespace detail
} // namespace ftl

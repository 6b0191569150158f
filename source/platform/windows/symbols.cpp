// Symbol tables on Windows: the COFF symbol table that GCC and Clang
// (MinGW-w64) leave in a PE image unless it is stripped. MSVC builds keep
// their names in a PDB instead, which this does not read: their functions
// are named by address.
#include "platform/symbols.h"

#include "platform/windows/win32.h"

#include <cstring>

namespace ftl {
namespace detail {

bool FindLoadedObject(void const *code, std::uintptr_t &base, std::string &path) {
    HMODULE module = nullptr;
    if (GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                               GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                           static_cast<char const *>(code), &module) == 0) {
        return false;
    }
    char name[MAX_PATH];
    DWORD const length = GetModuleFileNameA(module, name, sizeof name);
    if (length == 0 || length >= sizeof name) {
        return false;
    }
    base = reinterpret_cast<std::uintptr_t>(module);
    path.assign(name, length);
    return true;
}

std::vector<Symbol> ReadFunctionSymbols(std::string const &path) {
    std::vector<char> const image = ReadWholeFile(path);
    std::vector<Symbol> symbols;
    // Every range is checked as "offset <= size && length <= size - offset":
    // a sum could wrap.
    auto const fits = [&image](std::uint64_t offset, std::uint64_t length) {
        return offset <= image.size() && length <= image.size() - offset;
    };
    IMAGE_DOS_HEADER dos;
    if (!fits(0, sizeof dos)) {
        return symbols;
    }
    std::memcpy(&dos, image.data(), sizeof dos);
    std::uint64_t const peOffset = static_cast<std::uint32_t>(dos.e_lfanew);
    IMAGE_FILE_HEADER file;
    if (dos.e_magic != IMAGE_DOS_SIGNATURE || !fits(peOffset, 4 + sizeof file) ||
        std::memcmp(image.data() + peOffset, "PE\0\0", 4) != 0) {
        return symbols;
    }
    std::memcpy(&file, image.data() + peOffset + 4, sizeof file);
    std::uint64_t const sectionsOffset = peOffset + 4 + sizeof file + file.SizeOfOptionalHeader;
    std::uint64_t const symbolsOffset = file.PointerToSymbolTable;
    std::uint64_t const symbolsSize = std::uint64_t{file.NumberOfSymbols} * IMAGE_SIZEOF_SYMBOL;
    if (!fits(sectionsOffset, std::uint64_t{file.NumberOfSections} * sizeof(IMAGE_SECTION_HEADER)) ||
        symbolsOffset == 0 || !fits(symbolsOffset, symbolsSize + 4)) {
        return symbols; // stripped, or not an image we can read
    }
    std::vector<IMAGE_SECTION_HEADER> sections(file.NumberOfSections);
    std::memcpy(sections.data(), image.data() + sectionsOffset,
                sections.size() * sizeof(IMAGE_SECTION_HEADER));
    // The string table follows the symbols; its first four bytes are its size.
    std::uint64_t const stringsOffset = symbolsOffset + symbolsSize;
    std::uint32_t stringsSize = 0;
    std::memcpy(&stringsSize, image.data() + stringsOffset, 4);
    if (!fits(stringsOffset, stringsSize)) {
        stringsSize = 0;
    }
    for (std::uint64_t i = 0; i < file.NumberOfSymbols; ++i) {
        IMAGE_SYMBOL symbol;
        std::memcpy(&symbol, image.data() + symbolsOffset + i * IMAGE_SIZEOF_SYMBOL, IMAGE_SIZEOF_SYMBOL);
        std::uint64_t const aux = symbol.NumberOfAuxSymbols;
        bool const isFunction = ISFCN(symbol.Type) && symbol.SectionNumber > 0 &&
                                static_cast<std::size_t>(symbol.SectionNumber) <= sections.size() &&
                                (symbol.StorageClass == IMAGE_SYM_CLASS_EXTERNAL ||
                                 symbol.StorageClass == IMAGE_SYM_CLASS_STATIC);
        if (isFunction) {
            std::string name;
            if (symbol.N.Name.Short != 0) {
                name.assign(reinterpret_cast<char const *>(symbol.N.ShortName),
                            strnlen(reinterpret_cast<char const *>(symbol.N.ShortName), 8));
            } else if (symbol.N.Name.Long < stringsSize) {
                char const *text = image.data() + stringsOffset + symbol.N.Name.Long;
                name.assign(text, strnlen(text, stringsSize - symbol.N.Name.Long));
            }
            if (!name.empty()) {
                IMAGE_SECTION_HEADER const &section =
                    sections[static_cast<std::size_t>(symbol.SectionNumber) - 1];
                symbols.push_back(Symbol{std::uintptr_t{section.VirtualAddress} + symbol.Value, 0, name});
            }
        }
        i += aux;
    }
    return symbols;
}

} // namespace detail
} // namespace ftl

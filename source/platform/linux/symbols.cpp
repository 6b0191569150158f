// Symbol tables on Linux: the ELF .symtab (or .dynsym) of each loaded
// object, found through dl_iterate_phdr.
#include "platform/symbols.h"

#include <cstring>
#include <elf.h>
#include <link.h>

namespace ftl {
namespace detail {

namespace {

struct Query {
    std::uintptr_t Address = 0;
    std::uintptr_t Base = 0;
    std::string Path;
    bool Hit = false;
};

int FindObject(dl_phdr_info *info, std::size_t, void *data) {
    auto *query = static_cast<Query *>(data);
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        ElfW(Phdr) const &segment = info->dlpi_phdr[i];
        std::uintptr_t const start = info->dlpi_addr + segment.p_vaddr;
        if (segment.p_type == PT_LOAD && query->Address >= start &&
            query->Address < start + segment.p_memsz) {
            query->Base = info->dlpi_addr;
            query->Path =
                info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
            query->Hit = true;
            return 1;
        }
    }
    return 0;
}

} // namespace

bool FindLoadedObject(void const *code, std::uintptr_t &base, std::string &path) {
    Query query;
    query.Address = reinterpret_cast<std::uintptr_t>(code);
    dl_iterate_phdr(&FindObject, &query);
    base = query.Base;
    path = query.Path;
    return query.Hit;
}

std::vector<Symbol> ReadFunctionSymbols(std::string const &path) {
    std::vector<char> const image = ReadWholeFile(path);
    std::vector<Symbol> symbols;
    if (image.size() < sizeof(Elf64_Ehdr)) {
        return symbols;
    }
    Elf64_Ehdr header;
    std::memcpy(&header, image.data(), sizeof(header));
    // Every range is checked as "offset <= size && length <= size - offset":
    // a sum could wrap.
    auto const fits = [&image](std::uint64_t offset, std::uint64_t length) {
        return offset <= image.size() && length <= image.size() - offset;
    };
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_shoff == 0 || !fits(header.e_shoff, std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr))) {
        return symbols;
    }
    std::vector<Elf64_Shdr> sections(header.e_shnum);
    std::memcpy(sections.data(), image.data() + header.e_shoff, sections.size() * sizeof(Elf64_Shdr));
    for (std::uint32_t wanted : {std::uint32_t{SHT_SYMTAB}, std::uint32_t{SHT_DYNSYM}}) {
        for (Elf64_Shdr const &section : sections) {
            if (section.sh_type != wanted || section.sh_link >= sections.size() ||
                !fits(section.sh_offset, section.sh_size)) {
                continue;
            }
            Elf64_Shdr const &strings = sections[section.sh_link];
            if (!fits(strings.sh_offset, strings.sh_size)) {
                continue;
            }
            std::size_t const n = section.sh_size / sizeof(Elf64_Sym);
            for (std::size_t i = 0; i < n; ++i) {
                Elf64_Sym symbol;
                std::memcpy(&symbol, image.data() + section.sh_offset + i * sizeof(Elf64_Sym),
                            sizeof(symbol));
                if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_value == 0 ||
                    symbol.st_name >= strings.sh_size) {
                    continue;
                }
                char const *name = image.data() + strings.sh_offset + symbol.st_name;
                // Size 0 would stretch to the next symbol; an exact match
                // is all such a symbol (hand-written code) can claim.
                symbols.push_back(Symbol{symbol.st_value, symbol.st_size != 0 ? symbol.st_size : 1,
                                         std::string(name, strnlen(name, strings.sh_size - symbol.st_name))});
            }
        }
        if (!symbols.empty()) {
            break; // .symtab has everything .dynsym has
        }
    }
    return symbols;
}

} // namespace detail
} // namespace ftl

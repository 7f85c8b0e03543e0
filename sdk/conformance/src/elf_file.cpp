#include "elf_file.h"

#include <elf.h>
#include <link.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace spora::conformance {
namespace {

std::string machine_name(unsigned m) {
  switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "i386";
    case EM_ARM: return "ARM";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "PowerPC64";
    default: return "machine " + std::to_string(m);
  }
}

#if defined(__x86_64__)
constexpr unsigned kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kHostMachine = EM_AARCH64;
#else
constexpr unsigned kHostMachine = 0;  // unknown: not checked
#endif

bool in_file(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

// Exported symbols from the section table's SHT_DYNSYM (ElfW = this
// machine's class, already checked).
void read_symbols(const std::string& bytes, const ElfW(Ehdr) & eh, ElfFacts* facts) {
  const uint64_t size = bytes.size();
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(ElfW(Shdr)) ||
      !in_file(eh.e_shoff, static_cast<uint64_t>(eh.e_shnum) * sizeof(ElfW(Shdr)), size))
    return;
  auto section = [&](unsigned i) {
    ElfW(Shdr) sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + static_cast<uint64_t>(i) * sizeof sh, sizeof sh);
    return sh;
  };
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const ElfW(Shdr) sym = section(i);
    if (sym.sh_type != SHT_DYNSYM || sym.sh_entsize != sizeof(ElfW(Sym)) || sym.sh_link >= eh.e_shnum) continue;
    const ElfW(Shdr) str = section(sym.sh_link);
    if (!in_file(sym.sh_offset, sym.sh_size, size) || !in_file(str.sh_offset, str.sh_size, size)) return;
    const uint64_t count = sym.sh_size / sizeof(ElfW(Sym));
    for (uint64_t k = 1; k < count; ++k) {
      ElfW(Sym) s;
      std::memcpy(&s, bytes.data() + sym.sh_offset + k * sizeof s, sizeof s);
      const unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
      if (s.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)) continue;
      if (ELF64_ST_VISIBILITY(s.st_other) != STV_DEFAULT && ELF64_ST_VISIBILITY(s.st_other) != STV_PROTECTED) continue;
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC && type != STT_TLS && type != STT_COMMON &&
          type != STT_NOTYPE)
        continue;
      if (s.st_name >= str.sh_size) continue;
      const char* name = bytes.data() + str.sh_offset + s.st_name;
      const std::string n(name, ::strnlen(name, str.sh_size - s.st_name));
      if (!n.empty()) facts->exported.push_back(n);
    }
    facts->symbols_read = true;
    return;
  }
}

}  // namespace

std::string inspect_elf(const std::string& path, ElfFacts* facts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot be opened for reading: " + std::string(std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    return "is not an ELF file (no ELF magic); a plugin is a shared object built with spora_add_plugin";
  const unsigned cls = static_cast<unsigned char>(bytes[EI_CLASS]);
  if (cls != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32))
    return std::string("is a ") + (cls == ELFCLASS32 ? "32" : cls == ELFCLASS64 ? "64" : "?") +
           "-bit ELF file; this host needs " + (sizeof(void*) == 8 ? "64" : "32") + "-bit plugins";
  if (bytes.size() < sizeof(ElfW(Ehdr))) return "is truncated: shorter than an ELF header";
  ElfW(Ehdr) eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  facts->machine = machine_name(eh.e_machine);
  if (kHostMachine && eh.e_machine != kHostMachine)
    return "is built for " + facts->machine + ", but this host is " + machine_name(kHostMachine);
  if (eh.e_type != ET_DYN)
    return std::string("is an ELF ") +
           (eh.e_type == ET_EXEC ? "executable" : eh.e_type == ET_REL ? "object file (.o)" : "file of another type") +
           ", not a shared object; build the plugin as a MODULE library (spora_add_plugin)";
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) ||
      !in_file(eh.e_phoff, static_cast<uint64_t>(eh.e_phnum) * sizeof(ElfW(Phdr)), bytes.size()))
    return "is truncated or corrupt: its program headers lie outside the file";
  // A segment past the end of the file would crash dlopen (SIGBUS).
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    ElfW(Phdr) ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + static_cast<uint64_t>(i) * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && !in_file(ph.p_offset, ph.p_filesz, bytes.size()))
      return "is truncated: segment " + std::to_string(i) + " ends at byte " +
             std::to_string(static_cast<uint64_t>(ph.p_offset) + ph.p_filesz) + " of a " +
             std::to_string(bytes.size()) + "-byte file; rebuild or reinstall it";
  }
  read_symbols(bytes, eh, facts);
  return "";
}

}  // namespace spora::conformance

// Reading a plugin file before anything loads it: is it an ELF shared
// object for this machine, whole, and which symbols does it export. Every
// offset is checked against the file's size (the file may be anything).
#pragma once

#include <string>
#include <vector>

namespace spora::conformance {

struct ElfFacts {
  std::string machine;               // "x86-64", "AArch64", "machine 243"
  std::vector<std::string> exported; // defined, default-visibility dynamic symbols
  bool symbols_read = false;         // false when the section table is absent or unreadable
};

// "" when `path` is a complete ELF shared object for this machine (facts
// filled), else what is wrong with it, in words a user can act on.
std::string inspect_elf(const std::string& path, ElfFacts* facts);

}  // namespace spora::conformance

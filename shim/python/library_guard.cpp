// Refuses to dlopen, through ctypes, a library linked against upstream's libtorch or libc10
// (torch.ops.load_library, e.g. torchvision's compiled operators). Loading one would map a
// second, different torch runtime into this process; on a device without libtorch the load
// fails anyway, so refusing here makes every machine behave the same. Callers that treat the
// library as optional (torchvision does) carry on without it; the refusal is an OSError that
// names the library and what it needs.
#include <elf.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "python_shim.h"

namespace tn::py {
namespace {

// The DT_NEEDED entries of a 64-bit little-endian ELF file; empty for anything else.
std::vector<std::string> needed_libraries(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {};
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  auto fits = [&](uint64_t offset, uint64_t size) {
    return offset <= bytes.size() && size <= bytes.size() - offset;
  };
  if (!fits(0, sizeof(Elf64_Ehdr))) return {};
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shentsize != sizeof(Elf64_Shdr) ||
      !fits(header.e_shoff, uint64_t{header.e_shnum} * sizeof(Elf64_Shdr)))
    return {};
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), bytes.data() + header.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  std::vector<std::string> needed;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != SHT_DYNAMIC || section.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[section.sh_link];
    if (!fits(section.sh_offset, section.sh_size) || !fits(strings.sh_offset, strings.sh_size)) return {};
    for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= section.sh_size; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, bytes.data() + section.sh_offset + at, sizeof entry);
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag != DT_NEEDED || entry.d_un.d_val >= strings.sh_size) continue;
      const char* name = bytes.data() + strings.sh_offset + entry.d_un.d_val;
      needed.emplace_back(name, strnlen(name, strings.sh_size - entry.d_un.d_val));
    }
  }
  return needed;
}

int refuse_libtorch_dependents(const char* event, PyObject* args, void*) {
  if (std::strcmp(event, "ctypes.dlopen") != 0 || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1)
    return 0;
  PyObject* name = PyTuple_GET_ITEM(args, 0);
  if (!PyUnicode_Check(name)) return 0;
  const char* path = PyUnicode_AsUTF8(name);
  if (!path) return -1;
  for (const std::string& library : needed_libraries(path)) {
    if (library.rfind("libtorch", 0) == 0 || library.rfind("libc10", 0) == 0) {
      PyErr_Format(PyExc_OSError,
                   "torchnative refuses to load %s: it is linked against upstream's %s, a second torch "
                   "runtime; its operators would need native implementations in torchnative",
                   path, library.c_str());
      return -1;
    }
  }
  return 0;
}

}  // namespace

void install_library_guard() {
  if (PySys_AddAuditHook(refuse_libtorch_dependents, nullptr) != 0) throw PythonErrorSet();
}

}  // namespace tn::py

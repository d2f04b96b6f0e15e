#include "server/read_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tn::server {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + (what.empty() ? "" : "the " + what + " file ") + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tn::server

// The whole of a file as bytes, as the coordinator and the admin CLI read keys, certificates and
// models: one reader, so that both name an unreadable file the same way.
#pragma once

#include <string>

namespace tn::server {

// Throws std::runtime_error "cannot read PATH", or "cannot read the WHAT file PATH" when `what`
// names the file's role.
std::string read_file(const std::string& path, const std::string& what = "");

}  // namespace tn::server

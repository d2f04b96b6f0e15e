// The whole of a file as bytes, as every program reads keys, certificates, models and its
// configuration: one reader, so that all of them name an unreadable file the same way.
#pragma once

#include <string>

namespace tn::cli {

// Throws std::runtime_error "cannot read PATH: REASON", or "cannot read the WHAT file PATH: REASON"
// when `what` names the file's role; REASON is the operating system's ("No such file or directory").
std::string read_file(const std::string& path, const std::string& what = "");

}  // namespace tn::cli

#include "cli/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace tn::cli {

namespace {

// Closes the descriptor on every way out.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

// POSIX calls rather than a stream, so that errno is the reason (a stream opens a directory and
// reads nothing from it, and says nothing of why it failed).
std::string read_file(const std::string& path, const std::string& what) {
  auto failure = [&] {
    return std::runtime_error("cannot read " + (what.empty() ? "" : "the " + what + " file ") + path + ": " +
                              std::generic_category().message(errno));
  };
  const Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw failure();
  struct stat status {};
  if (::fstat(file.fd, &status) != 0) throw failure();
  std::string bytes;
  bytes.reserve(size_t(status.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(file.fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw failure();
    if (got == 0) return bytes;
    bytes.append(buffer, size_t(got));
  }
}

}  // namespace tn::cli

#!/bin/sh
# The Debian packages that hold the shared libraries the given executables load, one per line:
# what the runtime image installs (deploy/Dockerfile), found with ldd and dpkg -S on the build
# stage, so the list follows the build instead of being kept by hand.
#
#   deploy/runtime-packages.sh EXECUTABLE...
#
# Fails (status 1, naming it) when a library belongs to no package: the image would lack it.
set -eu
libraries=$(ldd "$@" | awk '/=> \// {print $3}' | sort -u)
for library in $libraries; do
  # dpkg knows a file by the path its package installed it at; on a merged /usr that may be
  # /lib/... or /usr/lib/... whatever ldd printed.
  real=$(readlink -f "$library")
  found=""
  for candidate in "$library" "$real" "/usr$library" "${library#/usr}" "/usr$real" "${real#/usr}"; do
    if owner=$(dpkg -S "$candidate" 2>/dev/null); then found=${owner%%:*}; break; fi
  done
  if [ -z "$found" ]; then echo "runtime-packages.sh: no Debian package holds $library" >&2; exit 1; fi
  echo "$found"
done | sort -u

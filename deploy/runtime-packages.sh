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

# dpkg knows a file by the path its package installed it at; on a merged /usr that may be
# /lib/... or /usr/lib/... whatever ldd printed: the paths to ask about for $1, in order.
candidates() {
  real=$(readlink -f "$1")
  printf '%s\n' "$1" "$real" "/usr$1" "${1#/usr}" "/usr$real" "${real#/usr}"
}

# One dpkg -S for every path at once ("PACKAGE[:ARCH][, ...]: PATH" lines, none for a path no
# package holds): each call reads dpkg's whole database, which took over a minute, one call per
# path, on a loaded machine.
# shellcheck disable=SC2046 # the paths hold no spaces (ldd's output is split on them too)
owners=$(dpkg -S $(for library in $libraries; do candidates "$library"; done | sort -u) 2>/dev/null || true)

# Gathered before sorting, so that a library no package holds fails the script (in a pipeline
# into sort, its exit status was sort's: 0).
packages=$(for library in $libraries; do
  found=""
  for candidate in $(candidates "$library"); do
    owner=$(printf '%s\n' "$owners" |
      awk -v path="$candidate" '{ at = index($0, ": /"); if (at && substr($0, at + 2) == path) { print substr($0, 1, at - 1); exit } }')
    if [ -n "$owner" ]; then found=${owner%%:*}; break; fi
  done
  if [ -z "$found" ]; then echo "runtime-packages.sh: no Debian package holds $library" >&2; exit 1; fi
  echo "$found"
done)
printf '%s\n' "$packages" | sort -u

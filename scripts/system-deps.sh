#!/usr/bin/env bash
# procgen's compiled library (libenv.so) needs libGL and GLib from the system.
# Install them with apt-get when we can (root on Debian/Ubuntu); otherwise say what is missing.
set -euo pipefail

# ldconfig lives in /sbin (/usr/sbin), which a normal user's PATH often leaves out
ldconfig_bin="$(PATH="$PATH:/usr/sbin:/sbin" command -v ldconfig || true)"

has_library() { # has_library SONAME: the dynamic linker finds it
    if [ -n "$ldconfig_bin" ] && "$ldconfig_bin" -p 2>/dev/null | grep -qF "$1 "; then
        return 0
    fi
    # no ldconfig cache to ask: look where Debian, Ubuntu and Fedora put shared libraries
    compgen -G "/usr/lib/*-linux-gnu/$1" >/dev/null || compgen -G "/usr/lib64/$1" >/dev/null ||
        compgen -G "/lib/*-linux-gnu/$1" >/dev/null || [ -e "/usr/lib/$1" ]
}

missing=()
has_library libGL.so.1 || missing+=(libgl1)
has_library libglib-2.0.so.0 || missing+=(libglib2.0-0)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "installing system libraries for procgen: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    exit 0
fi
echo "error: procgen needs the system libraries ${missing[*]} (Debian/Ubuntu package names)." >&2
echo "       Install them, e.g.: sudo apt-get install -y ${missing[*]}" >&2
echo "       (on a cluster: ask for them, or load a module that provides libGL and GLib)" >&2
exit 1

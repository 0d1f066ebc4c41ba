#!/usr/bin/env bash
# procgen's compiled library (libenv.so) needs libGL and GLib from the system.
# Install them with apt-get when we can (root on Debian/Ubuntu); otherwise say what is missing.
# Usage: system-deps.sh [EXTRAS], EXTRAS being pip's comma-separated extras (the Makefile passes
# them): with `video`, also Mesa's EGL, MuJoCo's off-screen renderer for --video (optional: a
# normal user without it gets a note, and evo.tools.video names it again when a video is asked for).
set -euo pipefail
extras=",${1:-},"

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
optional=()
if [[ $extras == *,video,* ]]; then
    # libegl1 brings Mesa's EGL (libEGL_mesa); llvmpipe, its software renderer, is in libgl1-mesa-dri
    { has_library libEGL.so.1 && has_library libEGL_mesa.so.0; } || optional+=(libegl1)
    compgen -G "/usr/lib/*-linux-gnu/dri/swrast_dri.so" >/dev/null || compgen -G "/usr/lib64/dri/swrast_dri.so" \
        >/dev/null || optional+=(libgl1-mesa-dri)
fi
[ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "installing system libraries for procgen and --video: ${missing[*]} ${optional[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" "${optional[@]}"
    exit 0
fi
if [ ${#optional[@]} -gt 0 ]; then
    echo "note: --video of MuJoCo tasks renders with Mesa's EGL: sudo apt-get install -y ${optional[*]}" >&2
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "error: procgen needs the system libraries ${missing[*]} (Debian/Ubuntu package names)." >&2
echo "       Install them, e.g.: sudo apt-get install -y ${missing[*]}" >&2
echo "       (on a cluster: ask for them, or load a module that provides libGL and GLib)" >&2
exit 1

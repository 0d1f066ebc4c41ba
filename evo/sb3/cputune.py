"""Per-process CPU tuning for PPO on convolutional policies (on by default; --no-cpu-tuning).

glibc serves each allocation above M_MMAP_THRESHOLD with its own mmap and unmaps it on
free, so every large activation tensor of a minibatch is faulted in anew: on this project's
2-core machine about half of IMPALA-PPO's time went to the kernel. Keeping freed memory in
the heap (M_MMAP_MAX = 0, a large M_TRIM_THRESHOLD) removes that. Channels-last inputs to
the convolutions (see evo.sb3.policies) are the other half of the speed-up. Neither changes
PPO's maths. tcmalloc/jemalloc via LD_PRELOAD would do the same, but crash procgen-mirror.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
TRIM_THRESHOLD_BYTES = 1 << 30

_applied: bool | None = None


def tune_allocator() -> bool:
    """Keep freed memory in glibc's heap instead of returning it to the kernel.
    Returns whether it took effect (False off glibc, e.g. on macOS or musl)."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    if not _applied:
        logger.warning("mallopt refused the allocator settings; running without them")
    return _applied

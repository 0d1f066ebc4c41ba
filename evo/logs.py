"""Logging set-up for the entry points: a ``[rank@host]`` prefix, INFO on rank 0 and
WARNING elsewhere."""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import TextIO


def install_logging(rank: int, level: str = "INFO") -> None:
    host = socket.gethostname().split(".")[0]
    handler = logging.StreamHandler(sys.stderr if rank else sys.stdout)
    handler.setFormatter(
        logging.Formatter(f"[{rank}@{host}] %(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level) if rank == 0 else logging.WARNING)


def output_is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` reaches a person's terminal (a live progress bar may be drawn).

    Open MPI gives every rank a pseudo-terminal even when mpiexec's own output goes to a file
    or a pipe, so a rank's ``isatty()`` is not enough: the launcher that started it (its parent
    process, on rank 0's host) must write to a terminal too."""
    if not getattr(stream, "isatty", lambda: False)():
        return False
    try:
        parent_output = os.readlink(f"/proc/{os.getppid()}/fd/1")
    except OSError:  # no /proc, or the parent's descriptors are not readable: trust isatty
        return True
    return parent_output.startswith(("/dev/pts/", "/dev/tty"))

"""Logging set-up for the entry points: a ``[rank@host]`` prefix, INFO on rank 0 and
WARNING elsewhere."""

from __future__ import annotations

import logging
import socket
import sys


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

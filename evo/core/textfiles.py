"""Settings files read safely (pure: the standard library and PyYAML): a file is checked before it is read
(a regular file, of a settings file's size, in UTF-8) and a YAML error is said by its problem and place, never
by the file's text. Used for ``--conf-file``, ``--hyperparams FILE``, ``--schedule`` and study files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml


def yaml_problem(error: yaml.YAMLError) -> str:
    """What is wrong with a YAML file, and where (line and column), without the file's own text: PyYAML's
    message quotes the lines around the fault, and a file given by mistake may hold what no message should
    echo (a password file, say)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        context = f"{error.context}: " if error.context else ""
        return f"{context}{error.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return type(error).__name__


SETTINGS_FILE_MOST = 1_000_000
"""The most bytes a settings file (``--conf-file``, a study file) may hold: the built-in ``ppo.yml`` is
about 20 kB; a file far larger was given by mistake (a data file, a log), and is refused before it is read."""

FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
}


def read_settings_file(path: Path | str, what: str = "a YAML settings file", most: int = SETTINGS_FILE_MOST) -> str:
    """The text of a settings file, checked before it is read: a regular file (``/dev/zero`` would be read
    until memory runs out, a named pipe would wait for a writer) of at most ``most`` bytes, in UTF-8. Raises
    ValueError saying what is wrong and what to give, without the file's text (a decoding error says the
    byte offset) and without the path (the caller names it, with its flag); ``what``: the file to give instead."""
    give = f"give {what}"
    try:
        kind = stat.S_IFMT(os.stat(path).st_mode)  # before opening: a device is never opened
        if kind != stat.S_IFREG:
            raise ValueError(f"not a regular file ({FILE_KINDS.get(kind, 'a special file')}); {give}")
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe put there since: no wait
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValueError(f"not a regular file; {give}")
            data = handle.read(most + 1)  # /proc's files say they are empty: the read itself is bounded
    except OSError as error:
        raise ValueError(f"cannot read the file ({error.strerror or error})") from None
    if len(data) > most:
        raise ValueError(f"larger than a settings file can be (over {most:,} bytes); {give}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"not UTF-8 text (the byte at offset {error.start} cannot be decoded); save it as UTF-8, or {give}"
        ) from None

"""``--init-from SOURCE``: which agent a new run's members start from, resolved at start-up. Pure apart
from reading files (no torch, no SB3).

SOURCE is either a Stable-Baselines3 model zip (an evo export, a zoo agent, an agent downloaded from the
Hub) or an evo run directory with an optional ``:MEMBER``: ``best`` (the run's final pick, else its highest
selection score at its last checkpoint), ``best-ever`` (the weights the run kept as its best) or a member id.
Without ``:MEMBER`` a run's kept best is taken, or its best where it kept none. The file taken is named by a
:class:`SourceRef`, with its SHA-256, which config.yaml and the lineage record. Whether the agent fits the run
(its learner, spaces and network) is checked at start-up, where the run's member is chosen too
(evo/tools/source.py); here only that SOURCE is a model zip or a run directory.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ZIP, RUN = "zip", "run"
"""The two kinds of source."""


@dataclass(frozen=True)
class SourceRef:
    """The agent ``--init-from`` names, as resolved: the file its weights are read from and its digest."""

    text: str
    """SOURCE as given."""
    kind: str
    """:data:`ZIP` or :data:`RUN`."""
    path: str
    """The file: the zip, or the run's member file (a checkpoint's member_<i>.pt, or its best.pt)."""
    sha256: str
    run_dir: str | None = None
    """A run source's directory (None for a zip)."""
    member: int | None = None
    """A run source's member id."""
    generation: int | None = None
    """The generation of a run source's checkpoint (an asynchronous run: the member's interval)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """The source in a log line: the zip, or the run, member and generation, with the digest's start."""
        if self.kind == ZIP:
            return f"{self.path} (sha256 {self.sha256[:12]})"
        return f"member {self.member} of {self.run_dir} at generation {self.generation} (sha256 {self.sha256[:12]})"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_problems(text: str) -> list[str]:
    """What is wrong with ``--init-from text`` as a path (the agent's fit is checked at start-up): it must be an
    SB3 model zip, or a run directory with an optional ``:MEMBER``."""
    path = Path(text)
    if path.is_file():
        return _zip_problems(text, path)
    run_dir, _ = split_run(text)
    if not run_dir.exists():
        return [
            f"--init-from {text}: no such file or directory; give an SB3 model zip, or a run directory with an "
            "optional :MEMBER (best, best-ever or an id)"
        ]
    if not run_dir.is_dir():
        return [f"--init-from {text}: {run_dir} is a file, not a run directory; give the run's directory"]
    if not (run_dir / "config.yaml").is_file():
        return [f"--init-from {text}: {run_dir} is not an evo run directory (no config.yaml); give a run's --run-dir"]
    return []


def split_run(text: str) -> tuple[Path, str]:
    """A run source's directory and member (``""``: none given)."""
    where, colon, member = text.rpartition(":")
    if Path(text).is_dir() or not colon:
        return Path(text), ""
    return Path(where), member


def zip_source(text: str) -> SourceRef:
    """``--init-from``'s zip, with its digest."""
    return SourceRef(text=text, kind=ZIP, path=text, sha256=sha256_of(Path(text)))


def _zip_problems(text: str, path: Path) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as error:
        return [f"--init-from {text}: not a model zip ({error}); give a zip that SB3's save wrote"]
    if "data" not in names or "policy.pth" not in names:
        return [
            f"--init-from {text}: a zip, but not an SB3 model (it holds no data and policy.pth); give a zip that "
            "SB3's model.save wrote (an evo export, a zoo agent)"
        ]
    return []

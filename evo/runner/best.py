"""The run's kept best, in every mode: :class:`KeptBest`.

rl-baselines3-zoo keeps ``best_model.zip``, the agent of the best evaluation so far; evo keeps the
member whose selection score was the highest of the run (:func:`evo.core.result.new_best`), captured
whole (its member file, the replay buffer left out) when it was scored, before that generation's
exploit (or that ready point's copy) could overwrite it.

- **Synchronous runs**: at each generation rank 0 names the member that beats the kept best
  (:meth:`KeptBest.beats`) and every rank learns it (:meth:`KeptBest.keep`); the rank holding it
  captures the member's bytes, which the next checkpoint stores as ``best.pt``
  (evo.rundir.checkpoint.write_checkpoint calls :meth:`save`, :meth:`saved` and :meth:`done`); a
  later checkpoint with the same best carries the file forward.
- **Asynchronous runs**: rank 0's coordinator names a ready point that beats the kept best
  (:meth:`KeptBest.names`); the worker writes the member as scored under a name of its own
  (:meth:`KeptBest.keep_ready`: two ranks may each hold a new best at once) and rank 0 points
  ``best.json`` at it once the ready point is settled (:meth:`KeptBest.settle`), unless a better one
  settled first (evo.rundir.ready).

A resumed run starts from its checkpoint's best and keeps it unless a member beats it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evo.core.result import MemberResult, new_best
from evo.learners.interface import Learner
from evo.rundir.checkpoint import (
    BEST,
    BEST_KEYS,
    Checkpoint,
    carry_best,
    dump_payload,
    member_payload,
    write_best,
)
from evo.rundir.ready import best_dir, write_best_file, write_best_record
from evo.sb3.rng import rng_state

logger = logging.getLogger("evo")


class KeptBest:
    """The best evaluated member of the run so far (see the module docstring). ``record`` is
    {member, generation, score, env_steps} (an asynchronous run's generation: the member's interval)."""

    def __init__(self, run_id: str, entry: Mapping[str, Any] | None = None, written: Path | None = None):
        """``entry``: the kept best's entry in the checkpoint a run resumes from (a manifest's ``best``,
        or an asynchronous run's ``best.json``), None for a new run; ``written``: its file."""
        self.run_id = run_id
        self.record: dict | None = {key: entry[key] for key in BEST_KEYS} if entry is not None else None
        self.data: bytes | None = None
        """This rank's capture not yet in a checkpoint (synchronous runs)."""
        self.changed = False
        """A new best since the last checkpoint written (on every rank; synchronous runs)."""
        self.written: Path | None = written
        self.entry: dict | None = {key: entry[key] for key in ("file", "bytes", "sha256")} if entry else None
        """The file the last checkpoint holds and its entry (synchronous runs)."""
        self.settled: dict | None = dict(entry) if entry is not None else None
        """The entry ``best.json`` holds (asynchronous runs; rank 0)."""

    @classmethod
    def of_checkpoint(cls, run_id: str, checkpoint: Checkpoint | None) -> KeptBest:
        """A synchronous run's kept best, continuing from ``checkpoint``'s (None: a new run)."""
        if checkpoint is None or checkpoint.best is None:
            return cls(run_id)
        return cls(run_id, checkpoint.best, checkpoint.best_path())

    @property
    def score(self) -> float | None:
        return float(self.record["score"]) if self.record is not None else None

    def beats(
        self, generation: int, population: list[MemberResult], tiebreak: Mapping[int, int] | None = None
    ) -> MemberResult | None:
        """Rank 0: the member of ``population`` whose score beats the kept best, or None; a tie for it
        broken by ``tiebreak`` (the generation's draw, as selection's) and said in the log."""
        best = new_best(population, self.score, tiebreak)
        if best is not None:
            tied = sorted(r.member for r in population if r.scored and r.score == best.score and r is not best)
            if tied:
                logger.info(
                    "generation %d: member %d is the best so far (%.4g), tied with member(s) %s: "
                    "the tie was broken by the run's draw, not by the member id",
                    generation,
                    best.member,
                    best.score,
                    ", ".join(map(str, tied)),
                )
        return best

    def capture(self, member: Learner, record: Mapping[str, Any]) -> bytes:
        """``member`` as it is now, as the kept best's member file (``record`` under ``best``)."""
        payload = member_payload(member, self.run_id, record["generation"], rng_state(), replay=False)
        return dump_payload({**payload, "best": dict(record)})

    @staticmethod
    def record_of(result: MemberResult, generation: int) -> dict:
        """The kept best's record of ``result`` at ``generation`` (an asynchronous run's: its interval)."""
        return {"member": result.member, "generation": generation, "score": result.score, "env_steps": result.env_steps}

    # --- synchronous runs -----------------------------------------------------------------------

    def keep(self, generation: int, result: MemberResult, member: Learner | None) -> None:
        """Every rank: ``result``'s member is the new best; ``member`` it, on the rank holding it,
        captured now (None elsewhere: an older capture this rank holds is dropped)."""
        self.record = self.record_of(result, generation)
        self.changed = True
        self.data = None
        if member is not None:
            self.data = self.capture(member, self.record)
            logger.debug("member %d is the best so far (%.4g): captured", result.member, result.score)

    def save(self, directory: Path) -> dict | None:
        """This rank's part of a checkpoint: writes ``best.pt`` if it holds a capture not yet
        written; returns its file entry (None if it wrote none)."""
        if self.data is None:
            return None
        return write_best(directory, self.data)

    def saved(self, directory: Path, written: dict | None) -> dict | None:
        """Rank 0, once every rank wrote its files: the manifest's ``best`` entry (``written``: the
        file entry of a capture written now, by whichever rank), carrying an unchanged best's file
        forward from the previous checkpoint."""
        if self.record is None:
            return None
        if not self.changed:
            carry_best(self.written, directory)
            written = self.entry
        self.written, self.entry = directory / BEST, written
        return {**written, **self.record}

    def done(self) -> None:
        """Every rank, after a checkpoint: its capture is on disk."""
        self.changed = False
        self.data = None

    # --- asynchronous runs ----------------------------------------------------------------------

    def names(self, result: MemberResult, interval: int) -> bool:
        """Rank 0's coordinator: whether ``result`` (a member's at its ready point ``interval``) beats
        the best named so far; if so it is now the best named (its file is settled later)."""
        if new_best([result], self.score) is None:
            return False
        self.record = self.record_of(result, interval)
        return True

    def keep_ready(self, run_dir: Path, member: Learner, result: MemberResult, interval: int) -> dict:
        """The worker holding a best ready point: the member as scored, written under a name of its
        own; returns its entry (file, size, SHA-256 and record) for :meth:`settle`."""
        record = self.record_of(result, interval)
        return {**write_best_file(run_dir, result.member, interval, self.capture(member, record)), **record}

    def settle(self, run_dir: Path, entry: Mapping[str, Any]) -> None:
        """Rank 0, once a best ready point is settled: ``best.json`` names its file (``entry``), unless
        a better one was settled first (then its file goes)."""
        settled = self.settled
        if settled is not None and not entry["score"] > settled["score"]:
            (best_dir(run_dir) / entry["file"]).unlink(missing_ok=True)
            return
        write_best_record(run_dir, entry, settled)
        self.settled = dict(entry)

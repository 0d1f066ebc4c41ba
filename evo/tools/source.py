"""``--init-from`` at start-up (rank 0, before the run directory is taken): a run source's member chosen as the
tools choose one (evo/tools/saved.py), and the agent checked against a member of the run (evo/sb3/source.py).
A source that fits is said in the log with the hyperparameters it gives; one that does not is refused with its
fix, and nothing is written."""

from __future__ import annotations

import logging

from evo.config import ConfigError
from evo.config.source import RUN, SourceRef, sha256_of, split_run
from evo.tools.saved import BEST, BEST_EVER, SavedRunError, choose, open_run

logger = logging.getLogger("evo")


def run_source(text: str) -> SourceRef:
    """``--init-from RUN[:MEMBER]``'s member file: MEMBER (``best``, ``best-ever`` or an id), or without one the
    run's kept best (its best where it kept none). Raises ConfigError naming the run and the fix."""
    run_dir, member = split_run(text)
    try:
        run = open_run(run_dir)
        if member:
            chosen = choose(run, member)
        else:
            try:
                chosen = choose(run, BEST_EVER)
            except SavedRunError:
                chosen = choose(run, BEST)
    except SavedRunError as error:
        said = str(error).replace("--member ", ":").replace(" --generation", "")
        raise ConfigError([f"--init-from {text}: {said}"]) from None
    return SourceRef(
        text=text,
        kind=RUN,
        path=str(chosen.path),
        sha256=sha256_of(chosen.path),
        run_dir=str(run_dir),
        member=chosen.member,
        generation=chosen.generation,
    )


def check_fit(ref: SourceRef, factory, algo: str) -> None:
    """The agent ``ref`` names, read and checked against a member that ``factory`` (the run's) builds, of learner
    ``algo``: raises ConfigError with every problem; one that fits is said in the log."""
    from evo.sb3.source import load_source, source_notes, source_problems  # torch, SB3: only for --init-from

    try:
        source = load_source(ref)
    except Exception as error:  # a damaged zip, a pickle of another version: said, not a traceback
        raise ConfigError([f"--init-from {ref.text}: cannot be read ({type(error).__name__}: {error})"]) from None
    member = factory.make(0, factory.initial.of(0, source.hparams), tensorboard=False)  # as member 0 will start
    try:
        problems = source_problems(source, member, algo)
        if problems:
            raise ConfigError(problems)
        initial = factory.initial
        for note in source_notes(
            source, member, initial.space, lambda name: initial.source_value(name, source.hparams)
        ):
            logger.info("%s", note)
    finally:
        member.close()

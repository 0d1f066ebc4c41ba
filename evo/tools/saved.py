"""A finished (or stopped) run's members, opened outside MPI: what ``evo-export``, ``evo-evaluate``
and ``--video`` share.

    run = open_run(Path("runs/my-run"))              # its config and its complete checkpoints
    chosen = choose(run, "best")                      # or "best-ever", "3"; generation=G for a kept one
    member = load(run, chosen)                        # an SB3 learner: member.model, member.normalizer
    ...
    member.close()

Nothing here writes into the run directory: the config is parsed as ``--resume`` would parse it
(on a world of one rank, with no TensorBoard and no evaluation env of the run's own), and members
are rebuilt from their checkpoint files, which are only read. Every bad input (a directory that is
not a run or cannot be read, a run without a complete checkpoint, a member or generation that is not
there, a best-ever that was not kept or is lost, a "best" of a run that has trained no member yet)
raises :class:`SavedRunError`, whose message names the value and what to give instead; the tools
exit with status 2 on it.

A synchronous run's checkpoints are ``checkpoints/gen_<G>/`` (the last two kept); an asynchronous
run's are each member's own ready points (``checkpoints/members/member_<i>/interval_<G>.pt``),
where "generation" means the member's interval. The kept best is the member file of the highest
selection score the run has seen: ``best.pt`` beside a generation checkpoint's members
(:attr:`Checkpoint.best`), or an asynchronous run's ``checkpoints/best/`` file that ``best.json``
names. A kept best that is lost (its file missing or damaged) costs only itself: :func:`best_ever`
refuses it, saying which file and why, and every member is still there. A run with a final pick
(``--final-eval``: ``final.json``) names its member ``best`` (:func:`final_pick`): of its top members by
selection score, the one with the best mean on fresh episodes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evo.core.streams import evaluation_seed  # noqa: F401  (the tools take it from here)
from evo.rundir.checkpoint import Checkpoint, CheckpointError, checkpoints_dir, latest, load_payload, verify

logger = logging.getLogger(__name__)

BEST, BEST_EVER = "best", "best-ever"


class SavedRunError(ValueError):
    """A run, member or generation that cannot be used; the message says which and what to do."""


class LostBest(SavedRunError):
    """The run's kept best cannot be used (its file missing, damaged or not loading); ``why`` names the
    file and says why. Every member is still there."""

    def __init__(self, message: str, why: str):
        super().__init__(message)
        self.why = why


@dataclass(frozen=True)
class MemberFile:
    """One saved member: which, from which checkpoint, and its file (read-only)."""

    member: int
    generation: int
    """The checkpoint's generation (an asynchronous run: the member's own interval)."""
    path: Path
    label: str
    """How the tools show it: ``"3"``, or ``"best-ever (3)"`` for the kept best."""
    score: float
    """The selection score it had at that generation (NaN if unknown)."""
    env_steps: int


@dataclass(frozen=True)
class SavedRun:
    """A run directory opened for reading: its resolved config and its complete checkpoints."""

    run_dir: Path
    config: Any
    """The run's ``evo.config.Config`` as ``--resume`` would resolve it, on one rank."""
    checkpoints: tuple[Checkpoint, ...]
    """A synchronous run's complete checkpoints, newest first (empty for an asynchronous run)."""

    @property
    def asynchronous(self) -> bool:
        return bool(self.config.asynchronous)

    @property
    def kept_generations(self) -> list[int]:
        if self.asynchronous:
            return sorted({g for m in range(self.config.num_agents) for g in _intervals(self.run_dir, m)})
        return sorted(c.generation for c in self.checkpoints)


def open_run(run_dir: Path | str) -> SavedRun:
    """The run in ``run_dir`` with its complete checkpoints (SavedRunError if there is none, or if the
    directory cannot be read)."""
    run_dir = Path(run_dir)
    try:
        return _open_run(run_dir)
    except OSError as error:
        path = error.filename or run_dir
        raise SavedRunError(
            f"{path}: cannot be read ({error.strerror or error}); the tools only read a run directory, but must "
            f"read all of it: give a run directory you may read (its owner can allow it: chmod -R a+rX {run_dir})"
        ) from error


def _open_run(run_dir: Path) -> SavedRun:
    from evo.config import ConfigError, parse_config
    from evo.rundir.checkpoint import candidates

    saved_config = run_dir / "config.yaml"
    if not saved_config.is_file():
        raise SavedRunError(f"{run_dir}: not an evo run directory (no config.yaml); give the --run-dir of a run")
    not_a_config = f"{saved_config}: not a run's configuration, as evo writes it"
    fix = "give the --run-dir of a run whose config.yaml is intact"
    try:
        saved = yaml.safe_load(saved_config.read_text()) or {}
    except yaml.YAMLError as error:
        problem = " ".join(str(error).split())
        raise SavedRunError(f"{not_a_config} ({problem}); {fix}") from error
    if not isinstance(saved, dict):
        raise SavedRunError(f"{not_a_config} (not a mapping); {fix}")
    strategy = saved.get("strategy", "truncation")
    try:
        config = parse_config(
            ["--run-dir", str(run_dir), "--resume", "--log-level", "WARNING"],
            strategy="truncation" if strategy == "none" else strategy,  # 'none' comes back from the run's flags
            transport=saved.get("transport", "p2p"),
            world_size=1,
            prog="evo",
        )
    except ConfigError as error:
        raise SavedRunError(f"{run_dir}: cannot read the run's configuration: {error}") from error
    config = dataclasses.replace(config, eval_episodes=0, tb_writer=False)
    if config.asynchronous:
        if not any(_intervals(run_dir, m) for m in range(config.num_agents)):
            raise SavedRunError(_no_checkpoint(run_dir))
        return SavedRun(run_dir, config, ())
    complete = []
    for directory in candidates(run_dir):
        try:
            complete.append(verify(directory, config.run_id))
        except CheckpointError as error:
            logger.warning("skipping checkpoint: %s", error)
    if not complete:
        _, skipped = latest(run_dir, config.run_id)
        raise SavedRunError(_no_checkpoint(run_dir, skipped))
    return SavedRun(run_dir, config, tuple(complete))


def _no_checkpoint(run_dir: Path, skipped: list[str] = ()) -> str:
    detail = f" ({'; '.join(skipped)})" if skipped else ""
    return (
        f"{run_dir}: no complete checkpoint in {checkpoints_dir(run_dir)}{detail}; a run writes one at every "
        "generation boundary (--checkpoint-every): let it finish a generation, or give another run"
    )


def _intervals(run_dir: Path, member: int) -> dict[int, Path]:
    """An asynchronous run's kept member files of ``member``, by interval."""
    from evo.rundir.ready import member_dir

    found = {}
    for path in member_dir(run_dir, member).glob("interval_*.pt"):
        stem = path.stem[len("interval_") :]
        if stem.isdigit() and path.with_suffix(".json").is_file():
            found[int(stem)] = path
    return found


def population(run: SavedRun, generation: int | None = None) -> list[MemberFile]:
    """Every member of the last checkpoint (or of generation ``generation``'s, if kept), by id."""
    if run.asynchronous:
        found = []
        for member in range(run.config.num_agents):
            files = _intervals(run.run_dir, member)
            if generation is not None and generation not in files:
                raise SavedRunError(_not_kept(run, generation, f"member {member}'s interval"))
            if files:
                interval = generation if generation is not None else max(files)
                found.append(_member_file(member, interval, files[interval], str(member)))
        return found
    checkpoint = _checkpoint(run, generation)
    return [
        _member_file(int(member), checkpoint.generation, checkpoint.member_path(int(member)), str(member))
        for member in sorted(checkpoint.manifest["members"], key=int)
    ]


def _checkpoint(run: SavedRun, generation: int | None) -> Checkpoint:
    if generation is None:
        return run.checkpoints[0]
    for checkpoint in run.checkpoints:
        if checkpoint.generation == generation:
            return checkpoint
    raise SavedRunError(_not_kept(run, generation, "checkpoint"))


def _not_kept(run: SavedRun, generation: int, what: str) -> str:
    kept = ", ".join(map(str, run.kept_generations)) or "none"
    return (
        f"--generation {generation}: no {what} of generation {generation} is kept in {run.run_dir} "
        f"(kept: {kept}; a run keeps its last --keep-checkpoints); give one of those, or leave --generation out"
    )


def _member_file(member: int, generation: int, path: Path, label: str) -> MemberFile:
    try:
        payload = load_payload(path)
    except CheckpointError as error:
        raise SavedRunError(f"{error}; give another member or --generation") from error
    scores = payload.get("scores") or []
    return MemberFile(
        member=int(payload.get("member", member)),
        generation=generation,
        path=path,
        label=label,
        score=float(scores[-1]) if scores else math.nan,
        env_steps=int(payload["num_timesteps"]),
    )


def best_ever(run: SavedRun) -> MemberFile | None:
    """The kept best: of the newest checkpoint that has one, or an asynchronous run's (``best.json``);
    None for a run that keeps none. SavedRunError, saying which file and why and what to give instead,
    for a kept best that is lost (its file missing, damaged or not loading)."""
    if run.asynchronous:
        from evo.rundir.ready import best_dir, read_best

        try:
            entry = read_best(run.run_dir, run.config.run_id)
        except CheckpointError as error:
            raise LostBest(_lost_best(run, str(error)), str(error)) from error
        return _kept(run, entry, best_dir(run.run_dir) / entry["file"]) if entry is not None else None
    for checkpoint in run.checkpoints:
        if checkpoint.best_lost is not None:
            raise LostBest(_lost_best(run, checkpoint.best_lost), checkpoint.best_lost)
        entry = checkpoint.best
        if entry:
            return _kept(run, entry, checkpoint.best_path())
    return None


def _kept(run: SavedRun, entry: dict, path: Path) -> MemberFile:
    try:
        found = _member_file(int(entry["member"]), int(entry["generation"]), path, "")
    except SavedRunError as error:
        why = str(error.__cause__ or error)
        raise LostBest(_lost_best(run, why), why) from error
    return dataclasses.replace(
        found,
        label=f"{BEST_EVER} ({entry['member']})",
        score=float(entry["score"]) if entry.get("score") is not None else math.nan,
    )


def _lost_best(run: SavedRun, why: str) -> str:
    members = ", ".join(str(m.member) for m in population(run))
    return (
        f"--member {BEST_EVER}: the kept best cannot be used: {why}. The members do not depend on it: give a member "
        f"id ({members}) or --member {BEST} (the best selection score of the last checkpoint); a resumed run keeps a "
        "new best from the next member it scores"
    )


def untrained(members: list[MemberFile]) -> bool:
    """Whether none of ``members`` has trained (no env step: generation 0's initial population)."""
    return all(m.env_steps == 0 for m in members)


def _untrained(run: SavedRun, member: str, generation: int | None) -> str:
    if generation is not None and len(run.kept_generations) > 1:
        kept = ", ".join(map(str, run.kept_generations))
        return (
            f"--member {member} --generation {generation}: generation {generation}'s checkpoint holds the initial "
            f"population, untrained and unscored; give a later --generation (kept: {kept}) or a member id"
        )
    return (
        f"--member {member}: {run.run_dir} has no trained member yet: its only checkpoint is generation 0's, the "
        "initial population (the run stopped before it finished a generation); continue the run with --resume "
        f"(its command is in {run.run_dir / 'command.txt'}), or give a member id to take an untrained member"
    )


def untrained_warning(members: list[MemberFile]) -> str | None:
    """The warning for members given by id that have not trained, or None."""
    if not members or not untrained(members):
        return None
    which = f"member {members[0].member}" if len(members) == 1 else "every member"
    return (
        f"{which} of generation {members[0].generation} is untrained (generation 0's checkpoint holds the initial "
        "population, before any training); continue the run with --resume to train it"
    )


def final_pick(run: SavedRun) -> MemberFile | None:
    """The run's final pick (``--final-eval``: ``final.json``, evo.runner.final) if it names a member file of
    the last checkpoint as it is now (the same generation and env steps; an asynchronous run's: the member's
    last ready point), else None: no final pick, or one made before the run was extended (``--resume
    --total-generations``), which the extended run's own replaces at its end."""
    from evo.rundir.final import read_final

    found = read_final(run.run_dir)
    if found is None:
        return None
    picked = found["pick"]
    for member_file in population(run):
        if member_file.member == picked["member"]:
            if (member_file.generation, member_file.env_steps) != (picked["generation"], picked.get("env_steps")):
                return None
            return dataclasses.replace(member_file, label=f"{BEST} ({member_file.member}: the final pick)")
    return None


def choose(run: SavedRun, member: str = BEST, generation: int | None = None) -> MemberFile:
    """The member ``member`` names: ``best`` (the run's final pick where it made one, :func:`final_pick`;
    else, and with ``generation``, the highest selection score at the last kept checkpoint, or at
    ``generation``'s; a tie by the run's draw: :func:`best_of`), ``best-ever`` (the kept best: not with
    ``generation``), or a member id. ``best`` and ``best-ever`` are refused for a run that has trained no
    member yet (a member id gives an untrained member: :func:`untrained_warning`)."""
    if member == BEST_EVER:
        if generation is not None:
            raise SavedRunError(
                "--member best-ever --generation: the kept best is one member file of whatever generation it was "
                "scored at; drop --generation, or give --member best or an id with it"
            )
        found = best_ever(run)
        if found is None:
            if untrained(population(run)):
                raise SavedRunError(_untrained(run, member, None))
            raise SavedRunError(
                f"--member best-ever: {run.run_dir} keeps no best-ever weights (its checkpoints have no best.pt: "
                "written by an evo that did not keep them); use --member best or an id"
            )
        return found
    if member == BEST and generation is None and (picked := final_pick(run)) is not None:
        return picked
    members = population(run, generation)
    if member == BEST:
        if untrained(members):
            raise SavedRunError(_untrained(run, member, generation))
        return best_of(members, run.config.seed)
    ids = {str(m.member): m for m in members}
    if member not in ids:
        raise SavedRunError(
            f"--member {member}: not a member of {run.run_dir} (its members are {', '.join(ids)}); give one of "
            f"them, {BEST} or {BEST_EVER}"
        )
    return ids[member]


def best_of(members: list[MemberFile], seed: int) -> MemberFile:
    """The member of a checkpoint's ``members`` with the highest selection score; a tie broken by the run's
    draw for that generation (evo.core.streams.tie_priorities keyed (seed, generation), the one the run's
    selection ordered them by, so the member taken is one selection kept; an asynchronous run: its latest
    member's interval), and said in its label."""
    from evo.core.selection import ranking
    from evo.core.streams import tie_priorities

    priorities = tie_priorities((seed, max(m.generation for m in members)), [m.member for m in members])
    top = members[int(ranking([m.score for m in members], [priorities[m.member] for m in members])[0])]
    tied = [m.member for m in members if m is not top and math.isfinite(top.score) and m.score == top.score]
    said = f", tied with {', '.join(map(str, tied))}: the run's draw took it" if tied else ""
    return dataclasses.replace(top, label=f"{BEST} ({top.member}{said})")


def front(run: SavedRun) -> tuple[list[MemberFile], list[int]]:
    """A run with several objectives: the members of its last checkpoint in the first Pareto front of
    their last rows in population.csv (a synchronous run's last generation; an asynchronous run's: each
    member's last checkpointed ready point), and the ids of the front's members left out because they
    copied a donor there (their file holds the donor's weights; the donor is in the front too)."""
    from evo.rundir.history import RunDirError, load_run

    objective = run.config.objective
    if not objective.several:
        raise SavedRunError(
            f"--front: {run.run_dir} ranked its members by one objective ({objective.text}), so it has no Pareto "
            f"front; give --member {BEST} or an id (a run with --objective return,info:KEY has one)"
        )
    members = population(run)
    if untrained(members):
        raise SavedRunError(
            f"--front: {run.run_dir} has no trained member yet (only generation 0's checkpoint, the initial "
            "population, unscored); continue the run with --resume"
        )
    try:
        history = load_run(run.run_dir)
    except RunDirError as error:
        raise SavedRunError(f"--front: {error}") from error
    rows = [history.row(m.generation, m.member) for m in members if history.has(m.generation, m.member)]
    first = history.first_front(rows)
    copied = sorted(row.member for row in first if row.source is not None)
    kept = {row.member for row in first} - set(copied)
    return [m for m in members if m.member in kept], copied


def output_problems(flag: str, path: Path | None, folder: bool = False) -> list[str]:
    """Why a tool could not write ``path`` (``folder``: a folder it creates, else a file), each with its
    fix: a part of the path is a file, or the nearest folder that exists may not be written. Checked
    before any work, so a tool refuses at once instead of failing at the end."""
    if path is None:
        return []
    path = Path(path)
    try:
        if path.exists():
            if folder and not path.is_dir():
                return [f"{flag} {path}: a file, not a folder; give a folder"]
            if not folder and path.is_dir():
                return [f"{flag} {path}: a folder; give a file's path"]
        existing = (path if folder else path.parent).absolute()
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            return [f"{flag} {path}: {existing} is a file, not a folder; give a path under a folder"]
        if not os.access(existing, os.W_OK | os.X_OK):
            return [f"{flag} {path}: you may not write into {existing}; give a path you may write to"]
        if not folder and path.exists() and not os.access(path, os.W_OK):
            return [f"{flag} {path}: you may not write it; give a path you may write to"]
    except OSError as error:
        return [f"{flag} {path}: cannot be reached ({error.strerror or error}); give a path you may write to"]
    return []


def load(run: SavedRun, chosen: MemberFile, precision: str | None = None):
    """Member ``chosen`` rebuilt as its learner's SB3 member (``model``, ``normalizer``,
    ``agent``; its training envs exist but are not stepped), its weights, optimizer states,
    normalisation statistics and hyperparameters restored from its file. ``precision`` overrides
    the run's (``"fp32"`` reads a bf16 member's float32 weights in float32). Close it when done.

    The process takes the run's torch threads and CPU tuning, as each of the run's ranks did: with
    torch's default (every core) an IMPALA member's one-frame forward passes ran 2-6x slower on 2
    cores beside other work (2026-11-27), the threads waiting for each other."""
    from evo.runner.session import member_factory, prepare_process

    prepare_process(run.config.torch_threads, run.config.cpu_tuning)
    config = run.config if precision is None else dataclasses.replace(run.config, precision=precision)
    payload = load_payload(chosen.path)
    member = member_factory(config).make(chosen.member, tensorboard=False)
    note = member.restore(payload)
    if note:
        logger.info("member %d: %s", chosen.member, note)
    return member

"""The PBT run of any learner's agents, once the config is accepted (``evo.main`` is the entry
point): the members, the hooks it plugs into the generation loop (``evo.loop``), records and
checkpoints. Nothing here names an algorithm: members are built through the learner interface
(evo/learners/interface.py) by the SB3 side of ``--algo`` (evo/sb3/<algo>.py).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from evo.config import Config
from evo.core.explorers import Explorer, make_explorer
from evo.core.kinds import sample_hparams
from evo.core.plan import Exploit, generation_rng, plan_generation
from evo.core.progress import Progress, ProgressReporter
from evo.core.restart import Restart, failures_by_member, plan_restarts, restart_rng
from evo.core.result import MemberResult, Scores, new_best
from evo.core.selection import NO_PBT
from evo.learners.interface import Learner
from evo.logs import output_is_terminal
from evo.loop import GenerationReport, Hooks, LoopOutcome, LoopSettings, StepTimes, run_generations
from evo.mpi import exchange
from evo.rundir.checkpoint import (
    BEST,
    BEST_KEYS,
    MEMBER_FORMAT,
    Checkpoint,
    Target,
    atomic_write,
    carry_best,
    dump_payload,
    generation_dir,
    load_payload,
    member_filename,
    prune,
    sha256,
    write_best,
    write_manifest,
)
from evo.rundir.records import RankTiming, RunRecords, tb_dir
from evo.sb3.cputune import tune_allocator
from evo.sb3.learner import EnvSettings, MemberSetup, build_member, member_seed
from evo.sb3.rng import rng_state, set_rng_state
from evo.stagerun import RunTools, Stages
from evo.stopping import EXIT_STOPPED, StopRequest

logger = logging.getLogger("evo")

INIT_STREAM = 0x1417
RESTART_ENV_STREAM = 5000
"""The env seeds of a restarted member: this plus its failure count (a resumed member's are 2 + the
generation it resumes at)."""


def initial_hparams(config: Config, member: int) -> dict[str, object]:
    """Member ``member``'s starting hyperparameters: drawn from the search space, the YAML's
    defaults (``--initial-hparams defaults``), or the first entry of a replayed schedule."""
    if config.schedule:
        return dict(config.schedule[0][1])
    space = config.agent.search_space
    if config.initial_hparams == "defaults":
        return {name: kind.coerce(config.agent.settings[name]) for name, kind in space.items()}
    rng = np.random.default_rng([config.seed, member, INIT_STREAM])
    return sample_hparams(space, rng)


def member_setup(config: Config, member: int, env_seed: int | None = None) -> MemberSetup:
    """What building member ``member`` of the run takes."""
    return MemberSetup(
        member_id=member,
        seed=config.seed,
        env=EnvSettings(
            config.env_id,
            config.env_kwargs,
            config.distribution_mode,
            config.num_levels,
            config.start_level,
            config.eval_num_levels,
            config.eval_start_level,
        ),
        agent=config.agent,
        precision=config.precision,
        channels_last=config.cpu_tuning,
        eval_episodes=config.eval_episodes,
        score_window=config.score_window,
        select_on=config.select_on,
        exploit_buffer=config.exploit_buffer,
        tb_dir=tb_dir(config.run_dir, member, config.tb_writer),
        env_seed=env_seed,
    )


def make_member(
    config: Config,
    member: int,
    hparams: Mapping[str, object] | None = None,
    env_seed: int | None = None,
    tensorboard: bool = True,
) -> Learner:
    """A new member ``member`` of the run (its learner's SB3 side), with ``hparams`` (default: its
    initial ones) in effect; ``tensorboard=False`` writes no event files (tools and tests)."""
    setup = member_setup(config, member, env_seed)
    if not tensorboard:
        setup = dataclasses.replace(setup, tb_dir=None)
    return build_member(setup, initial_hparams(config, member) if hparams is None else hparams)


def checkpoint_target(config: Config) -> Target:
    return Target(
        config.run_dir, config.run_id, config.env_id, config.num_agents, config.world_size, config.keep_checkpoints
    )


class KeptBest:
    """The best evaluated member of the run so far, kept as rl-baselines3-zoo keeps
    ``best_model.zip``: the member whose selection score was the highest (``new_best``), captured
    whole (a member file, its replay buffer left out) when it was scored, before that generation's
    exploit could overwrite it. Every rank knows ``record`` ({member, generation, score,
    env_steps}); the rank that captured it holds the file's bytes until the next checkpoint is
    written (``--checkpoint-every``), which stores them as ``best.pt``; a later checkpoint with the
    same best carries that file forward (``carry_best``). A resumed run starts from its
    checkpoint's best and keeps it unless a member beats it."""

    def __init__(self, run_id: str, checkpoint: Checkpoint | None = None):
        self.run_id = run_id
        entry = checkpoint.best if checkpoint is not None else None
        self.record: dict | None = {key: entry[key] for key in BEST_KEYS} if entry is not None else None
        self.data: bytes | None = None
        """This rank's capture not yet in a checkpoint."""
        self.changed = False
        """A new best since the last checkpoint written (on every rank)."""
        self.written: Path | None = checkpoint.best_path() if entry is not None else None
        self.entry: dict | None = {key: entry[key] for key in ("file", "bytes", "sha256")} if entry else None
        """The last checkpoint's ``best.pt`` and its file entry, which an unchanged best carries forward."""

    @property
    def score(self) -> float | None:
        return float(self.record["score"]) if self.record is not None else None

    def beats(self, generation: int, population: list[MemberResult]) -> MemberResult | None:
        """Rank 0: the member of ``population`` whose score beats the kept best, or None."""
        return new_best(population, self.score)

    def keep(self, generation: int, result: MemberResult, member: Learner | None) -> None:
        """Every rank: ``result``'s member is the new best; ``member`` it, on the rank holding it,
        captured now (None elsewhere: an older capture this rank holds is dropped)."""
        self.record = {
            "member": result.member,
            "generation": generation,
            "score": result.score,
            "env_steps": result.env_steps,
        }
        self.changed = True
        self.data = None
        if member is not None:
            payload = checkpoint_payload(member, self.run_id, generation, rng_state(), replay=False)
            self.data = dump_payload({**payload, "best": dict(self.record)})
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


def save_checkpoint(
    comm,
    target: Target,
    generation: int,
    payloads: dict[int, bytes],
    run_state: dict | None,
    best: KeptBest | None = None,
) -> None:
    """Collective: every rank writes its members' files (and, the rank that captured a new best,
    ``best.pt``), then rank 0 writes the manifest (last) and prunes old checkpoints. ``run_state``
    (rank 0 only) goes into the manifest."""
    directory = generation_dir(target.run_dir, generation)
    if comm.Get_rank() == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "manifest.json").unlink(missing_ok=True)
    comm.Barrier()
    entries = []
    for member, data in payloads.items():
        atomic_write(directory / member_filename(member), data)
        entries.append((member, {"file": member_filename(member), "bytes": len(data), "sha256": sha256(data)}))
    best_file = best.save(directory) if best is not None else None
    gathered = exchange.gather_to_root(comm, [(entries, best_file)])
    if comm.Get_rank() == 0:
        manifest = {
            "format": 1,
            "run_id": target.run_id,
            "generation": generation,
            "env_id": target.env_id,
            "num_agents": target.num_agents,
            "world_size": target.world_size,
            "members": {str(member): entry for member, entry in sorted(e for part, _ in gathered for e in part)},
            **(run_state or {}),
        }
        if best is not None:
            kept = best.saved(directory, next((file for _, file in gathered if file is not None), None))
            if kept is not None:
                manifest["best"] = kept
        write_manifest(directory, manifest)
        prune(target.run_dir, target.keep, generation)
        logger.debug("checkpoint of generation %d written to %s", generation, directory)
    if best is not None:
        best.done()
    comm.Barrier()


def checkpoint_payload(member: Learner, run_id: str, generation: int, rng: dict, replay: bool = True) -> dict:
    """A member's checkpoint file: the whole member (its replay buffer left out unless ``replay``)
    under the run's id and the generation, with the rank's RNG states."""
    return {
        "format": MEMBER_FORMAT,
        "run_id": run_id,
        "generation": generation,
        "rng": rng,
        **member.member_state(replay=replay),
    }


def snapshot(
    run_id: str, members: Mapping[int, Learner], generation: int, run_state: dict | None, replay: bool = True
) -> tuple[int, dict[int, bytes], dict | None]:
    """The members as they are at the end of ``generation``, ready for :func:`save_checkpoint`."""
    rng = rng_state()
    payloads = {
        m: dump_payload(checkpoint_payload(member, run_id, generation, rng, replay)) for m, member in members.items()
    }
    return generation, payloads, run_state


def run(config: Config, comm, command: Sequence[str] | None = None, checkpoint: Checkpoint | None = None) -> int:
    """Train the population up to ``config.total_generations``, from scratch or from
    ``checkpoint``. Returns the exit status: 0, or EXIT_STOPPED after a stop signal (a
    checkpoint of the last generation boundary is then on disk)."""
    start = checkpoint.generation if checkpoint is not None else 0
    if start >= config.total_generations:
        if comm.Get_rank() == 0:
            logger.info(
                "the run already has %d of %d generations; pass --total-generations N > %d to extend it",
                start,
                config.total_generations,
                start,
            )
        return 0
    prepare_process(config.torch_threads, config.cpu_tuning)
    stop_request = StopRequest().install()
    records = open_records(comm, config, command, checkpoint)
    members = build_members(config, comm.Get_rank(), checkpoint)
    if comm.Get_rank() == 0:
        log_start(config, start, checkpoint)
    target = checkpoint_target(config)
    if checkpoint is None:  # the initial population, so that a stop in generation 1 can resume
        initial = snapshot(config.run_id, members, 0, {"lineage": [], "population_step": 0}, config.checkpoint_buffers)
        save_checkpoint(comm, target, *initial)
    manifest = checkpoint.manifest if checkpoint is not None else {}
    # the explorer's memory (PB2's history of the population), on rank 0 where the plan is decided
    explorer = make_explorer(
        config.explore,
        config.agent.explored_space,
        config.perturb_factors,
        config.resample_probability,
        explorer_state(manifest, config.explore),
        rounds=config.total_generations,
        population=config.num_agents,
    )
    reporter = None
    if comm.Get_rank() == 0:
        per_member = config.agent.spec.planned_steps(
            config.agent_training_steps, config.agent.settings, config.agent.n_envs
        )
        reporter = progress_reporter(
            per_member, config.total_generations, config.progress_interval, start, len(members)
        )
    best = KeptBest(config.run_id, checkpoint)
    stages = None
    if config.max_distillations:
        tools = RunTools(
            make_member=make_member,
            restore_member=restore_member,
            payloads=lambda learners, g: snapshot(config.run_id, learners, g, None, config.checkpoint_buffers)[1],
            save=lambda g, payloads, state: save_checkpoint(comm, target, g, payloads, state, best=best),
        )
        stages = Stages(comm, config, checkpoint, records, tools)
    hooks = run_hooks(comm, config, members, records, explorer, reporter, best, stages)
    stopper = exchange.StopNotifier(comm, lambda: stop_request.requested)
    while True:
        if stages is not None and stages.ready(start):
            outcome = stages.distil(members, start, stopper, checkpoint)
            if outcome.stopped:
                break
            start = outcome.completed
            explorer = make_explorer(  # a new stage's explorer starts afresh (BG-PBT resets its GP's data)
                config.explore,
                config.agent.explored_space,
                config.perturb_factors,
                config.resample_probability,
                rounds=config.total_generations,
                population=config.num_agents,
            )
            hooks = run_hooks(comm, config, members, records, explorer, reporter, best, stages)
        settings = LoopSettings(
            start, config.total_generations, config.transport, config.checkpoint_every, config.max_member_failures
        )
        outcome = run_generations(comm, members, config.owner, hooks, settings, stopper)
        if not outcome.paused:
            break
        start, checkpoint = outcome.completed, None
    finish(comm, config, members, records, outcome, stop_request)
    stop_request.uninstall()
    return EXIT_STOPPED if outcome.stopped else 0


def prepare_process(torch_threads: int, cpu_tuning: bool) -> None:
    """Torch threads per rank, and evo's CPU tuning unless turned off."""
    torch.set_num_threads(torch_threads)
    if cpu_tuning:
        tune_allocator()


def open_records(
    comm, config: Config, command: Sequence[str] | None, checkpoint: Checkpoint | None
) -> RunRecords | None:
    """Rank 0 creates the run directory, or continues its records from the checkpoint; the
    other ranks wait for it (they write into it) and get None."""
    records = None
    if comm.Get_rank() == 0:
        manifest = checkpoint.manifest if checkpoint is not None else {}
        records = RunRecords.open(
            config,
            list(command) if command is not None else None,
            resume_generation=checkpoint.generation if checkpoint is not None else None,
            lineage=manifest.get("lineage"),
            population_step=manifest.get("population_step"),
        )
    comm.Barrier()
    return records


def explorer_state(manifest: Mapping, name: str) -> dict | None:
    """The explorer's state a checkpoint holds (runs from before the explorer registry kept PB2's
    under ``pb2``)."""
    saved = manifest.get("explorer")
    if saved is not None:
        return saved["state"] if saved.get("name") == name else None
    return manifest.get("pb2") if name == "pb2" else None


def build_members(config: Config, rank: int, checkpoint: Checkpoint | None) -> dict[int, Learner]:
    """This rank's members by id, new or restored from ``checkpoint`` (each restored before
    the next is built, as the RNG states are part of the restore)."""
    start = checkpoint.generation if checkpoint is not None else 0
    members = {}
    for member_id in config.members_of(rank):
        # a resumed member gets fresh envs, seeded by the generation it resumes at
        env_seed = member_seed(config.seed, member_id, stream=2 + start) if start else None
        member = make_member(config, member_id, env_seed=env_seed)
        if checkpoint is not None:
            restore_member(config, rank, member, checkpoint)
        members[member_id] = member
    return members


def restore_member(config: Config, rank: int, member: Learner, checkpoint: Checkpoint) -> None:
    """Load ``member`` from its file in ``checkpoint``; its TensorBoard continues after the
    checkpoint's step. The RNG states come back too, unless the run moved to another number
    of ranks (a rank's states then mix several old ranks': reseed instead)."""
    reseed = None
    if checkpoint.manifest["world_size"] != config.world_size:
        reseed = member_seed(config.seed, rank, stream=1000 + checkpoint.generation)
    load_member(member, checkpoint, config.run_id, tb_dir(config.run_dir, member.member_id, config.tb_writer), reseed)


def load_member(
    member: Learner, checkpoint: Checkpoint, run_id: str, tensorboard: Path | None, reseed: int | None
) -> None:
    """``member`` becomes its file in ``checkpoint`` (which must belong to run ``run_id``), its
    TensorBoard continuing in ``tensorboard``; the rank's RNG states come back, or are reseeded
    with ``reseed``."""
    path = checkpoint.member_path(member.member_id)
    payload = load_payload(path)
    if payload["run_id"] != run_id or payload["generation"] != checkpoint.generation:
        raise RuntimeError(f"{path} does not belong to this checkpoint")
    note = member.restore(payload)
    if note:
        logger.warning("member %d: %s", member.member_id, note)
    member.set_tensorboard(tensorboard, member.env_steps + 1)
    if reseed is None:
        set_rng_state(payload["rng"])
    else:
        torch.manual_seed(reseed)


def log_start(config: Config, start: int, checkpoint: Checkpoint | None) -> None:
    logger.info(
        "%s: %d members on %d ranks, %s selection, %s exchange, generations %d..%d x %d env steps; run dir %s",
        config.env_id,
        config.num_agents,
        config.world_size,
        f"{config.strategy} ({config.explore} explore)"
        if config.strategy != NO_PBT
        else "no (control: --strategy none)",
        config.transport,
        start + 1,
        config.total_generations,
        config.agent_training_steps,
        config.run_dir,
    )
    if checkpoint is not None:
        logger.info("resumed from %s (generation %d)", checkpoint.directory, start)
    if config.schedule:
        logger.info(
            "following the schedule in %s: %d segment(s), changes at env steps %s",
            config.schedule_file,
            len(config.schedule),
            ", ".join(str(steps) for steps, _ in config.schedule[1:]) or "none",
        )


def progress_reporter(
    per_member: int, total_generations: int, interval: float, start: int, local_members: int
) -> ProgressReporter | None:
    """Rank 0's progress report during a generation (None with an interval of 0): its members'
    env steps stand for the generation's (``per_member``: what each trains in a generation)."""
    if interval <= 0:
        return None
    progress = Progress(local_members * per_member, total_generations, generation=start)
    return ProgressReporter(progress, interval, logger.info, sys.stdout, terminal=output_is_terminal(sys.stdout))


def run_hooks(
    comm,
    config: Config,
    members: Mapping[int, Learner],
    records: RunRecords | None,
    explorer: Explorer,
    reporter: ProgressReporter | None = None,
    best: KeptBest | None = None,
    stages: Stages | None = None,
) -> Hooks:
    """The run's steps of the generation loop: train, score, plan, records, checkpoints;
    with ``reporter`` (rank 0), the generation's progress while its members train; with ``best``,
    the best member so far kept and checkpointed; with ``stages``, the stages' book kept and the
    loop paused when a distillation is due."""
    target = checkpoint_target(config)
    first = min(members)

    def train(member: Learner, should_stop) -> None:
        if reporter is not None and member.member_id == first:
            reporter.begin(reporter.progress.generation + 1)
        member.train(config.agent_training_steps, should_stop, config.schedule, reporter)

    def score(member: Learner) -> Scores:
        scores = member.evaluate()
        member.scores.append(scores.score)
        return scores

    def plan(generation: int, population: list[MemberResult]) -> list[Exploit]:
        return plan_generation(
            generation,
            population,
            config.strategy,
            explorer,
            generation_rng(config.seed, generation),
            config.truncation_fraction,
            ties=config.ties,
        )

    failures = failures_by_member(records.lineage) if records is not None else {}  # rank 0's count

    def restart(generation: int, failed, scored, recipients, round_: int) -> list[Restart]:
        planned = plan_restarts(
            generation,
            failed,
            scored,
            failures,
            config.max_member_failures,
            config.agent.explored_space,
            restart_rng(config.seed, generation, round_),
            config.strategy,
            config.truncation_fraction,
            recipients,
        )
        failures.update({r.member: r.failures for r in planned})
        return planned

    return Hooks(
        train=train,
        score=score,
        plan=plan,
        records=lambda report: with_stages(
            stages, report, after_exchange(comm, config.total_generations, members, records, explorer, report, reporter)
        ),
        snapshot=lambda generation, run_state: snapshot(
            config.run_id, members, generation, run_state, config.checkpoint_buffers
        ),
        save=lambda saved: save_checkpoint(comm, target, *saved, best=best),
        restart=restart,
        rebuild=lambda member, planned, env_steps: rebuild_member(config, member, planned, env_steps),
        restarted=lambda member, planned: member.carry_score(planned.donor_score_train),
        best=best.beats if best is not None else None,
        keep_best=best.keep if best is not None else None,
        pause=(lambda report: stages.ready(report.generation)) if stages is not None else None,
    )


def with_stages(stages: Stages | None, report: GenerationReport, run_state: dict | None) -> dict | None:
    """The run state for the checkpoint, with the stages' book once it took the generation."""
    return stages.record(report.population, run_state) if stages is not None else run_state


def rebuild_member(config: Config, failed: Learner, restart: Restart, env_steps: int) -> Learner:
    """A new member in the place of ``failed``: fresh weights and envs (seeded anew for each of its
    failures), the restart's hyperparameters, its env-step counter back at ``env_steps`` and its
    earlier scores; its TensorBoard continues after ``env_steps``."""
    env_seed = member_seed(config.seed, failed.member_id, stream=RESTART_ENV_STREAM + restart.failures)
    member = make_member(config, failed.member_id, restart.new_hparams, env_seed=env_seed, tensorboard=False)
    member.continue_counts(env_steps, failed.scores)
    member.set_tensorboard(tb_dir(config.run_dir, failed.member_id, config.tb_writer), env_steps + 1)
    try:
        failed.close()
    except Exception as error:  # its envs may be what broke
        logger.warning("member %d: closing the failed member: %s: %s", failed.member_id, type(error).__name__, error)
    return member


def after_exchange(
    comm,
    total_generations: int,
    members: Mapping[int, Learner],
    records: RunRecords | None,
    explorer: Explorer,
    report: GenerationReport,
    reporter: ProgressReporter | None = None,
) -> dict | None:
    """Recipients carry their donors' training scores over, the progress report of the
    generation ends, then the records are written."""
    carry_donor_scores(comm, members, report)
    if reporter is not None:
        reporter.end()
    return write_records(comm, total_generations, members, records, explorer, report)


def carry_donor_scores(comm, members: Mapping[int, Learner], report: GenerationReport) -> None:
    """Collective: each recipient on this rank takes its donor's training score of the
    generation (rank 0 knows the population and broadcasts them), so that until it finishes
    an episode with its new weights it is scored by what those weights last scored, not NaN."""
    donor_scores = None
    if report.population is not None:
        by_id = {result.member: result.score_train for result in report.population}
        donor_scores = {donor: by_id[donor] for donor in set(report.donors.values())}
    donor_scores = exchange.broadcast(comm, donor_scores)
    for recipient, donor in report.donors.items():
        if recipient in members:
            members[recipient].carry_score(donor_scores[donor])


def write_records(
    comm,
    total_generations: int,
    members: Mapping[int, Learner],
    records: RunRecords | None,
    explorer: Explorer,
    report: GenerationReport,
) -> dict | None:
    """Every rank: its members' TensorBoard rows, and its timing to rank 0 (collective).
    Rank 0: population.csv, lineage.jsonl, generations.csv, the log line; returns the run
    state for the checkpoint (None on other ranks)."""
    for result in report.results:
        members[result.member].log_generation(result, result.member in report.donors)
    timing = exchange.gather_to_root(comm, [rank_timing(report.times)])
    if records is None:
        return None
    elapsed = time.perf_counter() - report.times.started
    trained = sum(t.trained for t in timing)
    records.write_generation(report.generation, report.population, report.exploits, report.restarts)
    records.write_timing(report.generation, elapsed, trained, timing)
    run_state = {"lineage": list(records.lineage), "population_step": records.population_step}
    state = explorer.state()
    if state is not None:
        run_state["explorer"] = {"name": explorer.name, "state": state}
    log_generation(total_generations, report.generation, report.population, report.exploits, elapsed, trained)
    log_restarts(report.restarts)
    return run_state


def rank_timing(times: StepTimes) -> RankTiming:
    """Seconds this rank spent in each part of the generation."""
    return RankTiming(
        trained=times.env_steps,
        train_s=times.trained - times.started,
        score_s=times.scored - times.agreed,
        wait_s=(times.agreed - times.trained) + (times.gathered - times.scored),
        exchange_s=times.exchanged - times.gathered,
    )


def finish(
    comm,
    config: Config,
    members: Mapping[int, Learner],
    records: RunRecords | None,
    outcome: LoopOutcome,
    stop_request: StopRequest,
) -> None:
    """The last log lines, TensorBoard's HPARAMS tab after a complete run, and closing."""
    if outcome.stopped:
        log_stop(comm.Get_rank(), config.run_dir, outcome.completed, stop_request)
    elif outcome.completed == config.total_generations and outcome.last is not None:
        results = {result.member: result for result in outcome.last.results}
        for member_id, member in members.items():
            member.log_final(results[member_id])
    for member in members.values():
        member.close()
    if records is not None:
        records.close()
        if outcome.last is not None and not outcome.stopped:
            best = max(outcome.last.population, key=lambda result: result.score if result.scored else -np.inf)
            logger.info("done: best member %d scored %.2f; records in %s", best.member, best.score, config.run_dir)
    comm.Barrier()


def log_stop(rank: int, run_dir: Path, completed: int, stop_request: StopRequest) -> None:
    if rank == 0:
        logger.warning(
            "stopped by %s: checkpoint of generation %d is in %s; the partial generation %d is redone on "
            "--resume. Exit status %d.",
            stop_request.signal_name or "a signal on another rank",
            completed,
            run_dir,
            completed + 1,
            EXIT_STOPPED,
        )
    elif stop_request.requested:
        logger.warning("stopped by %s", stop_request.signal_name)


def log_generation(
    total_generations: int,
    generation: int,
    population: list[MemberResult],
    exploits: list[Exploit],
    elapsed: float,
    trained: int,
) -> None:
    scores = np.array([result.score for result in population], dtype=float)
    finite = np.isfinite(scores).any()
    logger.info(
        "gen %d/%d  env steps/member %d  best %.2f  mean %.2f  exploits %d  %.1fs  %.0f env-steps/s",
        generation,
        total_generations,
        max(result.env_steps for result in population),
        np.nanmax(scores) if finite else float("nan"),
        np.nanmean(scores) if finite else float("nan"),
        len(exploits),
        elapsed,
        trained / elapsed,
    )
    for exploit in exploits:
        changes = ", ".join(exploit.changes)
        if exploit.donor == exploit.recipient:  # a tie (or the no-exploit ablation): explore only
            logger.info("  member %d (%.2f) keeps its weights: %s", exploit.recipient, exploit.recipient_score, changes)
            continue
        logger.info(
            "  member %d (%.2f) <- member %d (%.2f): %s",
            exploit.recipient,
            exploit.recipient_score,
            exploit.donor,
            exploit.donor_score,
            changes,
        )


def log_restarts(restarts: Sequence[Restart], redone: str = "and trained generation {} again") -> None:
    """A warning for each restart; ``redone`` says what the member trained again (an asynchronous
    run's: its interval)."""
    for restart in restarts:
        start = "fresh weights"
        if restart.donor is not None:
            start = f"member {restart.donor}'s weights ({restart.donor_score:.2f})"
        logger.warning(
            "  member %d failed (%s; failure %d): restarted from %s %s: %s",
            restart.member,
            restart.error,
            restart.failures,
            start,
            redone.format(restart.generation),
            ", ".join(restart.changes),
        )

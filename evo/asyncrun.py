"""An asynchronous PBT run (``--asynchronous``), once the config is accepted: the members, what the
run plugs into asynchronous PBT's transport (evo.mpi.asynchronous: rank 0's coordination and every
rank's worker hooks), its records and its checkpoints (evo.rundir.ready).

Each member reaches a ready point every ``--agent-training-steps`` env steps (its own intervals 1 ..
``--total-generations``). There, on the rank that trained it: it is scored, its snapshot kept, rank
0's coordinator decides its exploit against every member's latest score, the decision is applied
(copying the donor's snapshot from whichever rank holds it), its TensorBoard row and its checkpoint
are written, and rank 0 writes its population.csv row and lineage lines. A stop (SIGTERM, SIGUSR1,
SLURM's pre-emption) leaves every member's interval in progress unfinished (nothing is counted) and
ends every rank with exit status 75; ``--resume`` continues each member from its own last checkpoint.
A resumed run is not the run that would have gone on uninterrupted: which member copies whom depends
on when each member reaches its ready points.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evo.config import Config
from evo.core.asynchronous import Latest, ReadyExploit, Schedule, decide_at_ready, ready_rng
from evo.core.explorers import make_explorer
from evo.core.restart import Failure, Restart, failures_by_member, plan_restarts, ready_restart_rng
from evo.core.result import Scores, new_best
from evo.learners.interface import Learner
from evo.mpi import exchange
from evo.mpi.asynchronous import Applied, Coordination, WorkerHooks, run_workers, snapshot_state
from evo.run import checkpoint_payload, log_restarts, make_member, prepare_process, rebuild_member
from evo.rundir.checkpoint import as_arrays, as_tensors, dump_payload, load_payload
from evo.rundir.ready import (
    ReadyCheckpoints,
    best_dir,
    members_dir,
    remove_stray_best_files,
    write_best_file,
    write_best_record,
    write_explorer_state,
    write_ready_checkpoint,
)
from evo.rundir.records import RunRecords, ready_record, result_of_row, tb_dir
from evo.sb3.learner import member_seed
from evo.sb3.rng import rng_state, set_rng_state
from evo.stopping import EXIT_STOPPED, StopRequest

logger = logging.getLogger("evo")

MOVE_ENV_STREAM = 7_000_000
"""The env seeds of a member rebuilt on another rank: this plus its env steps at the move. Envs that
are plain data come back as they were; the others (Procgen's, MuJoCo's) start anew, and must not
start from the same seed at each move (a member would play the same levels again)."""
READY_STATE = "ready_state"
"""A member file's extra key when the member copied at its ready point: the weights that earned its
score there (its snapshot), which recipients copy until it reaches its next ready point."""


def run_asynchronous(
    config: Config, comm, command: Sequence[str] | None = None, checkpoint: ReadyCheckpoints | None = None
) -> int:
    """Train every member to ``config.total_generations`` intervals, from scratch or from its own
    last checkpoint. Returns 0, or EXIT_STOPPED after a stop signal."""
    done = checkpoint.intervals if checkpoint is not None else {}
    rank = comm.Get_rank()
    if all(done.get(m, 0) >= config.total_generations for m in range(config.num_agents)):
        if rank == 0:
            logger.info(
                "every member already has %d intervals; pass --total-generations N > %d to extend the run",
                config.total_generations,
                config.total_generations,
            )
        return 0
    prepare_process(config.torch_threads, config.cpu_tuning)
    stop_request = StopRequest().install()
    records = None
    if rank == 0:
        records = RunRecords.open(
            config,
            list(command) if command is not None else None,
            resume_generation=max(done.values(), default=0) if checkpoint is not None else None,
            ready_records=checkpoint.records if checkpoint is not None else [],
        )
        members_dir(config.run_dir).mkdir(parents=True, exist_ok=True)  # a job script's sign to --resume
        remove_stray_best_files(config.run_dir, checkpoint.best if checkpoint is not None else None)
    comm.Barrier()  # the run directory exists before any rank writes into it
    members, snapshots = build_members(config, rank, checkpoint)
    plan = None
    if rank == 0:
        log_start(config, checkpoint)
        plan = coordination(config, records, checkpoint)
    wall_origin = max((float(r["wall_s"]) for r in checkpoint.records), default=0.0) if checkpoint else 0.0
    stopper = exchange.StopNotifier(comm, lambda: stop_request.requested)
    last: dict[int, Any] = {}
    report = run_workers(
        comm,
        members,
        worker_hooks(config, rank, last),
        plan,
        stopper.poll,
        catch=config.max_member_failures > 0,
        snapshots=snapshots,
        wall_origin=wall_origin,
    )
    stopped = stopper.agree()
    finish(comm, config, members, records, last, report.coordinator, stopped, stop_request)
    stop_request.uninstall()
    return EXIT_STOPPED if stopped else 0


def build_members(config: Config, rank: int, checkpoint: ReadyCheckpoints | None):
    """This rank's members (its placement's), new or each from its own last checkpoint, and the
    snapshots of their last ready points (what recipients copy from them)."""
    members: dict[int, Learner] = {}
    snapshots = {}
    saved = checkpoint.members if checkpoint is not None else {}
    for member_id in config.members_of(rank):
        if member_id not in saved:
            members[member_id] = make_member(config, member_id)
            continue
        entry = saved[member_id]
        payload = load_payload(entry.path)
        member = restored(config, member_id, payload, member_seed(config.seed, member_id, stream=2 + entry.interval))
        set_rng_state(payload["rng"])
        ready = payload.get(READY_STATE)
        state = as_arrays(ready) if ready is not None else snapshot_state(member)
        snapshots[member_id] = (entry.interval, member.env_steps, state)
        members[member_id] = member
    return members, snapshots


def restored(config: Config, member_id: int, payload: dict, env_seed: int | None = None) -> Learner:
    """Member ``member_id`` rebuilt from its payload (a checkpoint's, or a move's), its TensorBoard
    continuing after its env steps; ``env_seed`` seeds its envs (default: a move's, by its env steps)."""
    if env_seed is None:
        env_seed = member_seed(config.seed, member_id, stream=MOVE_ENV_STREAM + int(payload["num_timesteps"]))
    member = make_member(config, member_id, payload["hparams"], env_seed=env_seed, tensorboard=False)
    note = member.restore(payload)
    if note:
        logger.warning("member %d: %s", member_id, note)
    member.set_tensorboard(tb_dir(config.run_dir, member_id, config.tb_writer), member.env_steps + 1)
    return member


def coordination(config: Config, records: RunRecords, checkpoint: ReadyCheckpoints | None) -> Coordination:
    """Rank 0's part: the schedule, the decisions at ready points and at failures, and the records."""
    space = config.agent.search_space
    saved_explorer = checkpoint.explorer if checkpoint is not None else None
    explorer = make_explorer(
        config.explore,
        config.agent.explored_space,
        config.perturb_factors,
        config.resample_probability,
        saved_explorer["state"] if saved_explorer and saved_explorer.get("name") == config.explore else None,
        rounds=config.total_generations,
        population=config.num_agents,
    )
    latest: dict[int, Latest] = {}
    for member in range(config.num_agents):
        record = checkpoint.last_record(member) if checkpoint is not None else None
        if record is not None:
            latest[member] = Latest(record["interval"], result_of_row(record["row"], space), float(record["wall_s"]))
    done = checkpoint.intervals if checkpoint is not None else {}
    placement = {m: config.owner(m) for m in range(config.num_agents)}
    failures = failures_by_member(records.lineage)

    def decide(member: int, latest: Mapping[int, Latest]) -> ReadyExploit | None:
        rng = ready_rng(config.seed, member, latest[member].interval)
        return decide_at_ready(member, latest, config.strategy, explorer, rng, config.truncation_fraction, config.ties)

    def restart(interval: int, failure: Failure, latest: Mapping[int, Latest]) -> Restart:
        others = [point.result for m, point in sorted(latest.items()) if m != failure.member]
        count = failures.get(failure.member, 0)
        [planned] = plan_restarts(
            interval,
            [failure],
            others,
            failures,
            config.max_member_failures,
            config.agent.explored_space,
            ready_restart_rng(config.seed, failure.member, interval, count),
            config.strategy,
            config.truncation_fraction,
        )
        failures[failure.member] = planned.failures
        log_restarts([planned], "and trains its interval {} again")
        return planned

    settled = dict(latest)  # every member's last settled ready point, for the population's scalars
    best = {"named": checkpoint.best if checkpoint is not None else None}
    best["written"] = best["named"]  # the best ready point named so far, and the one best.json holds

    def is_best(point: Latest) -> bool:
        named = best["named"]
        if new_best([point.result], float(named["score"]) if named is not None else None) is None:
            return False
        best["named"] = {"score": point.result.score}
        return True

    def on_best(point: Latest, entry: dict) -> None:
        written = best["written"]
        if written is not None and not entry["score"] > written["score"]:  # a better one settled first
            (best_dir(config.run_dir) / entry["file"]).unlink(missing_ok=True)
            return
        write_best_record(config.run_dir, entry, written)
        best["written"] = entry

    def on_ready(point: Latest, exploit: ReadyExploit | None, rank: int, record: dict) -> None:
        settled[point.result.member] = point
        records.write_ready(record, [p.result.score for p in settled.values()])
        state = explorer.state()
        if state is not None:
            write_explorer_state(config.run_dir, explorer.name, state)
        log_ready(config.total_generations, point, exploit, rank)

    return Coordination(
        Schedule(placement, config.total_generations, done),
        decide,
        on_ready=on_ready,
        restart=restart,
        latest=latest,
        snapshot_on={m: config.owner(m) for m in latest},
        best=is_best,
        on_best=on_best,
    )


def worker_hooks(config: Config, rank: int, last: dict) -> WorkerHooks:
    """Every rank's part: train, score, move and checkpoint a member. ``last``: member -> its last
    result on this rank (for TensorBoard's HPARAMS tab at the end)."""
    space, names = config.agent.search_space, config.explored_names

    def train(member: Learner, should_stop) -> None:
        member.train(config.agent_training_steps, should_stop, config.schedule, None)

    def score(member: Learner) -> Scores:
        scores = member.evaluate()
        member.scores.append(scores.score)
        return scores

    def pack(member: Learner) -> dict:
        payload = member.member_state()
        member.close()
        last.pop(member.member_id, None)
        return payload

    def settled(member: Learner, point: Latest, exploit, restarts: tuple[Applied, ...], snapshot) -> dict:
        copied = exploit is not None and exploit.copies
        if copied:
            member.carry_score(exploit.donor_score_train)
        member.log_generation(point.result, copied)
        last[member.member_id] = point.result
        record = ready_record(point, exploit, restarts, space, names)
        payload = checkpoint_payload(member, config.run_id, point.interval, rng_state(), config.checkpoint_buffers)
        if copied:
            payload[READY_STATE] = as_tensors(snapshot[2])
        write_ready_checkpoint(
            config.run_dir,
            config.run_id,
            member.member_id,
            point.interval,
            dump_payload(payload),
            record,
            config.keep_checkpoints,
        )
        return record

    def keep_best(member: Learner, point: Latest) -> dict:
        record = {
            "member": member.member_id,
            "generation": point.interval,
            "score": point.result.score,
            "env_steps": point.result.env_steps,
        }
        payload = checkpoint_payload(member, config.run_id, point.interval, rng_state(), replay=False)
        data = dump_payload({**payload, "best": record})
        return {**write_best_file(config.run_dir, member.member_id, point.interval, data), **record}

    return WorkerHooks(
        train=train,
        score=score,
        pack=pack,
        keep_best=keep_best,
        adopt=lambda member_id, payload: restored(config, member_id, payload),
        settled=settled,
        rebuild=lambda member, planned, env_steps: rebuild_member(config, member, planned, env_steps),
        restarted=lambda member, planned: member.carry_score(planned.donor_score_train),
    )


def finish(comm, config, members, records, last, coordinator, stopped: bool, stop_request: StopRequest) -> None:
    """The last log lines, TensorBoard's HPARAMS tab after a complete run, and closing."""
    rank = comm.Get_rank()
    if stopped:
        if rank == 0:
            logger.warning(
                "stopped by %s: every member's last ready point is checkpointed in %s; --resume continues each "
                "from its own. Exit status %d.",
                stop_request.signal_name or "a signal on another rank",
                config.run_dir,
                EXIT_STOPPED,
            )
        elif stop_request.requested:
            logger.warning("stopped by %s", stop_request.signal_name)
    else:
        for member_id, member in members.items():
            if member_id in last:
                member.log_final(last[member_id])
    for member in members.values():
        member.close()
    if records is not None:
        records.close()
        if not stopped and coordinator is not None and coordinator.latest:
            points = coordinator.latest.values()
            best = max(points, key=lambda p: p.result.score if p.result.scored else -math.inf)
            logger.info(
                "done: best member %d scored %.2f (its interval %d); records in %s",
                best.result.member,
                best.result.score,
                best.interval,
                config.run_dir,
            )
    comm.Barrier()


def log_start(config: Config, checkpoint: ReadyCheckpoints | None) -> None:
    logger.info(
        "%s: %d members on %d ranks, asynchronous %s (%s explore), %d intervals x %d env steps per member; run dir %s",
        config.env_id,
        config.num_agents,
        config.world_size,
        config.strategy if config.strategy != "none" else "control (--strategy none)",
        config.explore,
        config.total_generations,
        config.agent_training_steps,
        config.run_dir,
    )
    if checkpoint is not None:
        done = checkpoint.intervals
        logger.info(
            "resumed from %s: intervals done per member %s",
            checkpoint.directory,
            ", ".join(f"{m}:{done.get(m, 0)}" for m in range(config.num_agents)),
        )


def log_ready(total: int, point: Latest, exploit: ReadyExploit | None, rank: int) -> None:
    result = point.result
    head = f"member {result.member} interval {point.interval}/{total} on rank {rank} at {point.wall:.1f}s"
    head += f": {result.score:.2f}"
    if exploit is None:
        logger.info("%s", head)
        return
    changes = ", ".join(exploit.exploit.changes)
    if not exploit.copies:
        logger.info("%s; keeps its weights: %s", head, changes)
        return
    logger.info(
        "%s <- member %d's interval %d (%.2f): %s",
        head,
        exploit.exploit.donor,
        exploit.donor_interval,
        exploit.exploit.donor_score,
        changes,
    )

"""The asynchronous driver (``--asynchronous``): what a run plugs into asynchronous PBT's transport
(evo.mpi.asynchronous: rank 0's coordination and every rank's worker hooks), with the session's
members, rules, best and records.

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
from collections.abc import Mapping

from evo.core.asynchronous import Latest, ReadyExploit, Schedule
from evo.core.evaluation import uninformative_scores
from evo.core.objective import ObjectiveNotReported, nonfinite_warning, unreported
from evo.core.restart import Failure, Restart, failures_by_member
from evo.core.result import MemberResult
from evo.learners.interface import Learner
from evo.mpi import exchange
from evo.mpi.asynchronous import Applied, Coordination, WorkerHooks, run_workers, snapshot_state
from evo.rundir.checkpoint import as_arrays, as_tensors, dump_payload
from evo.rundir.ready import (
    ReadyCheckpoints,
    members_dir,
    remove_stray_best_files,
    write_explorer_state,
    write_ready_checkpoint,
)
from evo.rundir.records import ready_record, result_of_record
from evo.runner.best import KeptBest
from evo.runner.final import final_pick
from evo.runner.generation import front_text, log_restarts, test_text, tie_text
from evo.runner.session import Session
from evo.runner.stopping import EXIT_STOPPED

logger = logging.getLogger("evo")

READY_STATE = "ready_state"
"""A member file's extra key when the member copied at its ready point: the weights that earned its
score there (its snapshot), which recipients copy until it reaches its next ready point."""


def run(session: Session, checkpoint: ReadyCheckpoints | None) -> int:
    """Train every member to its last interval, from scratch or from its own last checkpoint. Returns 0,
    or EXIT_STOPPED after a stop signal."""
    comm, rank = session.comm, session.rank
    run_dir = session.target.run_dir
    if rank == 0:
        members_dir(run_dir).mkdir(parents=True, exist_ok=True)  # a job script's sign to --resume
        remove_stray_best_files(run_dir, checkpoint.best if checkpoint is not None else None)
    exchange.barrier(comm)  # the run directory is as the run expects before any rank writes into it
    members, snapshots = build_members(session, checkpoint)
    plan = None
    best = KeptBest(session.target.run_id, checkpoint.best if checkpoint is not None else None)
    if rank == 0:
        log_start(session, checkpoint)
        plan = coordination(session, best, checkpoint)
    wall_origin = max((float(r["wall_s"]) for r in checkpoint.records), default=0.0) if checkpoint else 0.0
    last: dict[int, MemberResult] = {}
    report = run_workers(
        comm,
        members,
        worker_hooks(session, best, last),
        plan,
        session.stopper.poll,
        catch=session.rules.max_member_failures > 0,
        snapshots=snapshots,
        wall_origin=wall_origin,
    )
    halted = exchange.decide_on_root(comm, lambda: report.coordinator.halted)
    if halted is not None:
        raise halted
    stopped = session.stopper.agree()
    stopped_line = STOPPED.replace("{run_dir}", str(run_dir))
    done = None if stopped else done_line(session, report)
    finals = {} if stopped else last
    final = final_pick(session) if not stopped and session.final is not None else None
    if final is not None and final.stopped:  # the training is complete: a stop in the final pick alone
        stopped, stopped_line, done = True, final.line, None
    session.finish(members, stopped, stopped_line, finals, done)
    return EXIT_STOPPED if stopped else 0


STOPPED = (
    "stopped by {signal}: every member's last ready point is checkpointed in {run_dir}; --resume continues each "
    f"from its own. Exit status {EXIT_STOPPED}."
)
"""Rank 0's line after a stop ({signal} and {run_dir} are filled in)."""


def done_line(session: Session, report) -> str | None:
    """Rank 0's last line after a complete run: the best member's latest score (with several objectives,
    the first Pareto front of every member's latest ready point, also written to front.json)."""
    coordinator = report.coordinator
    if coordinator is None or not coordinator.latest:
        return None
    latest = [coordinator.latest[m] for m in sorted(coordinator.latest)]
    front = session.records.write_front({p.result.member: p.interval for p in latest}, [p.result for p in latest])
    if front is not None:
        return f"done: {front_text(front)}; records in {session.about.run_dir}"
    best = max(coordinator.latest.values(), key=lambda p: p.result.score if p.result.scored else -math.inf)
    return (
        f"done: best member {best.result.member} scored {best.result.score:.2f} (its interval {best.interval}); "
        f"records in {session.about.run_dir}"
    )


def build_members(session: Session, checkpoint: ReadyCheckpoints | None):
    """This rank's members (its placement's), new or each from its own last checkpoint, and the
    snapshots of their last ready points (what recipients copy from them)."""
    factory = session.members
    members: dict[int, Learner] = {}
    snapshots = {}
    saved = checkpoint.members if checkpoint is not None else {}
    for member_id in session.placement.members_of(session.rank):
        if member_id not in saved:
            members[member_id] = factory.new(member_id)
            continue
        entry = saved[member_id]
        member, payload = factory.resumed(member_id, entry.path, entry.interval)
        ready = payload.get(READY_STATE)
        state = as_arrays(ready) if ready is not None else snapshot_state(member)
        snapshots[member_id] = (entry.interval, member.env_steps, state)
        members[member_id] = member
    return members, snapshots


def coordination(session: Session, best: KeptBest, checkpoint: ReadyCheckpoints | None) -> Coordination:
    """Rank 0's part: the schedule, the decisions at ready points and at failures, and the records."""
    rules, records, placement = session.rules, session.records, session.placement
    run_dir = session.target.run_dir
    saved_explorer = checkpoint.explorer if checkpoint is not None else None
    explorer = rules.explorer(
        saved_explorer["state"] if saved_explorer and saved_explorer.get("name") == rules.explore else None
    )
    latest: dict[int, Latest] = {}
    for member in range(placement.num_agents):
        record = checkpoint.last_record(member) if checkpoint is not None else None
        if record is not None:
            latest[member] = Latest(
                record["interval"],
                result_of_record(record, session.space, session.rules.objective.columns),
                float(record["wall_s"]),
            )
    done = checkpoint.intervals if checkpoint is not None else {}
    failures = failures_by_member(records.lineage)
    settled = dict(latest)  # every member's last settled ready point, for the population's scalars
    said = []  # whether the evaluation scores were said to rank no one (said once)

    def restart(interval: int, failure: Failure, latest: Mapping[int, Latest]) -> Restart:
        planned = rules.ready_restart(interval, failure, latest, failures)
        log_restarts([planned], "and trains its interval {} again")
        return planned

    def halt(latest: Mapping[int, Latest]) -> ObjectiveNotReported | None:
        problem = unreported(rules.objective, [point.result for point in latest.values()])
        return None if problem is None else ObjectiveNotReported(f"{problem}; the run stops, its records kept")

    def on_ready(point: Latest, exploit: ReadyExploit | None, rank: int, record: dict) -> None:
        warning = nonfinite_warning(rules.objective, [point.result])
        if warning is not None:
            logger.warning("member %d interval %d: %s", point.result.member, point.interval, warning)
        settled[point.result.member] = point
        records.write_ready(record, [p.result for p in settled.values()])
        if not said and len(settled) == placement.num_agents:  # every member's latest score, once each has one
            warning = uninformative_scores([p.result for p in settled.values()], session.members.setup.eval_actions)
            if warning is not None:
                logger.warning("at member %d's interval %d, every member's latest scores: %s", point.result.member,
                               point.interval, warning)  # fmt: skip
                said.append(point.interval)
        state = explorer.state()
        if state is not None:
            write_explorer_state(run_dir, explorer.name, state)
        log_ready(session.budget.total_generations, point, exploit, rank)

    return Coordination(
        Schedule({m: placement.owner(m) for m in range(placement.num_agents)}, session.budget.total_generations, done),
        lambda member, latest: rules.at_ready(member, latest, explorer),
        on_ready=on_ready,
        restart=restart,
        latest=latest,
        snapshot_on={m: placement.owner(m) for m in latest},
        best=lambda point: best.names(point.result, point.interval),
        on_best=lambda point, entry: best.settle(run_dir, entry),
        halt=halt,
    )


def worker_hooks(session: Session, best: KeptBest, last: dict[int, MemberResult]) -> WorkerHooks:
    """Every rank's part: train, score, move and checkpoint a member. ``last``: member -> its last
    result on this rank (for TensorBoard's HPARAMS tab at the end)."""
    factory, target = session.members, session.target

    def pack(member: Learner) -> dict:
        payload = member.member_state()
        member.close()
        session.track_moved(member.member_id)
        last.pop(member.member_id, None)
        return payload

    def settled(member: Learner, point: Latest, exploit, restarts: tuple[Applied, ...], snapshot) -> dict:
        copied = exploit is not None and exploit.copies
        if copied:
            member.carry(exploit.donor_standing)
        member.log_generation(point.result, copied)
        session.track(point.result, point.interval, exploit.exploit.donor if copied else None)
        last[member.member_id] = point.result
        record = ready_record(point, exploit, restarts, session.space, session.names, session.rules.objective.columns)
        payload = factory.payload(member, point.interval)
        if copied:
            payload[READY_STATE] = as_tensors(snapshot[2])
        write_ready_checkpoint(
            target.run_dir, target.run_id, member.member_id, point.interval, dump_payload(payload), record, target.keep
        )
        return record

    return WorkerHooks(
        train=lambda member, should_stop: session.train(member, should_stop),
        score=session.score,
        pack=pack,
        keep_best=lambda member, point: best.keep_ready(target.run_dir, member, point.result, point.interval),
        adopt=factory.moved,
        settled=settled,
        rebuild=factory.rebuild,
        restarted=lambda member, planned: member.carry(planned.donor_standing),
    )


def log_start(session: Session, checkpoint: ReadyCheckpoints | None) -> None:
    rules, placement, budget = session.rules, session.placement, session.budget
    logger.info(
        "%s: %d members on %d ranks, asynchronous %s (%s explore), %d intervals x %d env steps per member; run dir %s",
        session.about.env_id,
        placement.num_agents,
        placement.world_size,
        rules.strategy if rules.strategy != "none" else "control (--strategy none)",
        rules.explore,
        budget.total_generations,
        budget.agent_training_steps,
        session.about.run_dir,
    )
    if checkpoint is not None:
        done = checkpoint.intervals
        logger.info(
            "resumed from %s: intervals done per member %s",
            checkpoint.directory,
            ", ".join(f"{m}:{done.get(m, 0)}" for m in range(placement.num_agents)),
        )


def log_ready(total: int, point: Latest, exploit: ReadyExploit | None, rank: int) -> None:
    result = point.result
    head = f"member {result.member} interval {point.interval}/{total} on rank {rank} at {point.wall:.1f}s"
    head += f": {result.score:.2f}"
    if exploit is None:
        logger.info("%s", head)
        return
    changes = ", ".join(exploit.exploit.changes) + tie_text(exploit.exploit) + test_text(exploit.exploit)
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

"""What a synchronous run plugs into the generation loop (evo/runner/loop.py): train, score, plan,
restart, keep the best, the records of a generation and its checkpoint (:func:`generation_hooks`),
and the lines it logs. A stage's rung plugs in hooks of its own (evo/runner/stages.py) and shares
:func:`rank_timing` and :func:`write_timing`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

import numpy as np

from evo.core.evaluation import uninformative_scores
from evo.core.explorers import Explorer
from evo.core.objective import ObjectiveNotReported, nonfinite_warning, unreported
from evo.core.plan import Exploit
from evo.core.progress import ProgressReporter
from evo.core.restart import Restart, failures_by_member
from evo.core.result import MemberResult
from evo.learners.interface import Learner
from evo.mpi import exchange
from evo.rundir.checkpoint import write_checkpoint
from evo.rundir.records import RankTiming, RunRecords
from evo.runner.best import KeptBest
from evo.runner.loop import GenerationReport, Hooks, StepTimes
from evo.runner.session import Session

logger = logging.getLogger("evo")


def generation_hooks(
    session: Session,
    members: Mapping[int, Learner],
    explorer: Explorer,
    reporter: ProgressReporter | None = None,
    best: KeptBest | None = None,
    stages=None,
) -> Hooks:
    """The run's steps of the generation loop: train, score, plan, records, checkpoints; with
    ``reporter`` (rank 0), the generation's progress while its members train; with ``best``, the best
    member so far kept and checkpointed; with ``stages`` (evo.runner.stages.Stages), the stages' book
    kept and the loop paused when a distillation is due."""
    comm, rules, factory = session.comm, session.rules, session.members
    first = min(members)
    failures = failures_by_member(session.records.lineage) if session.records is not None else {}  # rank 0's
    said = []  # whether the evaluation scores were said to rank no one (said once)

    def train(member: Learner, should_stop) -> None:
        if reporter is not None and member.member_id == first:
            reporter.begin(reporter.progress.generation + 1)
        session.train(member, should_stop, reporter)

    def records(report: GenerationReport) -> dict | None:
        run_state = after_exchange(session, members, explorer, report, reporter)
        return stages.record(report.population, run_state) if stages is not None else run_state

    def plan(generation: int, population: list[MemberResult]) -> list[Exploit] | ObjectiveNotReported:
        problem = unreported(rules.objective, population)  # the probe env at start-up may not have told
        if problem is not None:
            return ObjectiveNotReported(f"generation {generation}: {problem}; the run stops, its records kept")
        warning = nonfinite_warning(rules.objective, population)
        if warning is not None:
            logger.warning("generation %d: %s", generation, warning)
        if not said and (warning := uninformative_scores(population, factory.setup.eval_actions)) is not None:
            logger.warning("generation %d: %s", generation, warning)
            said.append(generation)
        return rules.plan(generation, population, explorer)

    return Hooks(
        train=train,
        score=session.score,
        plan=plan,
        records=records,
        snapshot=lambda generation, run_state: (generation, factory.files(members, generation), run_state),
        save=lambda saved: write_checkpoint(comm, session.target, *saved, best=best),
        restart=lambda generation, failed, scored, recipients, round_: rules.restarts(
            generation, failed, scored, failures, recipients, round_
        ),
        rebuild=factory.rebuild,
        restarted=lambda member, planned: member.carry(planned.donor_standing),
        best=(lambda g, population: best.beats(g, population, rules.tiebreak(g, population)))
        if best is not None
        else None,
        keep_best=best.keep if best is not None else None,
        pause=(lambda report: stages.ready(report.generation)) if stages is not None else None,
    )


def after_exchange(
    session: Session,
    members: Mapping[int, Learner],
    explorer: Explorer,
    report: GenerationReport,
    reporter: ProgressReporter | None = None,
) -> dict | None:
    """The records step (collective): recipients carry their donors' training scores over, the
    generation's progress report ends, then the records are written; returns rank 0's run state."""
    carry_donor_scores(session.comm, members, report)
    if reporter is not None:
        reporter.end()
    return write_records(session, members, explorer, report)


def carry_donor_scores(comm, members: Mapping[int, Learner], report: GenerationReport) -> None:
    """Collective: each recipient on this rank takes its donor's standing of the generation (its training
    score, objectives and outcomes: rank 0 knows the population and broadcasts them), so that until it
    finishes an episode with its new weights it is scored by what those weights last scored, not NaN."""
    standings = None
    if report.population is not None:
        by_id = {result.member: result.standing for result in report.population}
        standings = {donor: by_id[donor] for donor in set(report.donors.values())}
    standings = exchange.broadcast(comm, standings)
    for recipient, donor in report.donors.items():
        if recipient in members:
            members[recipient].carry(standings[donor])


def write_records(
    session: Session, members: Mapping[int, Learner], explorer: Explorer, report: GenerationReport
) -> dict | None:
    """Every rank: its members' TensorBoard rows, and its timing to rank 0 (collective). Rank 0:
    population.csv, lineage.jsonl, generations.csv, the log line; returns the run state for the
    checkpoint (None on other ranks)."""
    for result in report.results:
        members[result.member].log_generation(result, result.member in report.donors)
        session.track(result, report.generation, report.donors.get(result.member))
    per_rank = exchange.gather_to_root(session.comm, [rank_timing(report.times)])
    records = session.records
    if records is None:
        return None
    elapsed = time.perf_counter() - report.times.started
    records.write_generation(report.generation, report.population, report.exploits, report.restarts)
    trained = write_timing(records, report.generation, elapsed, per_rank)
    run_state = {"lineage": list(records.lineage), "population_step": records.population_step}
    state = explorer.state()
    if state is not None:
        run_state["explorer"] = {"name": explorer.name, "state": state}
    log_generation(
        session.budget.total_generations, report.generation, report.population, report.exploits, elapsed, trained
    )
    log_restarts(report.restarts)
    return run_state


def write_timing(records: RunRecords, generation: int, elapsed: float, per_rank: Sequence[RankTiming]) -> int:
    """Rank 0: the generation's row of generations.csv (its wall time ``elapsed``, env steps per second,
    the slowest rank's parts of ``per_rank``); returns the env steps every rank trained."""
    trained = sum(t.trained for t in per_rank)
    records.write_timing(generation, elapsed, trained, per_rank)
    return trained


def rank_timing(times: StepTimes, extra_exchange_s: float = 0.0) -> RankTiming:
    """Seconds this rank spent in each part of the generation (``extra_exchange_s``: what a rung's cut
    and move took after the loop's exchange)."""
    return RankTiming(
        trained=times.env_steps,
        train_s=times.trained - times.started,
        score_s=times.scored - times.agreed,
        wait_s=(times.agreed - times.trained) + (times.gathered - times.scored),
        exchange_s=times.exchanged - times.gathered + extra_exchange_s,
    )


def explorer_state(manifest: Mapping, name: str) -> dict | None:
    """The explorer's state a checkpoint holds (runs from before the explorer registry kept PB2's
    under ``pb2``)."""
    saved = manifest.get("explorer")
    if saved is not None:
        return saved["state"] if saved.get("name") == name else None
    return manifest.get("pb2") if name == "pb2" else None


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
    kept = sum(exploit.donor == exploit.recipient for exploit in exploits)
    refused = sum(exploit.test is not None and not exploit.test.copies for exploit in exploits)
    logger.info(
        "gen %d/%d  env steps/member %d  best %.2f  mean %.2f  copies %d%s%s  %.1fs  %.0f env-steps/s",
        generation,
        total_generations,
        max(result.env_steps for result in population),
        np.nanmax(scores) if finite else float("nan"),
        np.nanmean(scores) if finite else float("nan"),
        len(exploits) - kept,
        f" (+{kept - refused} tied: explored without a copy)" if kept - refused else "",
        f" (+{refused} not better by Welch's t-test: explored without a copy)" if refused else "",
        elapsed,
        trained / elapsed,
    )
    for exploit in exploits:
        changes = ", ".join(exploit.changes) + tie_text(exploit) + test_text(exploit)
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


def tie_text(decision: Exploit | Restart) -> str:
    """An exploit's or a restart's tie, said (empty without one): which members tied, and who broke it."""
    if not decision.tie:
        return ""
    return f" ({tie_words(decision.tie)})"


def test_text(exploit: Exploit) -> str:
    """An exploit's Welch test (``--exploit-test welch``), said (empty without one): the donor it tested, t and
    p, and whether the recipient copied."""
    test = exploit.test
    if test is None:
        return ""
    if test.p != test.p:  # NaN: fewer than two outcomes on a side
        return (
            f" (member {test.donor} not tested: Welch's t-test needs two scored episodes on each side, it had "
            f"{test.n_donor} and {test.n_recipient}; no copy)"
        )
    said = f"Welch's t-test against member {test.donor}: t {test.t:.2f}, p {test.p:.3g}"
    if test.copies:
        return f" ({said} < {test.alpha:g})"
    return f" ({said} >= {test.alpha:g}: not better, no copy)"


def tie_words(tie: Sequence[int]) -> str:
    """A tie, said: which members tied, and who broke it."""
    return f"members {', '.join(map(str, tie))} tied: broken by the run's draw, not the member id"


def front_text(front: Sequence[Mapping]) -> str:
    """The final first Pareto front (front.json's entries), for the run's last line."""
    members = "; ".join(
        f"member {entry['member']} ({', '.join(f'{name} {value:.4g}' for name, value in entry['objectives'].items())})"
        for entry in front
    )
    return f"the first front has {len(front)} member(s): {members or 'none (no member has every objective)'}"


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
            ", ".join(restart.changes) + tie_text(restart),
        )

"""The synchronous driver: the population trains generations together, every rank at the same one.

It builds this rank's members (new, or from the checkpoint a ``--resume`` found), writes the initial
population as generation 0's checkpoint, and runs the generation loop (evo/runner/loop.py) with the
hooks of evo/runner/generation.py: train, score, keep the best, plan, exchange, records, checkpoint.
With BG-PBT's stages, the loop pauses when a stage is due and the stage's rungs run as generations of
the same loop with hooks of their own (evo/runner/stages.py), then PBT goes on with a fresh explorer.
"""

from __future__ import annotations

import logging

import numpy as np

from evo.core.selection import NO_PBT
from evo.rundir.checkpoint import Checkpoint, write_checkpoint
from evo.runner.best import KeptBest
from evo.runner.final import FinalOutcome, final_pick
from evo.runner.generation import explorer_state, front_text, generation_hooks
from evo.runner.loop import LoopOutcome, LoopSettings, run_generations
from evo.runner.session import Session
from evo.runner.stages import Stages
from evo.runner.stopping import EXIT_STOPPED

logger = logging.getLogger("evo")


def run(session: Session, checkpoint: Checkpoint | None) -> int:
    """Train the population up to its last generation, from scratch or from ``checkpoint``. Returns the
    exit status: 0, or EXIT_STOPPED after a stop signal (a checkpoint of the last generation boundary
    is then on disk)."""
    comm, rank, budget = session.comm, session.rank, session.budget
    start = checkpoint.generation if checkpoint is not None else 0
    members = session.members.build(session.placement.members_of(rank), rank, checkpoint)
    if rank == 0:
        log_start(session, start, checkpoint)
    if checkpoint is None:  # the initial population, so that a stop in generation 1 can resume
        lineage = list(session.records.lineage) if session.records is not None else []  # --init-from's line
        write_checkpoint(
            comm, session.target, 0, session.members.files(members, 0), {"lineage": lineage, "population_step": 0}
        )
    manifest = checkpoint.manifest if checkpoint is not None else {}
    explorer = session.rules.explorer(explorer_state(manifest, session.rules.explore))
    reporter = session.progress(start, len(members))
    best = KeptBest.of_checkpoint(session.target.run_id, checkpoint)
    stages = Stages(session, checkpoint, best) if session.stages is not None else None
    hooks = generation_hooks(session, members, explorer, reporter, best, stages)
    while True:
        if stages is not None and stages.ready(start):
            outcome = stages.distil(members, start, checkpoint)
            if outcome.stopped:
                break
            start = outcome.completed
            # a new stage's explorer starts afresh (BG-PBT resets its GP's data)
            hooks = generation_hooks(session, members, session.rules.explorer(), reporter, best, stages)
        settings = LoopSettings(
            start,
            budget.total_generations,
            session.transport,
            session.checkpoint_every,
            session.rules.max_member_failures,
        )
        outcome = run_generations(comm, members, session.placement.owner, hooks, settings, session.stopper)
        if not outcome.paused:
            break
        start, checkpoint = outcome.completed, None
    complete = not outcome.stopped and outcome.last is not None
    final = final_pick(session) if complete and session.final is not None else None
    finish(session, members, outcome, final)
    return EXIT_STOPPED if outcome.stopped or (final is not None and final.stopped) else 0


def finish(session: Session, members, outcome: LoopOutcome, final: FinalOutcome | None = None) -> None:
    """The end of the run: the stop's or the last generation's lines, TensorBoard's HPARAMS tab after a
    complete run, every member and the records closed; ``final``: how the final pick ended (a stop there
    ends the run as stopped, its training complete)."""
    complete = not outcome.stopped and outcome.last is not None
    finals = {result.member: result for result in outcome.last.results} if complete else {}
    done = None
    if complete and outcome.last.population is not None:
        population = outcome.last.population
        best = max(population, key=lambda result: result.score if result.scored else -np.inf)
        done = f"done: best member {best.member} scored {best.score:.2f}; records in {session.about.run_dir}"
        front = session.records.write_front({r.member: outcome.last.generation for r in population}, population)
        if front is not None:  # several objectives: the final first Pareto front, also in front.json
            done = f"done: {front_text(front)}; records in {session.about.run_dir}"
    stopped = (
        f"stopped by {{signal}}: checkpoint of generation {outcome.completed} is in {session.about.run_dir}; the "
        f"partial generation {outcome.completed + 1} is redone on --resume. Exit status {EXIT_STOPPED}."
    )
    if final is not None and final.stopped:
        session.finish(members, True, final.line, finals, None)
        return
    session.finish(members, outcome.stopped, stopped, finals, done)


def log_start(session: Session, start: int, checkpoint: Checkpoint | None) -> None:
    rules, about, budget = session.rules, session.about, session.budget
    logger.info(
        "%s: %d members on %d ranks, %s selection, %s exchange, generations %d..%d x %d env steps; run dir %s",
        about.env_id,
        session.placement.num_agents,
        session.placement.world_size,
        f"{rules.strategy} ({rules.explore} explore)" if rules.strategy != NO_PBT else "no (control: --strategy none)",
        session.transport,
        start + 1,
        budget.total_generations,
        budget.agent_training_steps,
        about.run_dir,
    )
    if checkpoint is not None:
        logger.info("resumed from %s (generation %d)", checkpoint.directory, start)
    if budget.schedule:
        logger.info(
            "following the schedule in %s: %d segment(s), changes at env steps %s",
            about.schedule_file,
            len(budget.schedule),
            ", ".join(str(steps) for steps, _ in budget.schedule[1:]) or "none",
        )

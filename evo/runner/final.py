"""The final pick of a complete run (``--final-eval EPISODES --final-top K``), in either mode.

Once every member has trained its last generation (an asynchronous run: its last interval), rank 0 reads the
final population from the records (population.csv's last rows: each member's selection score there, and
whether it copied a donor there) and names the candidates (evo.core.final.candidates) and the member file
that holds each (the last checkpoint's, or each member's last ready point's). Candidate j is played by rank
j mod the ranks, from its file, on EPISODES episodes of one fresh env seeded as evo-evaluate seeds its own
(evo.core.streams.evaluation_seed; actions and Procgen levels as evo.core.final.FinalSettings says), so that
``evo-evaluate RUN --episodes EPISODES`` plays the same episodes. Each rank writes each candidate's result
as it finishes (evo.rundir.final); rank 0 gathers them, writes ``final.json`` and logs the pick.

A stop request ends the candidate being played at its next env step (its episodes are dropped) and the
rest are not begun; the run ends with exit status 75, its training complete. ``--resume`` then finds
nothing left to train and plays only the candidates without a result (:func:`final_pending`,
:func:`run_final_only`). The final pick is the member ``evo-export --member best`` exports
(evo.tools.saved.final_pick).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from evo.core.final import Candidate, FinalSettings, Standing, candidates, fresh_score, pick
from evo.mpi import exchange
from evo.rundir.final import final_done, read_results, remove_other_results, write_final, write_result
from evo.runner.stopping import EXIT_STOPPED

logger = logging.getLogger("evo")


def final_pending(comm, run_dir: Path, settings: FinalSettings | None) -> bool:
    """Collective: whether the run in ``run_dir`` still has its final pick to make (``final.json`` does not
    hold one made as ``settings`` say); rank 0 reads, every rank learns it."""
    if settings is None:
        return False
    return exchange.decide_on_root(comm, lambda: not final_done(run_dir, settings.how))


@dataclass(frozen=True)
class FinalOutcome:
    """How the final pick ended: ``stopped`` by a stop request (``line``: rank 0's stop line), or made
    (``line``: rank 0's summary of the pick)."""

    stopped: bool
    line: str = ""


@dataclass(frozen=True)
class Plan:
    """Rank 0's decision, broadcast: the candidates in selection order, the file holding each, those
    already played (their results), and the members left out (they copied a donor at the last generation)."""

    chosen: tuple[Candidate, ...]
    files: dict[int, str]
    done: dict[int, dict]
    left_out: tuple[Standing, ...]

    @property
    def todo(self) -> list[Candidate]:
        return [candidate for candidate in self.chosen if candidate.member not in self.done]


def final_population(session, settings: FinalSettings) -> list[Standing]:
    """Rank 0: every member's last row of population.csv (its selection score at the run's last generation or
    interval, and the donor it copied there)."""
    from evo.rundir.history import load_run

    history = load_run(session.target.run_dir)
    rows = [row for row in history.rows if row.generation == settings.generation]
    return [
        Standing(row.member, row.generation, row.env_steps, row.score, row.source[0] if row.source else None)
        for row in rows
    ]


def member_files(session, settings: FinalSettings) -> dict[int, Path]:
    """Rank 0: the file of each member at the run's last generation (the last complete checkpoint's, or an
    asynchronous run's last ready point of each member)."""
    from evo.rundir.checkpoint import latest
    from evo.rundir.ready import latest_ready

    target = session.target
    if settings.asynchronous:
        ready, _ = latest_ready(target.run_dir, target.run_id, target.num_agents)
        return {m: entry.path for m, entry in ready.members.items() if entry.interval == settings.generation}
    checkpoint, _ = latest(target.run_dir, target.run_id)
    if checkpoint is None or checkpoint.generation != settings.generation:
        return {}
    return {int(m): checkpoint.member_path(int(m)) for m in checkpoint.manifest["members"]}


def plan(session, settings: FinalSettings) -> Plan:
    """Rank 0: the candidates, their files and what is already played (see :class:`Plan`)."""
    population = final_population(session, settings)
    chosen, left_out = candidates(population, settings.top, session.rules.tiebreak(settings.generation, population))
    files = member_files(session, settings)
    missing = [c.member for c in chosen if c.member not in files]
    if missing:
        raise RuntimeError(
            f"the final pick's member(s) {missing} have no complete checkpoint of generation {settings.generation} "
            f"in {session.target.run_dir}"
        )
    run_dir = session.target.run_dir
    remove_other_results(run_dir, [c.member for c in chosen])
    done = read_results(run_dir, settings.how, chosen)
    return Plan(tuple(chosen), {c.member: str(files[c.member]) for c in chosen}, done, tuple(left_out))


def play(member, env, episodes: int, info_keys, deterministic: bool, seed: int, on_step):
    """``member``'s returns and info values on ``episodes`` episodes of ``env`` (evo.sb3.stock.play_recorded,
    evo-evaluate's way of playing), ``on_step`` called at every env step."""
    from evo.sb3.stock import play_recorded

    return play_recorded(member, env, episodes, info_keys, deterministic, seed, on_step=on_step)


def fresh_env(session, settings: FinalSettings, info_keys: tuple[str, ...]):
    """One env of the run's, seeded with the fresh seed (Procgen: on the held-out levels), made as
    evo-evaluate makes its own (evo.tools.evaluate.evaluation_env)."""
    from evo.sb3.envs import make_env

    setup = session.members.setup
    start, count = settings.levels if settings.levels is not None else (0, 0)
    return make_env(
        setup.env.env_id,
        1,
        settings.seed,
        setup.env.distribution_mode,
        count,
        start,
        env_kwargs=dict(setup.env.env_kwargs),
        info_keys=info_keys,
        frame_stack=setup.agent.frame_stack,
        wrappers=setup.agent.env_wrapper,
    )


def play_candidate(session, settings: FinalSettings, candidate: Candidate, path: str) -> dict | None:
    """This rank plays ``candidate`` from its file and writes its result; None if a stop request ended it."""
    from evo.rundir.checkpoint import load_payload

    payload = load_payload(Path(path))
    if int(payload["num_timesteps"]) != candidate.env_steps:
        raise RuntimeError(
            f"{path}: holds member {candidate.member} at {payload['num_timesteps']} env steps, not at the "
            f"{candidate.env_steps} of its last row in population.csv"
        )
    objective = session.members.setup.objective
    term = objective.terms[0]
    member = session.members.make(candidate.member, payload["hparams"], tensorboard=False)
    env = None
    played, steps = None, [0]
    try:
        note = member.restore(payload)
        if note:
            logger.warning("member %d: %s", candidate.member, note)
        env = fresh_env(session, settings, objective.info_keys)
        heartbeat = session.watchdog.beating(session.stopper.poll, ends=True)

        def on_step() -> None:
            steps[0] += 1
            heartbeat()

        what = f"member {candidate.member} ({session.about.env_id}) in the final pick's episodes"
        with session.watchdog.watching(what):
            keys = objective.info_keys
            played = play(member, env, settings.episodes, keys, settings.deterministic, settings.seed, on_step=on_step)
    finally:
        if env is not None:
            env.close()
        member.close()
    if played is None:
        return None
    returns, infos = played
    raw = returns if term.key is None else infos.get(term.key, [])
    result = {
        "how": settings.how,
        "member": candidate.member,
        "generation": candidate.generation,
        "env_steps": candidate.env_steps,
        "returns": [float(r) for r in returns],
        "values": [term.oriented(float(v)) for v in raw],
        "env_steps_played": steps[0],
    }
    write_result(session.target.run_dir, result)
    return result


def final_pick(session) -> FinalOutcome:
    """Collective: the final pick of the run (see the module docstring), on every rank."""
    settings: FinalSettings = session.final
    comm, rank = session.comm, session.rank
    decided = exchange.decide_on_root(comm, lambda: plan(session, settings))
    mine = []
    for index, candidate in enumerate(decided.todo):
        if index % comm.Get_size() != rank:
            continue
        if session.stopper.poll():
            break
        result = play_candidate(session, settings, candidate, decided.files[candidate.member])
        if result is None:
            break
        mine.append(result)
    played = exchange.gather_to_root(comm, mine)
    stopped = session.stopper.agree()
    if rank != 0:
        return FinalOutcome(stopped)
    results = {**decided.done, **{result["member"]: result for result in played}}
    if stopped:
        return FinalOutcome(True, stopped_line(session, decided, results))
    return FinalOutcome(False, report(session, settings, decided, results))


def stopped_line(session, decided: Plan, results: dict[int, dict]) -> str:
    run_dir = session.target.run_dir
    return (
        f"stopped by {{signal}} during the final pick: training is complete; {len(results)} of {len(decided.chosen)} "
        f"members played ({run_dir / 'final'}); --resume plays the rest. Exit status {EXIT_STOPPED}."
    )


def record(settings: FinalSettings, decided: Plan, results: dict[int, dict], run_dir: Path):
    """final.json's record (docs/records.md) and the pick."""
    fresh = {member: fresh_score(result["values"]) for member, result in results.items()}
    chosen = decided.chosen
    picked = pick(chosen, {c.member: fresh[c.member] for c in chosen})
    members = []
    for candidate in chosen:
        score, result = fresh[candidate.member], results[candidate.member]
        members.append(
            {
                "member": candidate.member,
                "generation": candidate.generation,
                "env_steps": candidate.env_steps,
                "selection_score": candidate.selection_score,
                "fresh_mean": score.mean,
                "fresh_standard_error": score.standard_error,
                "fresh_episodes": score.count,
                "selection_bias": candidate.selection_score - score.mean,
                "env_steps_played": result["env_steps_played"],
                "file": str(Path(decided.files[candidate.member]).relative_to(run_dir)),
            }
        )
    by_member = {entry["member"]: entry for entry in members}
    return picked, {
        "how": settings.how,
        "members": members,
        "left_out": [{"member": s.member, "selection_score": s.score, "copied": s.donor} for s in decided.left_out],
        "pick": {key: by_member[picked.member][key] for key in ("member", "generation", "env_steps", "file")},
        "selection_pick": picked.selection_member,
        "tie": picked.tie,
        "env_steps": sum(entry["env_steps_played"] for entry in members),
    }


def report(session, settings: FinalSettings, decided: Plan, results: dict[int, dict]) -> str:
    """Rank 0: final.json written and the pick logged; returns the summary line."""
    run_dir = Path(session.target.run_dir)
    if not decided.chosen:  # every member scored NaN: there is nothing to play
        write_final(run_dir, {"how": settings.how, "members": [], "left_out": [], "pick": None,
                              "selection_pick": None, "tie": None, "env_steps": 0})  # fmt: skip
        line = "final pick: none, as no member of the final population has a finite selection score"
        logger.warning("%s; evo-export --member best takes the best selection score", line)
        return line
    picked, written = record(settings, decided, results, run_dir)
    write_final(run_dir, written)
    levels = f", levels {settings.levels[0]}-{sum(settings.levels) - 1}" if settings.levels else ""
    logger.info(
        "final pick: the top %d member(s) by selection score (%s), each on the same %d fresh episodes (env seed %d, "
        "%s actions%s)",
        len(decided.chosen),
        settings.score,
        settings.episodes,
        settings.seed,
        settings.actions,
        levels,
    )
    for entry in written["members"]:
        logger.info(
            "  member %d: selection %.2f, fresh %.2f ± %.2f, selection bias %+.2f",
            entry["member"],
            entry["selection_score"],
            entry["fresh_mean"],
            entry["fresh_standard_error"],
            entry["selection_bias"],
        )
    where = "its last ready point" if settings.asynchronous else "the last generation"
    for entry in written["left_out"]:
        logger.info(
            "  member %d (selection %.2f) left out: it copied member %d at %s (its file holds those weights)",
            entry["member"],
            entry["selection_score"],
            entry["copied"],
            where,
        )
    if picked.tie is not None:
        logger.info("  %s", picked.tie)
    chosen = next(entry for entry in written["members"] if entry["member"] == picked.member)
    line = (
        f"final pick: member {picked.member} (fresh {chosen['fresh_mean']:.2f} ± {chosen['fresh_standard_error']:.2f}"
        f"; by selection score alone member {picked.selection_member}), {written['env_steps']} env steps played"
    )
    logger.info("%s; %s", line, run_dir / "final.json")
    return line


def run_final_only(session) -> int:
    """A resumed run whose training is complete: its final pick alone (the candidates not yet played), then
    the end of the run. Returns the exit status."""
    outcome = final_pick(session)
    done = None if outcome.stopped else f"done: {outcome.line}; records in {session.about.run_dir}"
    session.finish({}, outcome.stopped, outcome.line, {}, done)
    return EXIT_STOPPED if outcome.stopped else 0

"""``evo-evaluate RUN``: every member of a run's last checkpoint (and its kept best) played again on
fresh episodes, the honest number behind a population's "best".

A member's selection score is the mean of a few noisy episodes, and the population's best is the
highest of several such means: reporting it overstates the member. Here each member plays
``--episodes`` (default 20) deterministic episodes on env seeds that no env of the run had
(:func:`evo.tools.saved.evaluation_seed`: the run's seed on a stream of its own, the same episodes for
every member) and the tool prints each member's mean, std, min and max; ``--json FILE`` writes the
returns too. For Procgen, ``--start-level``/``--num-levels`` choose test levels (a range disjoint
from the run's training and selection levels); without them the levels are drawn from the whole
distribution by the fresh seed.

``--actions`` says how a member acts: ``deterministic`` (the most likely action: argmax, or the
Gaussian's mean), or ``sampled`` from its policy (seeded by the evaluation seed, so the same for every
member). The default, ``auto``, samples for Procgen, as DrAC's test.py evaluates: argmax play of a
barely trained Procgen policy often repeats one action (an agent that only fires), and reports that
action's return rather than the policy's; elsewhere it is deterministic, as SB3's and
rl-baselines3-zoo's evaluations are.

    evo-evaluate runs/my-run --episodes 20 --json fresh.json
    python -m evo.tools.evaluate runs/procgen-run --start-level 10000 --num-levels 1000

The episodes run one after another on ``--envs`` envs (default 1: one env whose episodes follow
from one seed, as SB3's ``evaluate_policy`` plays them; an exported agent replays them with the
same seed, see docs/running.md). A run with an objective of its own (``--objective info:<key>``) is
reported on it too: each info key's mean over the episodes (``--objective`` gives another, e.g.
``--objective info:success`` for a run that selected on the return); each member's env parameters
are set on its envs. Nothing is written into RUN. Exit status 2 on bad input (a run
directory that cannot be read, a ``--json`` that cannot be written included). A kept best that is lost
(its file missing or damaged) is left out with a warning naming the file and why; ``--member best`` and
``best-ever`` are refused for a run that has trained no member yet, whose members evaluate with a
warning.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evo.core.objective import parse_objective
from evo.rundir.jsontext import dumps
from evo.tools.saved import BEST, BEST_EVER, LostBest, MemberFile, SavedRun, SavedRunError
from evo.tools.video import add_video_arguments, record_saved, video_problems

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Evaluation:
    """One member's fresh returns."""

    member: MemberFile
    returns: list[float]
    objectives: dict[str, list[float]] = field(default_factory=dict)
    """Each info key of the objective, at the end of each episode that reported it."""

    def summary(self) -> dict[str, float]:
        values = np.asarray(self.returns, dtype=float)
        return {
            "mean": float(values.mean()),
            "std": float(values.std()),
            "min": float(values.min()),
            "max": float(values.max()),
        }

    def objective_means(self) -> dict[str, float]:
        """Each info key's mean over the episodes that reported it (NaN: none did)."""
        return {key: float(np.mean(values)) if values else math.nan for key, values in self.objectives.items()}

    def to_dict(self) -> dict:
        chosen = self.member
        return {
            "member": chosen.member,
            "label": chosen.label,
            "generation": chosen.generation,
            "env_steps": chosen.env_steps,
            "score": None if math.isnan(chosen.score) else chosen.score,
            **self.summary(),
            "returns": self.returns,
            **({"objectives": {f"info:{k}": v for k, v in self.objectives.items()}} if self.objectives else {}),
        }


def evaluation_env(
    run: SavedRun,
    seed: int,
    n_envs: int = 1,
    start_level: int | None = None,
    num_levels: int | None = None,
    info_keys: tuple[str, ...] = (),
):
    """The run's env as a fresh VecEnv of ``n_envs`` seeded with ``seed`` (Procgen: levels
    ``start_level`` .. + ``num_levels``, or the run's evaluation levels' distribution; its frames stacked as
    the members' were)."""
    from evo.sb3.envs import make_env

    config = run.config
    return make_env(
        config.env_id,
        n_envs,
        seed,
        config.distribution_mode,
        0 if num_levels is None else num_levels,
        0 if start_level is None else start_level,
        env_kwargs=dict(config.env_kwargs),
        info_keys=info_keys,
        frame_stack=config.agent.frame_stack,
        wrappers=config.agent.env_wrapper,
    )


ACTIONS = ("auto", "sampled", "deterministic")


def deterministic_actions(actions: str, env_id: str) -> bool:
    """Whether ``--actions`` plays the most likely action: ``auto`` samples for Procgen only."""
    from evo.config.envnames import procgen_game

    if actions == "auto":
        return procgen_game(env_id) is None
    return actions == "deterministic"


def evaluate_members(
    run: SavedRun,
    chosen: Sequence[MemberFile],
    episodes: int,
    seed: int,
    n_envs: int = 1,
    start_level: int | None = None,
    num_levels: int | None = None,
    deterministic: bool = True,
    info_keys: tuple[str, ...] | None = None,
) -> list[Evaluation]:
    """Each of ``chosen`` on the same ``episodes`` fresh episodes (env seed ``seed``; sampled actions
    drawn from a generator seeded with it), with each of ``info_keys`` at their ends (default: those of
    the run's objective)."""
    from evo.sb3.stock import play_recorded
    from evo.tools.saved import load

    keys = run.config.objective.info_keys if info_keys is None else tuple(info_keys)
    results = []
    for member_file in chosen:
        member = load(run, member_file)
        env = evaluation_env(run, seed, n_envs, start_level, num_levels, keys)
        try:
            played = play_recorded(member, env, episodes, keys, deterministic, seed)
            results.append(Evaluation(member_file, *played))
        finally:
            env.close()
            member.close()
    return results


def members_to_evaluate(
    run: SavedRun, member: str | None, generation: int | None, warn: Callable[[str], None] = logger.warning
) -> list[MemberFile]:
    """``--member`` (one member, ``best`` or ``best-ever``), or every member of the checkpoint and
    the kept best when there is one. ``warn`` is given what the user should know: members that have
    not trained, a kept best that is lost (left out)."""
    from evo.tools.saved import best_ever, choose, population, untrained_warning

    if member is not None:
        chosen = [choose(run, member, generation)]
        if member not in (BEST, BEST_EVER) and (note := untrained_warning(chosen)):
            warn(note)
        return chosen
    chosen = population(run, generation)
    if note := untrained_warning(chosen):
        warn(note)
    kept = None
    if generation is None:
        try:
            kept = best_ever(run)
        except LostBest as lost:
            warn(f"the kept best is left out, as it is lost: {lost.why}; every member is evaluated")
    return chosen + ([kept] if kept is not None else [])


def table(results: Sequence[Evaluation], episodes: int) -> str:
    """The printed table: member, generation, env steps, selection score, fresh mean/std/min/max of the
    return, and the fresh mean of each info key of the objective."""
    keys = list(results[0].objectives) if results else []
    header = (
        "member",
        "generation",
        "env steps",
        "score",
        f"mean ({episodes})",
        "std",
        "min",
        "max",
        *(f"info:{key}" for key in keys),
    )
    rows = [header]
    for result in results:
        chosen, summary, means = result.member, result.summary(), result.objective_means()
        rows.append(
            (
                chosen.label,
                str(chosen.generation),
                str(chosen.env_steps),
                f"{chosen.score:.2f}",
                *(f"{summary[key]:.2f}" for key in ("mean", "std", "min", "max")),
                *(f"{means[key]:.3g}" for key in keys),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evo-evaluate", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (--run-dir of the run)")
    parser.add_argument("--episodes", type=int, default=20, help="fresh episodes per member (default 20)")
    parser.add_argument(
        "--actions",
        choices=ACTIONS,
        default="auto",
        help="deterministic (argmax, or the mean) or sampled from the policy; auto (default): sampled for "
        "Procgen, as DrAC's test.py plays it, deterministic elsewhere",
    )
    parser.add_argument(
        "--member",
        default=None,
        help=f"one member only: an id, {BEST} (the run's final pick where it made one, --final-eval; else the last "
        f"checkpoint's best selection score) or {BEST_EVER} (the kept best); default every member and the kept best",
    )
    parser.add_argument(
        "--generation", type=int, default=None, help="a kept checkpoint's generation (default: the last)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the evaluation envs' seed (default: derived from the run's seed on a stream no env of the run used)",
    )
    parser.add_argument("--envs", type=int, default=1, help="envs the episodes are spread over (default 1)")
    parser.add_argument("--start-level", type=int, default=None, help="Procgen: the first test level")
    parser.add_argument("--num-levels", type=int, default=None, help="Procgen: how many test levels (0: unbounded)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the returns as JSON here")
    parser.add_argument(
        "--objective",
        default=None,
        metavar="OBJ[,OBJ...]",
        help="report these info keys too, as --objective writes them (e.g. info:success); default: the run's",
    )
    add_video_arguments(parser)  # of --member, or of the member with the best fresh mean
    return parser


def check_arguments(args: argparse.Namespace, run: SavedRun) -> list[str]:
    """Every problem with the options, each with its fix."""
    from evo.config.envnames import procgen_game
    from evo.tools.saved import output_problems

    problems = parse_objective(args.objective)[1] if args.objective is not None else []
    if args.episodes < 1:
        problems.append(f"--episodes {args.episodes}: give at least 1")
    if args.envs < 1:
        problems.append(f"--envs {args.envs}: give at least 1")
    levels = (args.start_level, args.num_levels)
    if any(v is not None for v in levels) and procgen_game(run.config.env_id) is None:
        problems.append(f"--start-level/--num-levels: {run.config.env_id} is not a Procgen game; drop them")
    if any(v is not None and v < 0 for v in levels):
        problems.append("--start-level/--num-levels: give levels >= 0")
    if args.json is not None and _inside(args.json, run.run_dir):
        problems.append(
            f"--json {args.json}: inside the run directory, which evo-evaluate never writes; give a path outside it"
        )
    return problems + output_problems("--json", args.json) + output_problems("--video", args.video)


def _inside(path: Path, directory: Path) -> bool:
    return path.resolve().is_relative_to(directory.resolve())


def warn(message: str) -> None:
    """A warning for the user, on stderr beside the errors (the log goes to stdout)."""
    print(f"evo-evaluate: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from evo.logs import install_logging
    from evo.tools.saved import evaluation_seed, open_run

    args = parser().parse_args(argv)
    install_logging(0)
    try:
        run = open_run(args.run_dir)
        if problems := check_arguments(args, run) + video_problems(args, run):
            raise SavedRunError("; ".join(problems))
        chosen = members_to_evaluate(run, args.member, args.generation, warn)
    except SavedRunError as error:
        print(f"evo-evaluate: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    seed = evaluation_seed(run.config.seed) if args.seed is None else args.seed
    deterministic = deterministic_actions(args.actions, run.config.env_id)
    keys = parse_objective(args.objective)[0].info_keys if args.objective is not None else None
    results = evaluate_members(
        run, chosen, args.episodes, seed, args.envs, args.start_level, args.num_levels, deterministic, keys
    )
    levels = None if args.start_level is None and args.num_levels is None else [args.start_level, args.num_levels]
    how = "deterministic" if deterministic else "sampled"
    print(
        f"{run.config.env_id}: {args.episodes} fresh episodes per member ({how} actions), env seed {seed}"
        + (f", levels {levels[0]} + {levels[1]}" if levels else "")
    )
    print(table(results, args.episodes))
    if args.json is not None:
        record = {
            "run": str(run.run_dir),
            "env_id": run.config.env_id,
            "episodes": args.episodes,
            "seed": seed,
            "envs": args.envs,
            "levels": levels,
            "actions": how,
            "members": [result.to_dict() for result in results],
        }
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(dumps(record, indent=1) + "\n")
        except OSError as error:
            message = f"--json {args.json}: cannot be written ({error}); give a path you may write to"
            print(f"evo-evaluate: error: {message}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.video is not None:  # the first of the fresh episodes, on the same seed and levels
        top = max(results, key=lambda result: result.summary()["mean"]).member
        return record_saved("evo-evaluate", run, top, args.video, seed, args.video_steps,
                            args.start_level or 0, args.num_levels or 0)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

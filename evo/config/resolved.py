"""The resolved configuration: what every other layer reads, and the declaration of every option. Pure.

:class:`Config` is CleanRL's ``Args``: each field is declared once, with its type, its default
and its help. A field declared with ``option(...)`` is a command-line option (its flag, its check
and what ``--resume`` does with it ride in the field's metadata, see :mod:`evo.config.declare`);
the parser, the ``cli`` record and the resume rules are derived from these fields
(:mod:`evo.config.options`). A field declared with ``derived(...)`` is resolved from something
else. A field's annotation is the resolved value's type: an option without a default is given
None by argparse and resolved by ``parse_config`` (the population from the MPI job, the budget
from the YAML ...). Each option names its group of ``--help`` (:data:`GROUPS`, in the order
``--help`` shows them); docs/running.md's "Every flag" has a table per group, checked against them.

Help texts and choices that name the learners or the explorers are functions of their
registries (``evo.learners.specs()``, ``evo.core.explorers.EXPLORERS``), written when the parser
is built: what each can do is declared on it, not listed here.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from evo.config.agent import AgentSettings
from evo.config.declare import FIXED, OWN, RESTORED, declared, derived, must, option, ordered_range, str2bool
from evo.config.envnames import DISTRIBUTION_MODES, procgen_game, unknown_env_message
from evo.config.hyperparams import PARAM_SETS
from evo.config.precision import PRECISIONS
from evo.config.source import SourceRef
from evo.core.devices import DEVICES
from evo.core.explorers import DEFAULT_EXPLORER, EXPLORERS
from evo.core.final import DEFAULT_TOP, FinalSettings, held_out_levels
from evo.core.objective import Objective
from evo.core.selection import TIE_RULES
from evo.core.streams import evaluation_seed
from evo.core.welch import EXPLOIT_TESTS
from evo.learners import DEFAULT_ALGO, algo_problem, algos
from evo.tracking import TRACKERS, tracker_problem


class ConfigError(ValueError):
    """Bad user input; carries every problem found so the user can fix them in one go."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}"


def known_param_set(flag: str, name: str | None) -> str | None:
    if name is None or name in PARAM_SETS:
        return None
    close = difflib.get_close_matches(name, list(PARAM_SETS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{flag} {name!r} is not one of {', '.join(PARAM_SETS)}{hint}"


INITIAL_HPARAMS = ("sample", "defaults", "source", "around-source")
"""Where members' hyperparameters start (``--initial-hparams``); the last two need ``--init-from``."""

EVAL_ACTIONS = ("deterministic", "sampled")
"""How ``--eval-episodes`` episodes pick actions (``--eval-actions``): the first is SB3's default."""

GROUPS: dict[str, str] = {
    "learner": "Learner and env",
    "population": "Population and budget",
    "selection": "Selection and exploration",
    "scoring": "Scoring",
    "procgen": "Procgen",
    "asynchronous": "Asynchronous PBT",
    "stages": "BG-PBT's stages",
    "checkpoints": "Checkpoints, failures and resuming",
    "output": "Run directory and logging",
    "speed": "Speed",
}
"""The groups of ``--help``, in its order: each option's ``group`` is one of these keys, and each
title is a heading of docs/running.md's "Every flag"."""


def either(names: Sequence[str]) -> str:
    """'a', 'b' or 'c'."""
    quoted = [f"'{name}'" for name in names]
    return " or ".join(quoted) if len(quoted) < 3 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def algo_help() -> str:
    return (
        f"the learner: {either(algos())} (Stable-Baselines3's and sb3-contrib's; rl-baselines3-zoo's --algo), its "
        "settings from hyperparams/<algo>.yml; or one of your own, package.module:ClassName (docs/examples/)"
    )


def explore_help() -> str:
    """Each explorer's summary, and what it cannot do, as its class declares them."""
    entries = []
    for name, explorer in EXPLORERS.items():
        limits = [
            *([] if explorer.named_choices else ["not with named choices"]),
            *([] if explorer.asynchronous else ["not with --asynchronous"]),
            *([] if explorer.several_objectives else ["not with several objectives"]),
        ]
        entries.append(f"'{name}': {explorer.summary}" + "".join(f"; {limit}" for limit in limits))
    return "how recipients change their hyperparameters. " + ". ".join(entries)


def exploit_buffer_help() -> str:
    return (
        f"off-policy learners ({', '.join(algos(lambda spec: spec.replay))}): at an exploit the recipient keeps its "
        "own replay buffer ('own': its experience is still valid off-policy data) or receives the donor's "
        "('copy', sent over MPI)"
    )


def max_distillations_help() -> str:
    return (
        "BG-PBT's stages (Wan et al. 2022): at most this many times, when the best score has not improved for "
        "--patience generations (or after --stage-steps), a new stage's --students students with new "
        "architectures (the search space's layers and widths of each network) are distilled from the top "
        "members and cut by successive halving to the population; 0: no stages (--algo "
        f"{' or '.join(algos(lambda spec: spec.distils))}, synchronous runs)"
    )


@declared
@dataclass(frozen=True, kw_only=True)
class Config:
    """Everything a run needs; the same object on every rank. The options in declaration order
    (``--help`` shows them by group, each group in this order)."""

    env_id: str = option(
        "gymnasium id, or a Procgen game ('bigfish', 'procgen:coinrun')",
        FIXED,
        group="learner",
        default="CartPole-v1",
        check=lambda flag, value: unknown_env_message(value),
    )
    algo: str = option(
        algo_help,
        FIXED,
        group="learner",
        default=DEFAULT_ALGO,
        check=lambda flag, value: algo_problem(value),
    )
    env_kwargs: dict[str, Any] = option(
        "keyword arguments of the env for gym.make as key:value, values read as YAML scalars (e.g. "
        "reward_scale:0.1 max_episode_steps:200); every rank's training and evaluation envs get them",
        FIXED,
        group="learner",
        nargs="+",
        metavar="KEY:VALUE",
    )
    """Resolved: the ``key:value`` pairs as a dict (empty without any)."""
    num_agents: int = option(
        "population size (default: number of MPI ranks)",
        FIXED,
        group="population",
        type=int,
        check=must(lambda n: n >= 1, "the population needs at least one member"),
    )
    """Resolved: a multiple of world_size."""
    total_generations: int = option(
        "generations to train (default: from the YAML)", RESTORED, group="population", type=int
    )
    agent_training_steps: int = option(
        "env steps per member per generation (default: from the YAML)", RESTORED, group="population", type=int
    )
    """Resolved: rounded up to whole rollouts by the trainer."""
    strategy: str = option(
        "'none': the control PBT must beat: the same population with the same initial hyperparameters, "
        "trained with no exploit or explore (random search)",
        FIXED,
        group="selection",
        metavar="none",
    )
    """Resolved: the script's selection rule, 'wta' or 'truncation', or 'none' with ``--strategy none``."""
    explore: str = option(
        explore_help,
        RESTORED,
        group="selection",
        default=DEFAULT_EXPLORER,
        choices=lambda: tuple(EXPLORERS),
    )
    truncation_fraction: float = option(
        "fraction replaced by truncation, in (0, 0.5]",
        RESTORED,
        group="selection",
        default=0.25,
        type=float,
        check=must(
            lambda f: 0 < f <= 0.5,
            "must be in (0, 0.5] (the bottom and top groups may not overlap); the default is 0.25",
        ),
    )
    perturb_factors: tuple[float, ...] = option(
        "explore multiplies by one of these",
        RESTORED,
        group="selection",
        default=[0.8, 1.2],
        type=float,
        nargs="+",
        check=must(lambda fs: all(f > 0 and math.isfinite(f) for f in fs), "every factor must be a positive number"),
    )
    resample_probability: float = option(
        "chance explore resamples instead of perturbing",
        RESTORED,
        group="selection",
        default=0.25,
        type=float,
        check=must(lambda p: 0 <= p <= 1, "must be in [0, 1]"),
    )
    ties: str = option(
        "a recipient whose score ties its donor's (e.g. every member failing alike): 'explore' keeps its own "
        "weights and explores its own hyperparameters, as a tie is no evidence the donor is better; 'copy' "
        "copies the donor like any other recipient",
        RESTORED,
        group="selection",
        default="explore",
        choices=TIE_RULES,
    )
    exploit_test: str = option(
        "'welch': a recipient copies the donor selection drew only if Welch's t-test on their scored episodes "
        "(the returns, or the objective's first term, behind each score) says the donor is better at "
        "--exploit-alpha, as in the PBT paper's RL experiments; otherwise it keeps its weights and explores its own "
        "hyperparameters. 'none' copies whatever selection decides",
        RESTORED,
        group="selection",
        default="none",
        choices=EXPLOIT_TESTS,
    )
    exploit_alpha: float = option(
        "the level of --exploit-test welch: the one-sided p-value below which the donor counts as better",
        RESTORED,
        group="selection",
        default=0.05,
        type=float,
        check=must(lambda a: 0 < a < 1, "must be between 0 and 1, e.g. 0.05"),
    )
    eval_episodes: int = option(
        "0: score = mean return of the last --score-window training episodes; N>0: N eval episodes (--eval-actions)",
        FIXED,
        group="scoring",
        default=0,
        type=int,
        check=must(lambda n: n >= 0, "use 0 (training episodes) or a positive count"),
    )
    """N>0: the mean return of N episodes (--eval-actions) on a separate evaluation env."""
    eval_actions: str = option(
        "the actions of the --eval-episodes episodes: 'deterministic' (the policy's argmax or mean, as SB3's "
        "evaluate_policy plays) or 'sampled' from the policy, as DrAC's test.py plays Procgen (a barely "
        "trained Procgen policy played by argmax can hold one action: its score then measures no learning)",
        FIXED,
        group="scoring",
        default="deterministic",
        choices=EVAL_ACTIONS,
    )
    score_window: int = option(
        "the training score is the mean return of this many last training episodes finished since the "
        "member's weights last changed hands (1 to 100: SB3 keeps the last 100); the Procgen AutoRL paper uses 100",
        RESTORED,
        group="scoring",
        default=10,
        type=int,
        check=must(lambda n: 1 <= n <= 100, "use 1 to 100 episodes (SB3 keeps the last 100)"),
    )
    final_eval: int = option(
        "the final pick: at the end of a complete run, play the top --final-top members by selection score "
        "each on the same this many fresh episodes (evo-evaluate's seeds; Procgen: levels never trained or "
        "selected on), and keep the best fresh mean as the member evo-export --member best exports "
        "(final.json); 0: off",
        RESTORED,
        group="scoring",
        default=0,
        type=int,
        check=must(lambda n: n >= 0, "use 0 (no final pick) or a positive number of fresh episodes"),
    )
    final_top: int | None = option(
        f"how many of the top members by selection score --final-eval plays (default: {DEFAULT_TOP}, or the "
        "whole population if smaller)",
        RESTORED,
        group="scoring",
        type=int,
        metavar="K",
        check=must(lambda k: k >= 1, "give at least 1 member"),
    )
    initial_hparams: str = option(
        "'sample': each member starts from its own draw from the search space; 'defaults': every member "
        "starts from the YAML's values (with --num-agents 1: the learner alone, with the env's tuned settings); "
        "with --init-from, 'source': every member starts from the source's values (the YAML's where it has none), "
        "'around-source': member 0 from them, the others from draws centred on them (default: sample; source "
        "with --init-from)",
        RESTORED,
        group="population",
        choices=INITIAL_HPARAMS,
    )
    init_from: str | None = option(
        "start every member from an agent: an SB3 model zip (an evo export, a zoo agent) or a run directory "
        "with an optional :MEMBER (best, best-ever or an id; default its kept best): its weights, optimizer "
        "state and normalisation statistics, and its hyperparameters as --initial-hparams says",
        FIXED,
        group="population",
        metavar="SOURCE",
    )
    seed: int = option(
        "base seed", FIXED, group="population", default=0, type=int, check=must(lambda s: s >= 0, "must be >= 0")
    )
    """Members, envs and selection derive their seeds from it."""
    exp_name: str = option("experiment name (default: <script>-<env>-<time>)", RESTORED, group="output")
    run_dir: Path = option("run directory (default: runs/<exp-name>)", OWN, group="output", type=Path)
    """Where the run's records, TensorBoard files and checkpoints go (a resume's: the run's)."""
    tb_writer: bool = option(
        "write TensorBoard event files ('--tb-writer False' to turn off)",
        RESTORED,
        group="output",
        default=True,
        type=str2bool,
        nargs="?",
        const=True,
    )
    tracker: str = option(
        "also track each member's generations in W&B ('wandb', the wandb extra) or MLflow ('mlflow', the mlflow "
        "extra): one tracked run per member, written from its own rank; W&B's offline runs or MLflow's file store "
        "in the run directory unless the tracker's environment variables say otherwise; 'off': nothing imported "
        "(docs/running.md: Tracking in W&B or MLflow)",
        RESTORED,
        group="output",
        default="off",
        choices=("off", *TRACKERS),
        check=tracker_problem,
    )
    torch_threads: int = option(
        "torch threads per rank",
        RESTORED,
        group="speed",
        default=1,
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1"),
    )
    conf_file: Path | None = option(
        "YAML file layered over hyperparams/<algo>.yml (its default, procgen and env blocks)",
        RESTORED,
        group="learner",
        type=Path,
        metavar="FILE",
    )
    """Resolved: the file of ``--conf-file``, or of ``--hyperparams FILE``."""
    hyperparams: dict[str, Any] = option(
        "the learner's settings for the env as key:value (e.g. learning_rate:1e-3 batch_size:128 "
        "'policy_kwargs:{net_arch: [32, 32]}'), layered over every YAML file; or one FILE, as --conf-file",
        RESTORED,
        group="learner",
        nargs="+",
        metavar="KEY:VALUE",
    )
    """Resolved: the ``key:value`` overrides, coerced (empty without any)."""
    learning_rate_range: tuple[float, float] | None = option(
        "search range for learning_rate",
        RESTORED,
        group="learner",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        check=ordered_range,
    )
    """As given; the search space in ``agent`` has it."""
    gamma_range: tuple[float, float] | None = option(
        "search range for gamma",
        RESTORED,
        group="learner",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        check=ordered_range,
    )
    """As given; the search space in ``agent`` has it."""
    num_envs: int | None = option(
        "parallel envs per member (default: from the YAML)",
        RESTORED,
        group="learner",
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1"),
    )
    """As given; ``agent.n_envs`` has the number used."""
    param_set: str | None = option(
        "train-procgen-pytorch's parameter set easy, easy-200, hard or hard-500 (envs, budget, "
        "and the distribution mode and training levels of its name unless given), or autorl: the Procgen "
        "AutoRL paper's set-up (DrAC, its search space, easy mode, 200 levels, 4 members, a decision every "
        "500k steps, 25M steps, scores over the last 100 training episodes)",
        RESTORED,
        group="procgen",
        metavar="NAME",
        check=known_param_set,
    )
    """As given; ``agent``, ``distribution_mode`` and ``num_levels`` have what it stands for."""
    select_on: str = option(
        "score that drives selection: 'train' = training episodes, 'test' = the --eval-episodes evaluation "
        "(on Procgen held-out levels: selecting on them uses them as a validation set)",
        RESTORED,
        group="scoring",
        default="train",
        choices=("train", "test"),
    )
    objective: Objective = option(
        "what selection, PB2, the kept best and the stages rank members by (training still maximises the "
        "reward): 'return' (the episode return), or 'info:KEY', the mean over the scored episodes of a number "
        "the env puts in info when an episode ends (e.g. info:is_success); ':min' after one makes smaller "
        "better; several, separated by commas (return,info:energy:min), rank members by Pareto fronts (MO-PBT)",
        FIXED,
        group="scoring",
        default="return",
        metavar="OBJ[,OBJ...]",
    )
    """Resolved: the terms (evo.core.objective), the episode return by default."""
    eval_start_level: int = option(
        "first evaluation level (default: the level after the training levels)",
        RESTORED,
        group="procgen",
        type=int,
    )
    """Resolved: 0 for other envs."""
    eval_num_levels: int = option(
        "evaluation levels (default 0: full distribution)",
        RESTORED,
        group="procgen",
        default=0,
        type=int,
    )
    distribution_mode: str = option(f"one of {', '.join(DISTRIBUTION_MODES)}", FIXED, group="procgen", default="easy")
    num_levels: int = option("number of training levels (0 = unlimited)", FIXED, group="procgen", default=0, type=int)
    start_level: int = option("first training level", FIXED, group="procgen", default=0, type=int)
    log_level: str = option(
        "rank 0's log level",
        OWN,
        group="output",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
    device: str = option(
        "where members' networks, optimiser state and rollout or replay tensors live: 'cpu', 'cuda' (each rank "
        "takes the GPU local rank mod visible GPUs: several ranks may share one; env steps stay on the CPU) or "
        "'auto' (a GPU where there is one)",
        RESTORED,
        group="speed",
        default="cpu",
        choices=DEVICES,
    )
    cpu_tuning: bool = option(
        "turn off evo's CPU speed-ups (glibc allocator settings, channels-last convolutions), for comparison",
        OWN,
        group="speed",
        default=True,
        action="store_false",
        flag="--no-cpu-tuning",
    )
    """Allocator settings and channels-last convolutions (no change to PPO's maths)."""
    precision: str = option(
        "bf16: the policy's network runs in bfloat16 autocast, forward and backward, in rollouts and updates "
        "(weights, Adam state, checkpoints and exchanges stay float32); only on a processor with native "
        "bfloat16 (avx512_bf16 or amx_bf16). Default: the YAML's precision, else fp32",
        RESTORED,
        group="speed",
        choices=PRECISIONS,
    )
    """Resolved: the flag, else the YAML's ``precision``, else 'fp32'. A run may resume in the other one."""
    schedule_file: Path | None = option(
        "train one agent (--num-agents 1) on a hyperparameter schedule written by python -m evo.tools.replay",
        RESTORED,
        group="learner",
        type=Path,
        metavar="FILE",
        name="schedule",
    )
    """``--schedule FILE``: a replayed hyperparameter schedule for a single agent."""
    checkpoint_every: int = option(
        "checkpoint the population every N generations",
        RESTORED,
        group="checkpoints",
        default=1,
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1 (generations)"),
    )
    """Also on a stop signal."""
    keep_checkpoints: int = option(
        "complete checkpoints to keep",
        RESTORED,
        group="checkpoints",
        default=2,
        type=int,
        check=must(lambda n: n >= 1, "keep at least 1"),
    )
    max_member_failures: int = option(
        "how often a member may fail (its env or its update raises) and be restarted, from a top member's "
        "weights with a fresh draw of hyperparameters, to train its generation again; one failure more ends "
        "the job; 0: the first failure ends it",
        RESTORED,
        group="checkpoints",
        default=3,
        type=int,
        check=must(lambda n: n >= 0, "must be >= 0 (0: the first failure ends the job)"),
    )
    step_timeout: float = option(
        "a member that waits this many seconds for one env step, in its training or its evaluation episodes "
        "(its env hangs), fails, and is restarted as a member whose env raises (--max-member-failures); only env "
        "steps are timed: the time in the learner's updates is not counted, however long; 0: off",
        RESTORED,
        group="checkpoints",
        default=0.0,
        type=float,
        check=must(lambda s: s >= 0 and s == s, "must be >= 0 seconds (0 turns it off)"),
    )
    stall_timeout: float | None = option(
        "seconds a member may go without an env step, in its training or its evaluation episodes, or spend in "
        "one update, before its rank logs which member and env it is stuck in (default: 10 x the longest a "
        "member's training or evaluation has taken on the rank, at least 600)",
        RESTORED,
        group="checkpoints",
        type=float,
        check=must(lambda s: s > 0 and s == s, "must be a positive number of seconds"),
    )
    max_distillations: int = option(
        max_distillations_help,
        RESTORED,
        group="stages",
        default=0,
        type=int,
        check=must(lambda n: n >= 0, "must be >= 0 (0: no stages)"),
    )
    patience: int = option(
        "generations without a new best score after which a new stage starts (--max-distillations; BG-PBT's 20)",
        RESTORED,
        group="stages",
        default=20,
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1 generation"),
    )
    stage_steps: int | None = option(
        "env steps per member after which a stage ends even while the best improves (BG-PBT's distill_every; "
        "default: no such limit)",
        RESTORED,
        group="stages",
        type=int,
        check=must(lambda n: n >= 1, "must be a positive number of env steps"),
    )
    students: int | None = option(
        "a stage's candidate students, cut by successive halving (eta 2) to the population "
        "(default: 3 per member, BG-PBT's 24 for 8)",
        FIXED,
        group="stages",
        type=int,
    )
    distillation_steps: int | None = option(
        "env steps each surviving student is distilled for (alpha's schedule; the rungs' steps add up to it); "
        "a stage's rungs count as generations of --total-generations (default: 4 generations' env steps)",
        RESTORED,
        group="stages",
        type=int,
        check=must(lambda n: n >= 1, "must be a positive number of env steps"),
    )
    asynchronous: bool = option(
        "asynchronous PBT (pbt_rl_truct.py and pbt_rl_wta.py): no generation shared "
        "by the population and no rank waiting for another; each member is ranked at its own ready points (every "
        "--agent-training-steps env steps) against every member's latest score, and a free rank trains the member "
        "next due, wherever it last ran; every member is checkpointed at each ready point",
        FIXED,
        group="asynchronous",
        default=False,
        action="store_true",
    )
    progress_interval: float = option(
        "seconds between progress lines during a generation when stdout is not a terminal (a terminal "
        "gets a live bar): rank 0's env steps, env-steps/s, the ETA of the generation and of the run; 0: off",
        RESTORED,
        group="output",
        default=30.0,
        type=float,
        check=must(lambda s: s >= 0, "must be >= 0 seconds (0 turns progress reports off)"),
    )
    exploit_buffer: str = option(
        exploit_buffer_help,
        RESTORED,
        group="selection",
        default="own",
        choices=("own", "copy"),
    )
    checkpoint_buffers: bool = option(
        "leave the off-policy learners' replay buffers out of checkpoints (smaller and faster to write; a "
        "resumed member then refills its buffer from scratch, as the log says)",
        RESTORED,
        group="checkpoints",
        default=True,
        action="store_false",
        flag="--no-checkpoint-buffers",
    )
    """Whether checkpoints hold the replay buffers (``--no-checkpoint-buffers``: not)."""
    resume: bool = option(
        "continue the run in --run-dir (or runs/--exp-name) from its last complete checkpoint; "
        "flags not given again keep the run's values, --total-generations may extend it",
        OWN,
        group="checkpoints",
        default=False,
        action="store_true",
    )

    transport: str = derived("the entry script")
    """How weights move between ranks: 'p2p' (send/recv) or 'collective' (Bcast)."""
    world_size: int = derived("the MPI job")
    agent: AgentSettings = derived("the YAML layers, --hyperparams and the flags that shape the learner's settings")
    command: tuple[str, ...] = derived("the command line")
    run_id: str = derived("a new id, or the resumed run's")
    """A checkpoint from another run is refused."""
    cli: dict[str, Any] = derived("the options' values, saved for --resume")
    """The command-line values this run was started with (a resume starts from them)."""
    init_source: SourceRef | None = derived("--init-from, resolved: its file and digest (a resume: the run's)")
    """The agent new members start from (None: fresh weights)."""
    schedule: tuple[tuple[int, dict[str, float]], ...] = derived("the entries of --schedule FILE")
    """``(env_steps, hparams)`` entries, sorted; empty without one."""

    @property
    def explored_names(self) -> tuple[str, ...]:
        """The hyperparameters every member carries and every record has a column for, fixed for
        the run: its search space's (or replayed schedule's), in the learner's declaration order."""
        names = set(self.agent.search_space)
        if self.schedule:
            names |= set(self.schedule[0][1])
        return self.agent.spec.record_order(names)

    @property
    def members_per_rank(self) -> int:
        return self.num_agents // self.world_size

    @property
    def procgen_game(self) -> str | None:
        return procgen_game(self.env_id)

    @property
    def final_candidates(self) -> int:
        """How many members the final pick plays (``--final-top``, default 3 or the population if smaller)."""
        return self.final_top if self.final_top is not None else min(DEFAULT_TOP, self.num_agents)

    @property
    def final_settings(self) -> FinalSettings | None:
        """The final pick (``--final-eval``; evo.core.final), or None. Its episodes are evo-evaluate's: the
        fresh seed, one env, actions as ``--actions auto`` plays them (sampled on Procgen, as DrAC's test.py
        plays it, else deterministic) and on Procgen levels held out from training and evaluation."""
        if self.final_eval <= 0:
            return None
        game = self.procgen_game
        held_out = (self.start_level, self.num_levels, self.eval_start_level, self.eval_num_levels)
        return FinalSettings(
            episodes=self.final_eval,
            top=self.final_candidates,
            seed=evaluation_seed(self.seed),
            levels=held_out_levels(*held_out) if game is not None else None,
            deterministic=game is None,
            score=self.objective.terms[0].text,
            generation=self.total_generations,
            asynchronous=self.asynchronous,
        )

    @property
    def stage_students(self) -> int:
        """A stage's candidate students (``--students``, default 3 per member)."""
        return self.students if self.students is not None else 3 * self.num_agents

    @property
    def stage_distillation_steps(self) -> int:
        """Env steps each surviving student is distilled for (default: 4 generations')."""
        return self.distillation_steps if self.distillation_steps is not None else 4 * self.agent_training_steps

    def members_of(self, rank: int) -> range:
        """Member ids held by ``rank`` (contiguous blocks: rank r holds r*k .. r*k+k-1)."""
        k = self.members_per_rank
        return range(rank * k, rank * k + k)

    def owner(self, member: int) -> int:
        """Rank that holds ``member``."""
        return member // self.members_per_rank

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-safe view of the resolved config (config.yaml)."""

        def plain(value: Any) -> Any:
            if isinstance(value, AgentSettings):
                return plain(value.to_dict())
            if isinstance(value, Objective):
                return value.text
            if isinstance(value, (Path, SourceRef)):
                return value.to_dict() if isinstance(value, SourceRef) else str(value)
            if isinstance(value, (tuple, list)):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        return {item.name: plain(getattr(self, item.name)) for item in fields(self)}

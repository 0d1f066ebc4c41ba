"""The resolved configuration: what every other layer reads. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evo.config.envnames import procgen_game
from evo.core.space import ParamSpace


class ConfigError(ValueError):
    """Bad user input; carries every problem found so the user can fix them in one go."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}"


@dataclass(frozen=True)
class AgentSettings:
    """PPO settings for one env, resolved from the YAML layers."""

    policy: str
    n_envs: int
    n_steps: int
    batch_size: int
    n_epochs: int
    max_grad_norm: float
    normalize_advantage: bool
    policy_kwargs: dict[str, Any]
    defaults: dict[str, float]
    """Default value of each explored hyperparameter (used when PBT does not sample)."""
    search_space: dict[str, ParamSpace]
    microbatch_size: int = 0
    """Back-propagate each minibatch in pieces of this many samples (0: whole; see evo.sb3.ppo)."""

    @property
    def rollout_steps(self) -> int:
        """Env steps collected per PPO update (n_envs * n_steps)."""
        return self.n_envs * self.n_steps


@dataclass(frozen=True)
class Config:
    """Everything a run needs; the same object on every rank."""

    strategy: str
    """Selection rule: 'wta' (winner takes all) or 'truncation'."""
    transport: str
    """How weights move between ranks: 'p2p' (send/recv) or 'collective' (Bcast)."""
    env_id: str
    """Gymnasium id, or a Procgen game by bare name ('bigfish') or 'procgen:bigfish'."""
    world_size: int
    """Number of MPI ranks."""
    num_agents: int
    """Population size; a multiple of world_size."""
    total_generations: int
    """Generations to train; each ends with selection and explore."""
    agent_training_steps: int
    """Env steps of PPO per member per generation (rounded up to whole rollouts)."""
    truncation_fraction: float
    """Fraction of the population replaced by truncation selection, in (0, 0.5]."""
    perturb_factors: tuple[float, ...]
    """Explore multiplies a hyperparameter by one of these."""
    resample_probability: float
    """Probability that explore resamples a hyperparameter instead of perturbing it."""
    eval_episodes: int
    """0: score = mean return of the last 10 training episodes; N>0: mean return of N
    deterministic episodes on a separate evaluation env."""
    seed: int
    """Base seed; members, envs and selection derive theirs from it."""
    exp_name: str
    run_dir: Path
    """Where the run's records, TensorBoard files and checkpoints go."""
    tb_writer: bool
    """Write TensorBoard event files."""
    torch_threads: int
    """torch intra-op threads per rank."""
    distribution_mode: str
    num_levels: int
    start_level: int
    agent: AgentSettings
    log_level: str = "INFO"
    command: tuple[str, ...] = field(default=())
    checkpoint_every: int = 1
    """Write a population checkpoint every this many generations (and on a stop signal)."""
    keep_checkpoints: int = 2
    """Complete checkpoints kept on disk."""
    resume: bool = False
    """Continue the run in run_dir from its last complete checkpoint."""
    run_id: str = ""
    """Identifies the run; a checkpoint from another run is refused."""
    cli: dict[str, Any] = field(default_factory=dict)
    """The command-line values this run was started with (a resume starts from them)."""
    cpu_tuning: bool = True
    """Allocator settings and channels-last convolutions (no change to PPO's maths)."""
    explore: str = "perturb"
    """How recipients explore: 'perturb' (random perturbation/resampling) or 'pb2' (GP bandit)."""
    initial_hparams: str = "sample"
    """'sample' (each member draws from the search space) or 'defaults' (the YAML's values)."""
    select_on: str = "train"
    """Which score drives selection: 'train' (training episodes) or 'test' (evaluation episodes)."""
    eval_start_level: int = 0
    eval_num_levels: int = 0
    """Procgen levels of the evaluation env (held out: by default the full distribution,
    from the first level after the training levels)."""
    schedule_file: Path | None = None
    """A replayed hyperparameter schedule (``python -m evo.replay``) for a single agent."""
    schedule: tuple[tuple[int, dict[str, float]], ...] = ()
    """``(env_steps, hparams)`` entries of ``schedule_file``, sorted; empty without one."""
    conf_file: Path | None = None
    """The YAML file layered over the built-in one (``--conf-file``, or ``--hyperparams FILE``)."""
    hyperparams: dict[str, Any] = field(default_factory=dict)
    """The ``--hyperparams key:value`` overrides, coerced; layered over every YAML file."""

    @property
    def members_per_rank(self) -> int:
        return self.num_agents // self.world_size

    @property
    def procgen_game(self) -> str | None:
        return procgen_game(self.env_id)

    def members_of(self, rank: int) -> range:
        """Member ids held by ``rank`` (contiguous blocks: rank r holds r*k .. r*k+k-1)."""
        k = self.members_per_rank
        return range(rank * k, rank * k + k)

    def owner(self, member: int) -> int:
        """Rank that holds ``member``."""
        return member // self.members_per_rank

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-safe view of the resolved config."""

        def plain(value: Any) -> Any:
            if isinstance(value, Path):
                return str(value)
            if isinstance(value, tuple):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return plain(asdict(self))

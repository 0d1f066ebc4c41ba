"""The toy problem of the PBT paper (Jaderberg et al. 2017, section 4 and Fig. 2), pure numpy.

The true objective is Q(θ) = 1.2 − (θ0² + θ1²), but a worker can only follow the gradient
of a surrogate Q̂(θ|h) = 1.2 − (h0·θ0² + h1·θ1²): its hyperparameters h decide which
coordinates it can improve. Two workers start at θ = [0.9, 0.9] with h = [1, 0] and
h = [0, 1]. Alone, each can only zero one coordinate and stalls at 1.2 − 0.81 = 0.39;
copying the better worker's θ (exploit) and changing h (explore) reaches the optimum 1.2.

With ``--run-dir`` the PBT variant leaves its records as a run does (config.yaml, population.csv,
lineage.jsonl, written by :class:`~evo.rundir.records.RunRecords`), so ``python -m evo.tools.plot`` and
``python -m evo.tools.importance`` read it; ``--dummy`` explores a third hyperparameter that Q̂ never
reads, and ``--theta0`` moves the start (from θ = [0.9, 0] only h0 can improve Q).

:class:`ToyWorker` has the part of the learner interface the exchange uses
(:class:`~evo.learners.interface.Exchangeable`), so the toy runs through the same generation
loop (``evo.runner.loop``: selection, explore and exchange) as the RL scripts; the communicator is
an argument (``main`` asks for ``COMM_WORLD``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evo.core.explorers import make_explorer
from evo.core.kinds import Additive, Kind
from evo.core.plan import Exploit, generation_rng, plan_generation
from evo.core.result import MemberResult, Scores
from evo.learners.interface import Layout, Payload, buffers_for
from evo.mpi import exchange
from evo.rundir.jsontext import dumps
from evo.runner.loop import Hooks, LoopSettings, run_generations

Q_MAX = 1.2
THETA0 = (0.9, 0.9)
# h lives in [0, 1]; explore shifts it by ±10 % of that range (a multiplied 0 would stay 0),
# like the paper's small random perturbation of h.
TOY_SPACE: dict[str, Kind] = {"h0": Additive(0.0, 1.0), "h1": Additive(0.0, 1.0)}
DUMMY = "dummy"
"""A hyperparameter the surrogate never reads (``--dummy``): explored and copied as h is, it explains nothing."""
PERTURB_FACTORS = (0.9, 1.1)
RESAMPLE_PROBABILITY = 0.0

# (name, exploit, explore), in the order of the paper's figure
VARIANTS = (
    ("PBT", True, True),
    ("exploit only", True, False),
    ("explore only", False, True),
    ("grid search", False, False),
)


def true_objective(theta: np.ndarray) -> float:
    """Q(θ) = 1.2 − |θ|²."""
    return float(Q_MAX - np.sum(np.square(theta)))


def initial_h(worker: int) -> dict[str, float]:
    """Worker 0 gets h = [1, 0], worker 1 gets [0, 1], and so on alternately."""
    return {"h0": 1.0, "h1": 0.0} if worker % 2 == 0 else {"h0": 0.0, "h1": 1.0}


def toy_space(dummy: bool = False) -> dict[str, Kind]:
    """h0 and h1, and with ``dummy`` the hyperparameter Q̂ never reads (shifted as h is)."""
    return {**TOY_SPACE, DUMMY: Additive(0.0, 1.0)} if dummy else dict(TOY_SPACE)


def initial_hparams(worker: int, workers: int, dummy: bool = False) -> dict[str, float]:
    """:func:`initial_h`, and the dummy spread evenly over [0, 1] by worker id (no random stream needed)."""
    return {**initial_h(worker), DUMMY: (worker + 0.5) / workers} if dummy else initial_h(worker)


@dataclass
class ToyWorker:
    """One worker: θ (its "weights", a flat float64 buffer) and h (its hyperparameters)."""

    member_id: int
    hparams: dict[str, float] = field(default_factory=dict)
    lr: float = 0.05
    buffer: np.ndarray = field(default_factory=lambda: np.array(THETA0, dtype=np.float64))
    steps: int = 0
    trajectory: list[tuple[int, float, float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.hparams:
            self.hparams = initial_h(self.member_id)
        self._record()

    @property
    def theta(self) -> np.ndarray:
        return self.buffer

    @property
    def env_steps(self) -> int:
        return self.steps

    def _record(self) -> None:
        self.trajectory.append((self.steps, float(self.buffer[0]), float(self.buffer[1]), self.score()))

    def train(self, steps: int) -> None:
        """``steps`` gradient-ascent steps on the surrogate Q̂(θ|h)."""
        h = np.array([self.hparams["h0"], self.hparams["h1"]])
        for _ in range(steps):
            self.buffer -= self.lr * 2.0 * h * self.buffer  # ∇θ Q̂ = −2 h θ
            self.steps += 1
            self._record()

    def score(self) -> float:
        return true_objective(self.buffer)

    def exploit_state(self) -> Payload:
        return {"theta": self.buffer}  # θ is the buffer: nothing to copy

    def receive_buffers(self, layout: Layout) -> Payload:
        return buffers_for(layout, {"theta": self.buffer})

    def load(self, state: Payload, hparams: Mapping[str, float]) -> None:
        if state["theta"] is not self.buffer:
            np.copyto(self.buffer, state["theta"])
        self.set_hparams(hparams)
        self._record()  # the jump an exploit makes shows in the trajectory

    def set_hparams(self, hparams: Mapping[str, float]) -> None:
        self.hparams = {name: float(hparams[name]) for name in self.hparams}  # h0, h1 (and the dummy)


# --- the run over MPI (through evo.runner.loop; communication only through evo.mpi.exchange) ----------


@dataclass(frozen=True)
class ToySettings:
    workers: int
    steps: int = 80
    ready: int = 4
    lr: float = 0.05
    strategy: str = "truncation"
    transport: str = "p2p"
    truncation_fraction: float = 0.25
    seed: int = 0
    explore: str = "perturb"
    theta0: tuple[float, float] = THETA0
    dummy: bool = False

    @property
    def space(self) -> dict[str, Kind]:
        return toy_space(self.dummy)

    def owner(self, worker: int, world_size: int) -> int:
        return worker // (self.workers // world_size)


def run_variant(
    comm,
    settings: ToySettings,
    exploit: bool,
    explore: bool,
    seed: int,
    run_dir: str | Path | None = None,
    command: str = "",
) -> dict | None:
    """Train the workers for ``settings.steps`` steps with exploit/explore every ``ready``
    steps, through the generation loop (no checkpoints; with ``run_dir``, rank 0 writes the
    records a run writes there, ``command`` as its command.txt). Returns (on rank 0) every
    worker's trajectory and the exploits; None elsewhere."""
    space = settings.space
    explorer = make_explorer(settings.explore, space, PERTURB_FACTORS, RESAMPLE_PROBABILITY)  # rank 0's
    rank, size = comm.Get_rank(), comm.Get_size()
    per_rank = settings.workers // size
    workers = {
        i: ToyWorker(
            i,
            initial_hparams(i, settings.workers, settings.dummy),
            settings.lr,
            np.array(settings.theta0, dtype=np.float64),
        )
        for i in range(rank * per_rank, (rank + 1) * per_rank)
    }
    lineage = []  # on rank 0, where the plan is decided
    records = None
    if run_dir is not None and rank == 0:
        records = toy_records(run_dir, settings, exploit, explore, seed, command)

    def record(report) -> None:
        if records is not None:
            records.write_generation(report.generation, report.population, report.exploits)

    def decide(generation: int, population: list[MemberResult]) -> list[Exploit]:
        exploits = plan_generation(
            generation,
            population,
            settings.strategy,
            explorer,
            generation_rng(seed, generation),
            settings.truncation_fraction,
            exploit=exploit,
            explore_hparams=explore,
            ties="copy",  # the paper's toy: both workers start equal, and the first exploit copies anyway
        )
        lineage.extend(e.to_json() for e in exploits)
        return exploits

    hooks = Hooks(
        train=lambda worker, should_stop: worker.train(settings.ready),
        score=lambda worker: Scores(worker.score()),
        plan=decide,
        records=record,
    )
    generations, leftover = divmod(settings.steps, settings.ready)
    loop = LoopSettings(start=0, total=generations, transport=settings.transport)
    run_generations(comm, workers, lambda m: settings.owner(m, size), hooks, loop)
    if records is not None:
        records.close()
    for worker in workers.values():
        worker.train(leftover)
    trajectories = exchange.gather_to_root(comm, [(i, w.trajectory) for i, w in workers.items()])
    if rank != 0:
        return None
    return {"trajectories": dict(trajectories), "lineage": lineage}


def toy_records(run_dir: str | Path, settings: ToySettings, exploit: bool, explore: bool, seed: int, command: str):
    """A run's records for the toy (no TensorBoard): config.yaml with its search space and settings,
    population.csv (a worker's Q at the end of each generation and the h it trained with), lineage.jsonl."""
    from evo.rundir.records import RunRecords

    space = settings.space
    config = {
        "env_id": "pbt-toy",
        "num_agents": settings.workers,
        "seed": seed,
        "strategy": settings.strategy,
        "transport": settings.transport,
        "toy": {
            "steps": settings.steps,
            "ready": settings.ready,
            "lr": settings.lr,
            "theta0": list(settings.theta0),
            "exploit": exploit,
            "explore": settings.explore if explore else "none",
            "truncation_fraction": settings.truncation_fraction,
        },
        "agent": {"algo": "toy", "search_space": {name: kind.spec() for name, kind in space.items()}},
    }
    return RunRecords(Path(run_dir), list(space), space, tb_writer=False, new_run=(config, command + "\n"))


def best_curve(trajectories: Mapping[int, list]) -> tuple[list[int], list[float]]:
    """max over workers of Q after each step (the value after any exploit at that step)."""
    by_step: dict[int, dict[int, float]] = {}
    for worker, points in trajectories.items():
        for step, _, _, q in points:
            by_step.setdefault(step, {})[worker] = q
    steps = sorted(by_step)
    return steps, [max(by_step[s].values()) for s in steps]


# --- the figure ---------------------------------------------------------------------


def plot_toy(results: Mapping[str, dict], path: str | Path, settings) -> Path:
    """θ trajectories over the contours of Q, one panel per variant (as in Fig. 2 of the PBT
    paper), and the best worker's Q over steps for all variants."""
    from evo.tools.plot import DPI, legend_right, member_colours, plt

    names = list(results)
    fig = plt.figure(figsize=(4.0 * len(names) + 1.0, 8.2), dpi=DPI, layout="constrained")
    grid = fig.add_gridspec(2, len(names), height_ratios=[1.15, 1.0])
    grid_x = np.linspace(-0.1, 1.0, 200)
    theta0, theta1 = np.meshgrid(grid_x, grid_x)
    q = Q_MAX - theta0**2 - theta1**2
    workers = sorted(next(iter(results.values()))["trajectories"]) if results else []
    colours = member_colours(len(workers))
    top = []
    for column, name in enumerate(names):
        ax = fig.add_subplot(grid[0, column])
        top.append(ax)
        contours = ax.contourf(theta0, theta1, q, levels=20, cmap="viridis", alpha=0.85)
        ax.contour(theta0, theta1, q, levels=[0.39, 0.8, 1.1, 1.19], colors="white", linewidths=0.5, alpha=0.7)
        for index, worker in enumerate(workers):
            points = np.array(results[name]["trajectories"][worker])
            ax.plot(
                points[:, 1],
                points[:, 2],
                color=colours[index],
                linewidth=1.4,
                marker=".",
                markersize=3.5,
                label=f"worker {worker}",
                gid=f"worker-{worker}",
            )
        ax.plot(*THETA0, marker="*", color="white", markersize=11, markeredgecolor="black")
        ax.plot(0, 0, marker="x", color="red", markersize=8)
        final = max(points_[-1][3] for points_ in results[name]["trajectories"].values())
        ax.set_title(f"{name}\nfinal best Q = {final:.3f}", fontsize=10)
        ax.set_xlabel("θ0")
        ax.set_ylabel("θ1")
        ax.set_aspect("equal")
        if column == 0:
            ax.legend(fontsize=7, loc="lower left")
    if top:
        fig.colorbar(contours, ax=top, shrink=0.85, label="Q(θ) = 1.2 − θ0² − θ1²")
    ax = fig.add_subplot(grid[1, :])
    styles = ["-", "--", "-.", ":"]
    for index, name in enumerate(names):
        steps, best = best_curve(results[name]["trajectories"])
        ax.plot(steps, best, linewidth=2, linestyle=styles[index % 4], label=name, gid=f"variant-{name}")
    ax.axhline(Q_MAX, color="black", linewidth=0.8, alpha=0.6, label=f"optimum Q = {Q_MAX}")
    ax.set_xlabel("gradient steps per worker")
    ax.set_ylabel("Q(θ) of the best worker")
    ax.set_title(
        f"PBT toy: {settings.workers} workers, exploit/explore every {settings.ready} steps, "
        f"{settings.strategy} selection",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    legend_right(ax)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def parse_toy_args(argv, world_size: int):
    """The toy's command line, checked against the MPI world size (rank 0 only)."""
    parser = argparse.ArgumentParser(
        prog="pbt_toy.py",
        description="The PBT paper's toy (Jaderberg et al. 2017, Fig. 2) on evo's selection, explore and "
        "exchange code: PBT, exploit only, explore only and neither (grid search).",
    )
    parser.add_argument("--workers", type=int, default=None, help="workers in total (default: one per rank)")
    parser.add_argument("--steps", type=int, default=ToySettings.steps, help="gradient steps per worker")
    parser.add_argument("--ready", type=int, default=ToySettings.ready, help="steps between exploit/explore")
    parser.add_argument("--lr", type=float, default=ToySettings.lr, help="gradient-ascent step size")
    parser.add_argument("--strategy", choices=("truncation", "wta"), default=ToySettings.strategy)
    parser.add_argument("--transport", choices=("p2p", "collective"), default=ToySettings.transport)
    parser.add_argument("--truncation-fraction", type=float, default=ToySettings.truncation_fraction)
    parser.add_argument(
        "--explore",
        choices=("perturb", "pb2"),
        default=ToySettings.explore,
        help="how recipients change h: random ±10%% shifts (perturb) or PB2's GP bandit (pb2)",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="one run per seed; the figure shows the first"
    )
    parser.add_argument("--out", default="toy.png", help="the figure (PNG)")
    parser.add_argument("--json", default=None, help="also write final Q per variant and seed here")
    parser.add_argument(
        "--run-dir",
        default=None,
        help="a new folder: the PBT variant's records (first seed) as a run's (config.yaml, population.csv, "
        "lineage.jsonl), for python -m evo.tools.plot and evo.tools.importance",
    )
    parser.add_argument(
        "--dummy", action="store_true", help="explore a third hyperparameter, 'dummy', that Q̂ never reads"
    )
    parser.add_argument(
        "--theta0",
        type=float,
        nargs=2,
        default=list(THETA0),
        metavar=("THETA0", "THETA1"),
        help="where every worker starts (default 0.9 0.9; from 0.9 0 only h0 can improve Q)",
    )
    args = parser.parse_args(argv)
    workers = args.workers if args.workers is not None else world_size
    problems = []
    if workers < 2:
        problems.append(f"--workers {workers}: PBT needs at least 2 workers (run more ranks or pass --workers 2)")
    elif workers % world_size:
        problems.append(f"--workers {workers} does not divide among {world_size} ranks; use a multiple of {world_size}")
    if args.steps < 1 or args.ready < 1:
        problems.append(f"--steps {args.steps} and --ready {args.ready} must be positive")
    if not 0 < args.lr < 1:
        problems.append(f"--lr {args.lr}: gradient ascent on Q̂ converges for 0 < lr < 1; try 0.05")
    if not 0 < args.truncation_fraction <= 0.5:
        problems.append(f"--truncation-fraction {args.truncation_fraction} must be in (0, 0.5]")
    if args.run_dir is not None and Path(args.run_dir).exists():
        problems.append(f"--run-dir {args.run_dir} exists: give a new folder for the toy's records")
    if problems:
        parser.error("; ".join(problems))
    settings = ToySettings(
        workers,
        args.steps,
        args.ready,
        args.lr,
        args.strategy,
        args.transport,
        args.truncation_fraction,
        explore=args.explore,
        theta0=tuple(args.theta0),
        dummy=args.dummy,
    )
    return settings, args


def main(argv=None) -> int:
    """``mpiexec -n 2 python pbt_toy.py``: the four variants, a table of final Q, toy.png."""
    comm = exchange.world()
    rank = comm.Get_rank()
    parsed = ("exit", 2)
    if rank == 0:
        try:
            parsed = ("ok", parse_toy_args(argv, comm.Get_size()))
        except SystemExit as stop:
            parsed = ("exit", stop.code if isinstance(stop.code, int) else 2)
    parsed = exchange.broadcast(comm, parsed)
    if parsed[0] != "ok":
        return parsed[1]
    settings, args = parsed[1]
    command = shlex.join(["python", "pbt_toy.py", *(sys.argv[1:] if argv is None else argv)])
    finals = {name: [] for name, _, _ in VARIANTS}
    shown = {}
    for seed in args.seeds:
        for name, exploit, explore in VARIANTS:
            run_dir = args.run_dir if (name, seed) == ("PBT", args.seeds[0]) else None
            result = run_variant(comm, settings, exploit, explore, seed, run_dir, command)
            if result is not None:
                finals[name].append(max(points[-1][3] for points in result["trajectories"].values()))
                if seed == args.seeds[0]:
                    shown[name] = result
    if rank != 0:
        return 0
    plot_toy(shown, args.out, settings)
    print(
        f"PBT toy: {settings.workers} workers on {comm.Get_size()} ranks, {settings.steps} steps, "
        f"exploit/explore every {settings.ready}, {settings.strategy} selection, {settings.transport} exchange, "
        f"{settings.explore} explore"
    )
    print("| variant | final Q (best worker), mean over seeds | min | max |")
    print("|---|---|---|---|")
    for name, values in finals.items():
        print(f"| {name} | {np.mean(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    print(f"optimum Q = {Q_MAX}; figure: {args.out}")
    if args.run_dir is not None:
        print(f"the PBT variant's records (seed {args.seeds[0]}): {args.run_dir}")
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(dumps({"seeds": args.seeds, "final_q": finals, "workers": settings.workers}, indent=2))
    sys.stdout.flush()
    return 0

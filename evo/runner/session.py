"""A run's session: what every driver shares, built once on every rank from the accepted configuration.

CleanRL reads its ``Args`` once at the top of ``ppo.py`` and turns it into plain values; nothing
below takes the whole ``Args``. Here :func:`open_session` (called by the entry point, evo.main, once
the input is accepted) is the one place of the run wing that reads the :class:`~evo.config.Config`;
it sets up the process (torch threads, CPU tuning), installs the stop request, opens the run
directory's records (rank 0) and makes the plain values each part of a run takes:

- :class:`Placement`: which rank holds which member;
- :class:`~evo.core.rules.PBTRules`: selection, ties, the explorer and restarts;
- :class:`Budget`: generations, env steps per generation, a replayed schedule;
- :class:`~evo.runner.members.MemberFactory`: how members are built, restored, rebuilt and moved;
- the checkpoints' :class:`~evo.rundir.checkpoint.Target`, :class:`StageSettings`, the progress
  report, and the end of the run (:meth:`Session.finish`).

The drivers (evo/runner/synchronous.py, asynchronous.py) and everything they call take the session
or the few plain values they use. Tools and tests that build members of a config use
:func:`member_factory`.
"""

from __future__ import annotations

import inspect
import logging
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from evo.config import Config
from evo.core.devices import device_for, local_rank
from evo.core.final import FinalSettings
from evo.core.kinds import SearchSpace
from evo.core.progress import Progress, ProgressReporter
from evo.core.result import MemberResult, Scores
from evo.core.rules import PBTRules
from evo.learners.interface import Learner
from evo.logs import output_is_terminal
from evo.mpi import exchange
from evo.rundir.checkpoint import Target, remove_stray_temporaries
from evo.rundir.records import Continuation, RunRecords
from evo.runner.members import InitialHparams, MemberFactory
from evo.runner.stopping import StopRequest
from evo.runner.watchdog import Watchdog
from evo.sb3.cputune import tune_allocator
from evo.sb3.learner import EnvSettings, MemberSetup

if TYPE_CHECKING:
    from evo.tracking.writer import Tracking

logger = logging.getLogger("evo")


def takes_on_step(member: Learner) -> bool:
    """Whether ``member.evaluate`` takes the watchdog's ``on_step`` (evo.learners.interface.Learner.evaluate)."""
    try:
        parameters = inspect.signature(member.evaluate).parameters
    except (TypeError, ValueError):  # a callable without a signature: give it the argument
        return True
    return "on_step" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


@dataclass(frozen=True)
class Placement:
    """``num_agents`` members on ``world_size`` ranks in contiguous blocks: rank r holds r·k .. r·k+k-1."""

    num_agents: int
    world_size: int

    @property
    def per_rank(self) -> int:
        return self.num_agents // self.world_size

    def members_of(self, rank: int) -> range:
        """Member ids held by ``rank``."""
        return range(rank * self.per_rank, (rank + 1) * self.per_rank)

    def owner(self, member: int) -> int:
        """The rank that holds ``member``."""
        return member // self.per_rank


@dataclass(frozen=True)
class Budget:
    """How long members train: ``total_generations`` generations (an asynchronous run: intervals per
    member) of ``agent_training_steps`` env steps (``planned_steps`` once rounded up to the learner's
    units), following a replayed ``schedule`` if given."""

    total_generations: int
    agent_training_steps: int
    planned_steps: int
    schedule: tuple = ()

    def train(self, member: Learner, should_stop, progress: ProgressReporter | None = None) -> None:
        """``member`` trains one generation (or interval)."""
        member.train(self.agent_training_steps, should_stop, self.schedule, progress)


@dataclass(frozen=True)
class StageSettings:
    """BG-PBT's stages (``--max-distillations``): at most ``max_distillations`` stages, due after
    ``patience`` generations without a new best or ``stage_steps`` env steps; ``students`` per stage,
    each distilled for ``distillation_steps``; ``architecture``: the search space's architecture
    dimensions (of ``space``, the whole search space)."""

    max_distillations: int
    patience: int
    stage_steps: int | None
    students: int
    distillation_steps: int
    architecture: tuple[str, ...]
    space: SearchSpace


@dataclass(frozen=True)
class About:
    """What the start and end lines say of the run."""

    env_id: str
    run_dir: Path
    schedule_file: Path | None = None


@dataclass
class Session:
    """A run's session (see the module docstring): the same on every rank, but ``records`` (rank 0's)."""

    comm: Any
    placement: Placement
    rules: PBTRules
    budget: Budget
    members: MemberFactory
    target: Target
    """Where checkpoints go (and ``target.keep`` of them)."""
    checkpoint_every: int
    transport: str
    space: SearchSpace
    """The search space: the records write each explored value by its kind."""
    names: tuple[str, ...]
    """The explored hyperparameters, each a column of population.csv, in the learner's order."""
    about: About
    stop: StopRequest
    stopper: exchange.StopNotifier
    watchdog: Watchdog
    """The rank's watch over its members' training (a hung member seen, a stop honoured even then)."""
    records: RunRecords | None = None
    stages: StageSettings | None = None
    progress_interval: float = 0.0
    final: FinalSettings | None = None
    """The final pick at the end of a complete run (``--final-eval``; evo.runner.final), or None."""
    tracking: Tracking | None = None
    """This rank's writer to W&B or MLflow (``--tracker``; evo/tracking/writer.py), or None."""

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    def progress(self, start: int, local_members: int) -> ProgressReporter | None:
        """Rank 0's progress report during a generation (None elsewhere, or with an interval of 0): its
        members' env steps stand for the generation's."""
        if self.rank != 0 or self.progress_interval <= 0:
            return None
        progress = Progress(local_members * self.budget.planned_steps, self.budget.total_generations, generation=start)
        return ProgressReporter(
            progress, self.progress_interval, logger.info, sys.stdout, terminal=output_is_terminal(sys.stdout)
        )

    def train(self, member: Learner, should_stop, progress: ProgressReporter | None = None) -> None:
        """``member`` trains one generation (or interval) under the watchdog: each env step noted, a stop
        honoured even if the member hangs (its training then ends early, as at any stop)."""
        with self.watchdog.watching(f"member {member.member_id} ({self.about.env_id})"):
            self.budget.train(member, self.watchdog.beating(should_stop), progress)

    def score(self, member: Learner) -> Scores | None:
        """``member``'s scores now, its selection score kept in its history; its evaluation episodes are
        played under the watchdog as its training is (each env step noted, a hung env said and, with
        ``--step-timeout``, a failure). None: a stop request ended the episodes (at their next env step,
        or past the grace if the env hangs), and the generation (the interval) is dropped."""
        scores = None
        with self.watchdog.watching(f"member {member.member_id} ({self.about.env_id}) in its evaluation episodes"):
            on_step = self.watchdog.beating(self.stopper.poll, ends=True)
            # a learner of one's own written before evaluate took on_step: scored as before, its episodes untimed
            scores = member.evaluate(on_step=on_step) if takes_on_step(member) else member.evaluate()
        if scores is not None:
            member.scores.append(scores.score)
        return scores

    def close(self) -> None:
        """The stop request's handlers restored, the watchdog ended and the tracker's thread told to stop (the
        end of the run, or a test's)."""
        self.watchdog.uninstall()
        self.stop.uninstall()
        if self.tracking is not None:
            self.tracking.close()

    def track(self, result: MemberResult, generation: int, donor: int | None) -> None:
        """``--tracker``: member ``result.member``'s ``generation`` (an interval) and the ``donor`` it copied, from
        its own rank, handed to the rank's tracking thread (nothing without a tracker)."""
        if self.tracking is not None:
            self.tracking.generation(result, generation, donor)

    def track_moved(self, member: int) -> None:
        """``--tracker``: ``member`` leaves this rank (an asynchronous run moved it); the rank that takes it continues
        its tracked run."""
        if self.tracking is not None:
            self.tracking.release(member)

    def end_tracking(self, complete: bool) -> None:
        """``--tracker``: this rank's tracked runs closed (rank 0: the lineage table first, and after a complete
        run the exported agent), waiting for its own tracking thread only."""
        if self.tracking is not None:
            self.tracking.finish(complete, list(self.records.lineage) if self.records is not None else None)

    def finish(
        self,
        members: Mapping[int, Learner],
        stopped: bool,
        stopped_line: str,
        finals: Mapping[int, MemberResult],
        done_line: str | None = None,
    ) -> None:
        """The end of the run on every rank: the stop's or the end's log lines (``stopped_line``: rank 0's
        warning after a stop, with ``{signal}`` for what stopped it; ``done_line``: its last line after a
        complete run), TensorBoard's HPARAMS tab of each member with a final result (``finals``: none after a
        stop in training; every member's after one in the final pick, the training being complete), every
        member closed, the records closed, and the stop request's handlers restored."""
        if stopped:
            if self.rank == 0:
                logger.warning(
                    "%s", stopped_line.replace("{signal}", self.stop.signal_name or "a signal on another rank")
                )
            elif self.stop.requested:
                logger.warning("stopped by %s", self.stop.signal_name)
        for member_id, member in members.items():
            if member_id in finals:
                member.log_final(finals[member_id])
        for member in members.values():
            member.close()
        if self.records is not None:
            self.records.close()
            if done_line is not None and not stopped:
                logger.info("%s", done_line)
        exchange.barrier(self.comm)
        self.end_tracking(complete=not stopped)
        self.close()

    def halted(self, error: BaseException) -> None:
        """The end of a run that rank 0 halted on every rank (the env never reported a key ``--objective``
        reads): its reason on rank 0, the records closed as they stand, the stop request's handlers restored
        (collective)."""
        if self.rank == 0:
            logger.error("%s", error)
        if self.records is not None:
            self.records.close()
        exchange.barrier(self.comm)
        self.end_tracking(complete=False)
        self.close()


def prepare_process(torch_threads: int, cpu_tuning: bool) -> None:
    """Torch threads per rank, and evo's CPU tuning unless turned off."""
    torch.set_num_threads(torch_threads)
    if cpu_tuning:
        tune_allocator()


def rank_device(requested: str, rank: int) -> str:
    """This rank's device for ``--device`` (evo/core/devices.py): the CPU, or its local rank's GPU."""
    if requested == "cpu":
        return "cpu"
    gpus = torch.cuda.device_count()
    if requested == "cuda" and gpus == 0:  # start-up saw the GPU's device files: this torch cannot use it
        raise RuntimeError(
            f"--device cuda: rank {rank} sees a GPU, but this torch ({torch.__version__}) was built without CUDA; "
            "install its CUDA build (make install TORCH=cuda) or use --device cpu"
        )
    return device_for(requested, local_rank(os.environ, rank), gpus)


def member_factory(config: Config, device: str = "cpu") -> MemberFactory:
    """How the run ``config`` describes builds its members on ``device`` (the session's; tools and tests use
    it too, on the CPU)."""
    setup = MemberSetup(
        member_id=-1,
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
        eval_actions=config.eval_actions,
        score_window=config.score_window,
        select_on=config.select_on,
        exploit_buffer=config.exploit_buffer,
        objective=config.objective,
        device=device,
        budget=config.total_generations
        * config.agent.spec.planned_steps(config.agent_training_steps, config.agent.settings, config.agent.n_envs),
    )
    initial = InitialHparams(
        space=config.agent.search_space,
        defaults={**config.agent.settings, **config.agent.env_params},
        how=config.initial_hparams,
        seed=config.seed,
        schedule_start=config.schedule[0][1] if config.schedule else None,
        network=frozenset(config.agent.spec.architecture),
    )
    return MemberFactory(
        setup,
        initial,
        run_id=config.run_id,
        run_dir=config.run_dir,
        tb_writer=config.tb_writer,
        world_size=config.world_size,
        replay=config.checkpoint_buffers,
        init_source=config.init_source,
    )


def pbt_rules(config: Config) -> PBTRules:
    """The run's PBT rules."""
    return PBTRules(
        strategy=config.strategy,
        explore=config.explore,
        space=config.agent.explored_space,
        seed=config.seed,
        rounds=config.total_generations,
        population=config.num_agents,
        truncation_fraction=config.truncation_fraction,
        ties=config.ties,
        perturb_factors=config.perturb_factors,
        resample_probability=config.resample_probability,
        max_member_failures=config.max_member_failures,
        objective=config.objective,
        welch_alpha=config.exploit_alpha if config.exploit_test == "welch" else None,
    )


def stage_settings(config: Config) -> StageSettings | None:
    """BG-PBT's stages of the run, or None (``--max-distillations 0``)."""
    if not config.max_distillations:
        return None
    space = config.agent.search_space
    return StageSettings(
        max_distillations=config.max_distillations,
        patience=config.patience,
        stage_steps=config.stage_steps,
        students=config.stage_students,
        distillation_steps=config.stage_distillation_steps,
        architecture=tuple(name for name in space if name in config.agent.spec.architecture),
        space=space,
    )


def command_line(world_size: int, command: Sequence[str] | None) -> str:
    """How the run was started, for command.txt: its directory, mpiexec and the command."""
    words = [Path(sys.executable).name, *(command or sys.argv)]
    return f"cd {shlex.quote(os.getcwd())} && mpiexec -n {world_size} {shlex.join(words)}\n"


def open_records(
    config: Config, command: Sequence[str] | None = None, continued: Continuation | None = None
) -> RunRecords:
    """The records of the run ``config`` describes (rank 0's): a new run directory, or the records
    ``continued`` from a checkpoint."""
    line = command_line(config.world_size, command)
    return RunRecords(
        config.run_dir,
        config.explored_names,
        config.agent.search_space,
        config.tb_writer,
        new_run=(config.to_dict(), line) if continued is None else None,
        continued=continued,
        command_line=line,
        asynchronous=config.asynchronous,
        stages=config.max_distillations > 0,
        objective=config.objective,
        scored_return="score_test" if config.select_on == "test" else "score_train",
        start=init_lines(config),
    )


def init_lines(config: Config) -> list[dict]:
    """The lineage's first line with ``--init-from``: the agent every member started from, and its digest."""
    if config.init_source is None:
        return []
    return [
        {"event": "init", "generation": 0, "initial_hparams": config.initial_hparams, **config.init_source.to_dict()}
    ]


def open_session(
    config: Config,
    comm,
    command: Sequence[str] | None = None,
    continued: Continuation | None = None,
    records: bool = True,
    tracking: Tracking | None = None,
) -> Session:
    """The session of the run ``config`` describes, on every rank (collective): the process set up,
    the stop request installed, and rank 0's records opened (new, or ``continued`` from a checkpoint)
    before any rank goes on (they write into the run directory). ``records=False``: none (a test
    driving the loop without a run directory). ``tracking``: this rank's writer to ``--tracker``'s tracker
    (evo.main.tracking), or None."""
    prepare_process(config.torch_threads, config.cpu_tuning)
    remove_stray_temporaries(config.run_dir)  # a killed or full-disk write's left-overs, this host's dead ones
    stop = StopRequest().install()
    watchdog = Watchdog(lambda: stop.requested, comm.Get_rank(), config.stall_timeout, config.step_timeout).install()
    run_records = open_records(config, command, continued) if comm.Get_rank() == 0 and records else None
    exchange.barrier(comm)
    planned = config.agent.spec.planned_steps(config.agent_training_steps, config.agent.settings, config.agent.n_envs)
    if comm.Get_rank() == 0 and config.agent.spec.notes is not None:
        for note in config.agent.spec.notes(config.agent.settings, planned * config.total_generations):
            logger.warning("%s", note)
    return Session(
        comm=comm,
        placement=Placement(config.num_agents, config.world_size),
        rules=pbt_rules(config),
        budget=Budget(config.total_generations, config.agent_training_steps, planned, config.schedule),
        members=member_factory(config, rank_device(config.device, comm.Get_rank())),
        target=Target(
            config.run_dir,
            config.run_id,
            config.env_id,
            config.num_agents,
            config.world_size,
            config.keep_checkpoints,
        ),
        checkpoint_every=config.checkpoint_every,
        transport=config.transport,
        space=config.agent.search_space,
        names=config.explored_names,
        about=About(config.env_id, config.run_dir, config.schedule_file),
        stop=stop,
        stopper=exchange.StopNotifier(comm, lambda: stop.requested),
        watchdog=watchdog,
        records=run_records,
        stages=stage_settings(config),
        progress_interval=config.progress_interval,
        final=config.final_settings,
        tracking=tracking,
    )

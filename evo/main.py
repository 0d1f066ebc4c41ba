"""The entry points of the three PBT scripts (``pbt_rl_truct.py``, ``pbt_rl_truct_collective.py``,
``pbt_rl_wta.py`` and the installed ``evo-*`` commands): start-up on every rank, then the run.

Start-up: rank 0 parses and validates the command line, picks the run's driver (evo.runner:
synchronous or asynchronous) and, for ``--resume``, finds the checkpoint, and broadcasts them, or
the fact that the input was refused: every rank then exits with status 2. Nothing here imports
torch, SB3 or a learner: they are imported (with the session, evo.runner.session, and the driver's
module) only once the input is accepted, so bad input is refused at once, on any number of ranks;
``--init-from``'s agent is the exception (rank 0 checks it against a member of the run before it
takes the run directory, so a source that does not fit leaves nothing written).
Any exception afterwards prints the rank's traceback and aborts the whole MPI job, so no rank is
left waiting in a collective or a receive.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import socket
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo.config import Config, ConfigError, parse_config
from evo.config.envnames import is_atari, procgen_game
from evo.config.memory import RankHost, this_rank
from evo.core.devices import device_problem, visible_gpus
from evo.core.objective import ObjectiveNotReported
from evo.logs import install_logging
from evo.mpi import exchange
from evo.rundir.lock import RunDirError, RunLock
from evo.runner import Driver, driver_for
from evo.runner.final import final_pending, run_final_only
from evo.tracking import OFF

if TYPE_CHECKING:
    from evo.tracking.writer import Tracking

logger = logging.getLogger("evo")

EXIT_BAD_INPUT = 2


def startup(
    comm, argv: Sequence[str] | None, strategy: str, transport: str, prog: str
) -> tuple[Config, Driver, Any, RunLock | None]:
    """Rank 0 parses and validates (with where every rank runs, gathered first: the members of a host's ranks
    must fit in its memory); every rank checks what only it can see (its GPUs for ``--device``);
    then rank 0 takes the run directory's lock (creating the directory of a new run) and, for --resume,
    finds the checkpoint. Every rank gets the config, its driver and the checkpoint (rank 0 the lock too,
    held for the run; None elsewhere), or exits with status 2 if the input was refused (nothing written:
    a lock taken for it is released)."""
    rank = comm.Get_rank()
    ranks = rank_hosts(comm)
    parsed: tuple[str, object] = ("error", EXIT_BAD_INPUT)
    if rank == 0:
        try:
            parsed = (
                "ok",
                parse_config(
                    argv, strategy=strategy, transport=transport, world_size=comm.Get_size(), prog=prog, ranks=ranks
                ),
            )
        except ConfigError as error:
            refuse(prog, error)
        except SystemExit as stop:  # argparse: --help (0) or a malformed flag (2)
            parsed = ("exit", stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT)
    config = accepted(exchange.broadcast(comm, parsed))
    host_problems = exchange.gather_to_root(comm, rank_problems(config))
    outcome: tuple[str, object] = ("error", EXIT_BAD_INPUT)
    lock = None
    if rank == 0:
        try:
            if host_problems:
                raise ConfigError(list(dict.fromkeys(host_problems)))  # once per host
            config = accepted_source(config)
            driver = driver_for(config.asynchronous)
            lock = RunLock.acquire(config.run_dir, create=not config.resume)
            checkpoint = driver.find(config.run_dir, config.run_id, config.num_agents) if config.resume else None
            outcome = ("ok", (config, driver, checkpoint))
        except (ConfigError, RunDirError) as error:
            refuse(prog, error)
        if outcome[0] != "ok" and lock is not None:
            lock.release()
    return (*accepted(exchange.broadcast(comm, outcome)), lock)


def accepted_source(config: Config) -> Config:
    """``config`` with ``--init-from``'s source resolved (a run source's member chosen), once the agent is checked
    to fit the run (raises ConfigError otherwise: evo/tools/source.py); a config without one, or a resumed run's,
    as it is. Rank 0's, at start-up; torch and SB3 are imported for it only."""
    if config.init_from is None or config.resume:
        return config
    from evo.runner.session import member_factory
    from evo.tools.source import check_fit, run_source

    config = dataclasses.replace(config, init_source=config.init_source or run_source(config.init_from))
    check_fit(config.init_source, member_factory(config), config.algo)
    return config


def refuse(prog: str, error: ConfigError | RunDirError) -> None:
    """Rank 0's refusal of the input: every problem, once."""
    problems = error if isinstance(error, ConfigError) else ConfigError([str(error)])
    print(f"{prog}: error: {problems}", file=sys.stderr, flush=True)


def accepted(outcome: tuple[str, object]) -> Any:
    """What rank 0 decided, on every rank: its value, or the exit (status 2 for refused input)."""
    if outcome[0] != "ok":
        sys.stdout.flush()
        raise SystemExit(outcome[1] if outcome[1] is not None else EXIT_BAD_INPUT)
    return outcome[1]


def rank_hosts(comm) -> list[RankHost] | None:
    """Where every rank runs, its host and that host's available memory, on rank 0 (None elsewhere): the
    memory check sums the members of all the ranks on a host."""
    return exchange.gather_to_root(comm, [this_rank()])


def rank_problems(config: Config) -> list[str]:
    """What only this rank can see of the input: ``--device cuda`` on a rank with no GPU."""
    problem = device_problem(config.device, visible_gpus(os.environ), socket.gethostname(), os.environ)
    return [problem] if problem else []


def main(strategy: str, transport: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Entry point of the three scripts: start-up, then the run by its driver."""
    prog = prog or Path(sys.argv[0]).name
    comm = exchange.world()
    rank = comm.Get_rank()
    install_logging(rank)
    try:
        config, driver, checkpoint, lock = startup(comm, argv, strategy, transport, prog)
        install_logging(rank, config.log_level)
        try:
            return run(config, comm, [prog, *argv] if argv is not None else sys.argv, driver, checkpoint)
        finally:
            if lock is not None:  # not after an exception (the job is aborted below): a dead holder's is taken over
                lock.release()
    except SystemExit:
        raise
    except BaseException as error:
        sys.stderr.write(fatal_message(rank, os.uname().nodename, error))
        sys.stderr.flush()
        exchange.abort(comm, 1)
    return 0


def fatal_message(rank: int, host: str, error: BaseException) -> str:
    """What a rank says before it aborts the job: a full disk in words (the run's last complete checkpoint
    stands), anything else with its traceback."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        where = f" writing {error.filename}" if error.filename else ""
        return (
            f"[{rank}@{host}] evo: the disk is full ({error.strerror}{where}); aborting the MPI job. The run's last "
            "complete checkpoint stands (one is complete once its manifest is written, and a half-written file "
            "is removed at the next start): free some space, then --resume.\n"
        )
    return f"[{rank}@{host}] evo: unrecoverable error on rank {rank}; aborting the MPI job\n" + "".join(
        traceback.format_exception(error)
    )


def tracking(config: Config) -> Tracking | None:
    """This rank's writer to the tracker ``--tracker`` names (evo.tracking.writer.Tracking, its thread started:
    the tracker's package is imported by the thread; after a complete run rank 0 exports the run's pick with
    evo-export's own functions for the population's tracked run), or None: nothing imported."""
    if config.tracker == OFF:
        return None
    from evo.tools.export import export_pick
    from evo.tracking.writer import Population, Tracking

    shown = {
        "env_id": config.env_id,
        "algo": config.algo,
        "strategy": config.strategy,
        "explore": config.explore,
        "num_agents": config.num_agents,
        "world_size": config.world_size,
        "total_generations": config.total_generations,
        "agent_training_steps": config.agent_training_steps,
        "asynchronous": config.asynchronous,
        "objective": config.objective.text,
        "seed": config.seed,
        "run_dir": str(config.run_dir),
        "run_id": config.run_id,
    }
    population = Population(config.tracker, config.run_id, Path(config.run_dir), shown)
    objectives = () if config.objective.default else config.objective.names
    return Tracking(population, config.agent.search_space, objectives, export=export_pick)


def run(config: Config, comm, command: Sequence[str], driver: Driver, checkpoint: Any) -> int:
    """The run, once the input is accepted: nothing if the checkpoint holds all of it, else the session
    opened on every rank and the driver run. Returns the exit status."""
    nothing_left = driver.done(checkpoint, config.total_generations, config.num_agents)
    final_only = nothing_left is not None and final_pending(comm, config.run_dir, config.final_settings)
    if nothing_left is not None and not final_only:
        if comm.Get_rank() == 0:
            logger.info("%s", nothing_left)
        return 0
    hold_back_unused(config)
    from evo.runner.session import open_session  # torch, SB3 and the learners: only now

    session = open_session(config, comm, command, driver.continuation(checkpoint), tracking=tracking(config))
    try:
        if final_only:
            return run_final_only(session)
        return driver.load().run(session, checkpoint)
    except ObjectiveNotReported as error:  # raised on every rank at once: the run's input, found wanting late
        session.halted(error)
        return EXIT_BAD_INPUT


def hold_back_unused(config: Config) -> None:
    """SB3's optional imports of gym and OpenCV held back in a run that uses neither (evo/sb3/holdback.py): a
    registered env that is not a Procgen game, with no wrapper of the YAML's; OpenCV kept for an Atari game."""
    from evo.sb3.holdback import hold_back

    plain = ":" not in config.env_id and not procgen_game(config.env_id) and not config.agent.env_wrapper
    hold_back(gym=plain, cv2=plain and not is_atari(config.env_id))


def main_wta() -> int:
    return main("wta", "collective")


def main_truct() -> int:
    return main("truncation", "p2p")


def main_truct_collective() -> int:
    return main("truncation", "collective")

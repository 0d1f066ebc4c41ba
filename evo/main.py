"""The entry points of the three PBT scripts (``pbt_rl_truct.py``, ``pbt_rl_truct_collective.py``,
``pbt_rl_wta.py`` and the installed ``evo-*`` commands): start-up on every rank, then the run.

Start-up: rank 0 parses and validates the command line (and, for ``--resume``, finds the
checkpoint) and broadcasts the config, or the fact that it was refused: every rank then exits
with status 2. Nothing here imports torch, SB3 or a learner: they are imported (by ``evo.run``)
only once the input is accepted, so bad input is refused at once, on any number of ranks. Any
exception afterwards prints the rank's traceback and aborts the whole MPI job, so no rank is
left waiting in a collective or a receive.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from evo.config import Config, ConfigError, parse_config
from evo.logs import install_logging
from evo.mpi import exchange
from evo.rundir.checkpoint import Checkpoint, checkpoints_dir, latest
from evo.rundir.ready import ReadyCheckpoints, latest_ready

logger = logging.getLogger("evo")

EXIT_BAD_INPUT = 2


def startup(
    comm, argv: Sequence[str] | None, strategy: str, transport: str, prog: str
) -> tuple[Config, Checkpoint | ReadyCheckpoints | None]:
    """Rank 0 parses and validates (and, for --resume, finds the checkpoint); every rank gets
    the config and the checkpoint, or exits with status 2 if the input was refused."""
    outcome: tuple[str, object] = ("error", None)
    if comm.Get_rank() == 0:
        try:
            config = parse_config(argv, strategy=strategy, transport=transport, world_size=comm.Get_size(), prog=prog)
            checkpoint = None
            if config.resume:
                checkpoint = (find_ready_checkpoints if config.asynchronous else find_checkpoint)(config)
            outcome = ("ok", (config, checkpoint))
        except ConfigError as error:
            print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
            outcome = ("error", EXIT_BAD_INPUT)
        except SystemExit as stop:  # argparse: --help (0) or a malformed flag (2)
            outcome = ("exit", stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT)
    outcome = comm.bcast(outcome, root=0)
    if outcome[0] != "ok":
        sys.stdout.flush()
        raise SystemExit(outcome[1] if outcome[1] is not None else EXIT_BAD_INPUT)
    return outcome[1]


def find_ready_checkpoints(config: Config) -> ReadyCheckpoints:
    """What an asynchronous run's --resume continues from: each member's own last checkpoint (a
    member that reached no ready point starts afresh)."""
    checkpoints, skipped = latest_ready(config.run_dir, config.run_id, config.num_agents)
    for reason in skipped:
        logger.warning("skipping checkpoint: %s", reason)
    return checkpoints


def find_checkpoint(config: Config) -> Checkpoint:
    """The checkpoint a --resume continues from (ConfigError if there is none)."""
    run_dir = config.run_dir
    checkpoint, skipped = latest(run_dir, config.run_id)
    for reason in skipped:
        logger.warning("skipping checkpoint: %s", reason)
    if checkpoint is None:
        detail = ("; " + "; ".join(skipped)) if skipped else ""
        raise ConfigError(
            [
                f"--resume: no complete checkpoint in {checkpoints_dir(run_dir)}{detail}. "
                "Start a new run with another --run-dir instead."
            ]
        )
    return checkpoint


def main(strategy: str, transport: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Entry point of the three scripts."""
    prog = prog or Path(sys.argv[0]).name
    comm = exchange.world()
    rank = comm.Get_rank()
    install_logging(rank)
    try:
        config, checkpoint = startup(comm, argv, strategy, transport, prog)
        install_logging(rank, config.log_level)
        command = [prog, *argv] if argv is not None else sys.argv
        if config.asynchronous:  # torch, SB3 and the learners: only once the input is accepted
            from evo.asyncrun import run_asynchronous

            return run_asynchronous(config, comm, command, checkpoint)
        from evo.run import run

        return run(config, comm, command, checkpoint)
    except SystemExit:
        raise
    except BaseException:
        host = os.uname().nodename
        sys.stderr.write(f"[{rank}@{host}] evo: unrecoverable error on rank {rank}; aborting the MPI job\n")
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
    return 0


def main_wta() -> int:
    return main("wta", "collective")


def main_truct() -> int:
    return main("truncation", "p2p")


def main_truct_collective() -> int:
    return main("truncation", "collective")

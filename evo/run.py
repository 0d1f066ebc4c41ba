"""The PBT run: start-up on every rank, the generation loop, and the entry points.

``main(strategy, transport)`` is what the three root scripts call. Start-up: rank 0
parses and validates the command line and broadcasts the config (or the fact that it
was refused: every rank then exits with status 2). Any exception afterwards prints the
rank's traceback and aborts the whole MPI job, so no rank is left waiting in a
collective or a receive.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evo.config import Config, ConfigError, parse_config
from evo.space import sample_hparams

logger = logging.getLogger("evo")

EXIT_BAD_INPUT = 2
INIT_STREAM = 0x1417


def initial_hparams(config: Config, member: int) -> dict[str, float]:
    """Member ``member``'s starting hyperparameters, drawn from the search space."""
    rng = np.random.default_rng([config.seed, member, INIT_STREAM])
    return sample_hparams(config.agent.search_space, rng)


def startup(comm, argv: Sequence[str] | None, strategy: str, transport: str, prog: str) -> Config | None:
    """Rank 0 parses and validates; every rank gets the config, or None if it was refused."""
    outcome: tuple[str, object] = ("error", None)
    if comm.Get_rank() == 0:
        try:
            config = parse_config(argv, strategy=strategy, transport=transport, world_size=comm.Get_size(), prog=prog)
            outcome = ("ok", config)
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


def run(config: Config, comm, command: Sequence[str] | None = None) -> list[dict] | None:
    """Train the population for ``config.total_generations``; return the last generation's
    population records on rank 0 (None elsewhere). ``command`` (script and arguments) goes
    into the run's command.txt."""
    import torch

    from evo import exchange
    from evo.agent import build_member
    from evo.plan import generation_rng, plan_generation
    from evo.records import RunRecords, tb_dir

    rank = comm.Get_rank()
    torch.set_num_threads(config.torch_threads)
    records = RunRecords(config, list(command) if command is not None else None) if rank == 0 else None
    comm.Barrier()  # the run directory exists before any rank writes into it

    members = [build_member(config, m, initial_hparams(config, m), tb_dir(config, m)) for m in config.members_of(rank)]
    by_id = {member.member_id: member for member in members}
    scratch = np.empty_like(members[0].buffer) if config.transport == "collective" else None
    if rank == 0:
        logger.info(
            "%s: %d members on %d ranks, %s selection, %s exchange, %d generations x %d env steps; run dir %s",
            config.env_id,
            config.num_agents,
            config.world_size,
            config.strategy,
            config.transport,
            config.total_generations,
            config.agent_training_steps,
            config.run_dir,
        )

    population = None
    for generation in range(1, config.total_generations + 1):
        started = time.perf_counter()
        steps_before = sum(member.env_steps for member in members)
        for member in members:
            member.train(config.agent_training_steps)
        local = [
            {
                "member": member.member_id,
                "rank": rank,
                "score": member.score(),
                "env_steps": member.env_steps,
                "hparams": dict(member.hparams),
            }
            for member in members
        ]
        trained = sum(member.env_steps for member in members) - steps_before
        population = exchange.gather_to_root(comm, local)

        def decide(population=population, generation=generation):
            return plan_generation(
                generation,
                population,
                config.strategy,
                config.agent.search_space,
                generation_rng(config.seed, generation),
                config.truncation_fraction,
                config.perturb_factors,
                config.resample_probability,
            )

        exploits = exchange.decide_on_root(comm, decide)
        donors = {e.recipient: e.donor for e in exploits}
        for donor in set(donors.values()):
            if donor in by_id:
                by_id[donor].pack()
        exchange.exchange(comm, config.transport, donors, config.owner, {m: by_id[m].buffer for m in by_id}, scratch)
        for exploit in exploits:
            if exploit.recipient in by_id:
                by_id[exploit.recipient].load(by_id[exploit.recipient].buffer, exploit.new_hparams)

        for row in local:
            member = by_id[row["member"]]
            member.model.logger.record("pbt/score", row["score"])
            member.model.logger.record("pbt/exploited", int(row["member"] in donors))
            for name, value in row["hparams"].items():
                member.model.logger.record(f"hparams/{name}", value)
            member.model.logger.dump(row["env_steps"])

        total_trained = comm.reduce(trained, root=0)
        if rank == 0:
            elapsed = time.perf_counter() - started
            records.write_generation(generation, population, exploits)
            scores = np.array([row["score"] for row in population], dtype=float)
            logger.info(
                "gen %d/%d  env steps/member %d  best %.2f  mean %.2f  exploits %d  %.1fs  %.0f env-steps/s",
                generation,
                config.total_generations,
                max(row["env_steps"] for row in population),
                np.nanmax(scores) if np.isfinite(scores).any() else float("nan"),
                np.nanmean(scores) if np.isfinite(scores).any() else float("nan"),
                len(exploits),
                elapsed,
                total_trained / elapsed,
            )
            for exploit in exploits:
                logger.info(
                    "  member %d (%.2f) <- member %d (%.2f): %s",
                    exploit.recipient,
                    exploit.recipient_score,
                    exploit.donor,
                    exploit.donor_score,
                    ", ".join(exploit.changes),
                )

    for member in members:
        member.model.logger.close()
        member.close()
    if records is not None:
        records.close()
        best = max(population, key=lambda row: -np.inf if np.isnan(row["score"]) else row["score"])
        logger.info("done: best member %d scored %.2f; records in %s", best["member"], best["score"], config.run_dir)
    comm.Barrier()
    return population


def main(strategy: str, transport: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Entry point of the three scripts."""
    prog = prog or Path(sys.argv[0]).name
    from mpi4py import MPI

    from evo.logs import install_logging

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    install_logging(rank)
    try:
        config = startup(comm, argv, strategy, transport, prog)
        install_logging(rank, config.log_level)
        run(config, comm, [prog, *argv] if argv is not None else sys.argv)
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

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
from evo.core.selection import NO_PBT
from evo.core.space import sample_hparams

logger = logging.getLogger("evo")

EXIT_BAD_INPUT = 2
INIT_STREAM = 0x1417


def initial_hparams(config: Config, member: int) -> dict[str, float]:
    """Member ``member``'s starting hyperparameters: drawn from the search space, the YAML's
    defaults (``--initial-hparams defaults``), or the first entry of a replayed schedule."""
    if config.schedule:
        return dict(config.schedule[0][1])
    if config.initial_hparams == "defaults":
        return {name: float(config.agent.defaults[name]) for name in config.agent.search_space}
    rng = np.random.default_rng([config.seed, member, INIT_STREAM])
    return sample_hparams(config.agent.search_space, rng)


def startup(comm, argv: Sequence[str] | None, strategy: str, transport: str, prog: str) -> tuple[Config, object]:
    """Rank 0 parses and validates (and, for --resume, finds the checkpoint); every rank gets
    the config and the checkpoint, or exits with status 2 if the input was refused."""
    outcome: tuple[str, object] = ("error", None)
    if comm.Get_rank() == 0:
        try:
            config = parse_config(argv, strategy=strategy, transport=transport, world_size=comm.Get_size(), prog=prog)
            checkpoint = find_checkpoint(config) if config.resume else None
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


def find_checkpoint(config: Config):
    """The checkpoint a --resume continues from (ConfigError if there is none)."""
    from evo.rundir.checkpoint import checkpoints_dir, latest

    checkpoint, skipped = latest(config.run_dir, config.run_id)
    for reason in skipped:
        logger.warning("skipping checkpoint: %s", reason)
    if checkpoint is None:
        detail = ("; " + "; ".join(skipped)) if skipped else ""
        raise ConfigError(
            [
                f"--resume: no complete checkpoint in {checkpoints_dir(config.run_dir)}{detail}. "
                "Start a new run with another --run-dir instead."
            ]
        )
    return checkpoint


def save_checkpoint(comm, config: Config, generation: int, payloads: dict[int, bytes], run_state: dict | None) -> None:
    """Collective: every rank writes its members' files, then rank 0 writes the manifest
    (last) and prunes old checkpoints. ``run_state`` (rank 0 only) goes into the manifest."""
    from evo.mpi import exchange
    from evo.rundir.checkpoint import atomic_write, generation_dir, member_filename, prune, sha256, write_manifest

    directory = generation_dir(config.run_dir, generation)
    if comm.Get_rank() == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "manifest.json").unlink(missing_ok=True)
    comm.Barrier()
    entries = []
    for member, data in payloads.items():
        atomic_write(directory / member_filename(member), data)
        entries.append((member, {"file": member_filename(member), "bytes": len(data), "sha256": sha256(data)}))
    gathered = exchange.gather_to_root(comm, entries)
    if comm.Get_rank() == 0:
        manifest = {
            "format": 1,
            "run_id": config.run_id,
            "generation": generation,
            "env_id": config.env_id,
            "num_agents": config.num_agents,
            "world_size": config.world_size,
            "members": {str(member): entry for member, entry in sorted(gathered)},
            **(run_state or {}),
        }
        write_manifest(directory, manifest)
        prune(config.run_dir, config.keep_checkpoints, generation)
        logger.debug("checkpoint of generation %d written to %s", generation, directory)
    comm.Barrier()


def run(config: Config, comm, command: Sequence[str] | None = None, checkpoint=None) -> int:
    """Train the population up to ``config.total_generations``, from scratch or from
    ``checkpoint``. Returns the exit status: 0, or EXIT_STOPPED after a stop signal (a
    checkpoint of the last generation boundary is then on disk)."""
    import torch

    from evo.core.pb2 import PB2
    from evo.core.plan import generation_rng, plan_generation
    from evo.mpi import exchange
    from evo.rundir.checkpoint import dump_payload, load_payload
    from evo.rundir.records import RunRecords, tb_dir
    from evo.sb3.agent import (
        build_member,
        log_final_hparams,
        member_logger,
        member_seed,
        rng_state,
        set_rng_state,
        training_callbacks,
    )
    from evo.stopping import EXIT_STOPPED, StopRequest

    rank = comm.Get_rank()
    torch.set_num_threads(config.torch_threads)
    if config.cpu_tuning:
        from evo.sb3.cputune import tune_allocator

        tune_allocator()
    stop_request = StopRequest().install()
    stopper = exchange.StopNotifier(comm, lambda: stop_request.requested)
    start = checkpoint.generation if checkpoint is not None else 0
    manifest = checkpoint.manifest if checkpoint is not None else {}
    if start >= config.total_generations:
        if rank == 0:
            logger.info(
                "the run already has %d of %d generations; pass --total-generations N > %d to extend it",
                start,
                config.total_generations,
                start,
            )
        return 0

    records = None
    if rank == 0:
        records = RunRecords(
            config,
            list(command) if command is not None else None,
            resume_generation=start if checkpoint is not None else None,
            lineage=manifest.get("lineage"),
            population_step=manifest.get("population_step"),
        )
    comm.Barrier()  # the run directory exists before any rank writes into it

    members = []
    for member_id in config.members_of(rank):
        # a resumed member gets fresh envs, seeded by the generation it resumes at
        env_seed = member_seed(config.seed, member_id, stream=2 + start) if start else None
        member = build_member(
            config, member_id, initial_hparams(config, member_id), tb_dir(config, member_id), env_seed
        )
        if checkpoint is not None:
            payload = load_payload(checkpoint.member_path(member_id))
            if payload["run_id"] != config.run_id or payload["generation"] != start:
                raise RuntimeError(f"{checkpoint.member_path(member_id)} does not belong to this checkpoint")
            member.restore(payload)
            member.model.set_logger(member_logger(tb_dir(config, member_id), purge_step=member.env_steps + 1))
            if manifest["world_size"] == config.world_size:
                set_rng_state(payload["rng"])
            else:
                torch.manual_seed(member_seed(config.seed, rank, stream=1000 + start))
        members.append(member)
    by_id = {member.member_id: member for member in members}
    scratch = np.empty_like(members[0].buffer) if config.transport == "collective" else None
    if rank == 0:
        logger.info(
            "%s: %d members on %d ranks, %s selection, %s exchange, generations %d..%d x %d env steps; run dir %s",
            config.env_id,
            config.num_agents,
            config.world_size,
            f"{config.strategy} ({config.explore} explore)"
            if config.strategy != NO_PBT
            else "no (control: --strategy none)",
            config.transport,
            start + 1,
            config.total_generations,
            config.agent_training_steps,
            config.run_dir,
        )
        if checkpoint is not None:
            logger.info("resumed from %s (generation %d)", checkpoint.directory, start)
        if config.schedule:
            logger.info(
                "following the schedule in %s: %d segment(s), changes at env steps %s",
                config.schedule_file,
                len(config.schedule),
                ", ".join(str(steps) for steps, _ in config.schedule[1:]) or "none",
            )

    if checkpoint is None:  # the initial population, so that a stop in generation 1 can resume
        rng = rng_state()
        initial = {m.member_id: dump_payload(m.state_payload(config.run_id, 0, rng)) for m in members}
        save_checkpoint(comm, config, 0, initial, {"lineage": [], "population_step": 0} if rank == 0 else None)

    # PB2's history of the population, on rank 0 where the plan is decided; in every checkpoint
    pb2 = PB2.from_state(config.agent.search_space, manifest.get("pb2")) if config.explore == "pb2" else None
    callback_poll = stopper.poll
    pending = None  # (generation, payloads, run_state) of the last boundary not yet on disk
    stopped = False
    completed = start
    population = None
    for generation in range(start + 1, config.total_generations + 1):
        started = time.perf_counter()
        steps_before = sum(member.env_steps for member in members)
        for member in members:
            if callback_poll():
                break
            member.train(
                config.agent_training_steps, callback=training_callbacks(member, callback_poll, config.schedule)
            )
        trained_at = time.perf_counter()
        if stopper.agree():
            stopped = True
            break
        agreed_at = time.perf_counter()
        evaluations = {}
        for member in members:
            evaluations[member.member_id] = member.evaluate()
            member.scores.append(evaluations[member.member_id]["score"])
        scored_at = time.perf_counter()
        local = [
            {
                "member": member.member_id,
                "rank": rank,
                **evaluations[member.member_id],
                "env_steps": member.env_steps,
                "hparams": dict(member.hparams),
            }
            for member in members
        ]
        trained = sum(member.env_steps for member in members) - steps_before

        def decide(population, generation=generation):
            return plan_generation(
                generation,
                population,
                config.strategy,
                config.agent.search_space,
                generation_rng(config.seed, generation),
                config.truncation_fraction,
                config.perturb_factors,
                config.resample_probability,
                pb2=pb2,
            )

        outcome = exchange.exploit_and_explore(comm, local, by_id, decide, config.transport, config.owner, scratch)
        population, exploits, donors = outcome.population, outcome.exploits, outcome.donors
        exchanged_at = time.perf_counter()

        for row in local:
            member = by_id[row["member"]]
            member.model.logger.record("pbt/score", row["score"])
            for key in ("score_train", "score_test"):
                if row[key] == row[key]:  # not NaN
                    member.model.logger.record(f"pbt/{key}", row[key])
            member.model.logger.record("pbt/exploited", int(row["member"] in donors))
            for name, value in row["hparams"].items():
                member.model.logger.record(f"hparams/{name}", value)
            member.model.logger.dump(row["env_steps"])

        timing = exchange.gather_to_root(
            comm,
            [
                {
                    "trained": trained,
                    "train_s": trained_at - started,
                    "score_s": scored_at - agreed_at,
                    "wait_s": (agreed_at - trained_at) + (outcome.gathered_at - scored_at),
                    "exchange_s": exchanged_at - outcome.gathered_at,
                }
            ],
        )
        run_state = None
        if rank == 0:
            elapsed = time.perf_counter() - started
            total_trained = sum(t["trained"] for t in timing)
            records.write_generation(generation, population, exploits)
            records.write_timing(generation, elapsed, total_trained, timing)
            run_state = {"lineage": list(records.lineage), "population_step": records.population_step}
            if pb2 is not None:
                run_state["pb2"] = pb2.state()
            log_generation(config, generation, population, exploits, elapsed, total_trained)

        rng = rng_state()
        payloads = {m.member_id: dump_payload(m.state_payload(config.run_id, generation, rng)) for m in members}
        if generation % config.checkpoint_every == 0 or generation == config.total_generations:
            save_checkpoint(comm, config, generation, payloads, run_state)
            pending = None
        else:
            pending = (generation, payloads, run_state)
        completed = generation

    if stopped:
        if pending is not None:
            save_checkpoint(comm, config, *pending)
        if rank == 0:
            logger.warning(
                "stopped by %s: checkpoint of generation %d is in %s; the partial generation %d is redone on "
                "--resume. Exit status %d.",
                stop_request.signal_name or "a signal on another rank",
                completed,
                config.run_dir,
                completed + 1,
                EXIT_STOPPED,
            )
        elif stop_request.requested:
            logger.warning("stopped by %s", stop_request.signal_name)

    if not stopped and completed == config.total_generations and completed > start:
        log_final_hparams(members, local)
    for member in members:
        member.model.logger.close()
        member.close()
    if records is not None:
        records.close()
        if population is not None and not stopped:
            best = max(population, key=lambda row: -np.inf if np.isnan(row["score"]) else row["score"])
            logger.info(
                "done: best member %d scored %.2f; records in %s", best["member"], best["score"], config.run_dir
            )
    comm.Barrier()
    stop_request.uninstall()
    return EXIT_STOPPED if stopped else 0


def log_generation(config: Config, generation: int, population, exploits, elapsed: float, trained: int) -> None:
    scores = np.array([row["score"] for row in population], dtype=float)
    finite = np.isfinite(scores).any()
    logger.info(
        "gen %d/%d  env steps/member %d  best %.2f  mean %.2f  exploits %d  %.1fs  %.0f env-steps/s",
        generation,
        config.total_generations,
        max(row["env_steps"] for row in population),
        np.nanmax(scores) if finite else float("nan"),
        np.nanmean(scores) if finite else float("nan"),
        len(exploits),
        elapsed,
        trained / elapsed,
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


def main(strategy: str, transport: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Entry point of the three scripts."""
    prog = prog or Path(sys.argv[0]).name
    from evo.logs import install_logging
    from evo.mpi.exchange import world

    comm = world()
    rank = comm.Get_rank()
    install_logging(rank)
    try:
        config, checkpoint = startup(comm, argv, strategy, transport, prog)
        install_logging(rank, config.log_level)
        return run(config, comm, [prog, *argv] if argv is not None else sys.argv, checkpoint)
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

"""Whole runs in one process on MPI.COMM_SELF, started as the entry point starts them (tests/support.py's
run_in_process): the rules a run keeps whatever the placement of its members, moved down from the e2e tier
(they ran under mpiexec; what they check is the session's, the driver's and the records', not MPI's):
the tie rule, the control without PBT, and failures counted across a resume."""

import logging

import pytest
import yaml

import tests.faulty_env
from evo.core.restart import TooManyFailures
from evo.rundir import checkpoint as ckpt
from tests.support import (
    PPO_SIX,
    TINY_DEFAULT,
    budget,
    generations_recorded,
    read_lineage,
    read_population,
    run_in_process,
    write_hyperparams,
)

TINY_ACROBOT = ["--env-id", "Acrobot-v1", "--env-kwargs", "max_episode_steps:20", "--num-agents", "2"]
TINY_ACROBOT += ["--total-generations", "2"]
TINY_ACROBOT += ["--agent-training-steps", "128", "--eval-episodes", "1", "--select-on", "test"]
TINY_ACROBOT += ["--hyperparams", "n_envs:2", "n_steps:64", "n_minibatches:2", "n_epochs:1", "--tb-writer", "False"]


def wta(tmp_path, caplog, *flags):
    """pbt_rl_wta.py's rule and transport on Acrobot cut to 20 steps: no policy swings up in 20 steps from
    rest, so every member scores -20 (the episode's limit) and winner-takes-all sees a population tied to
    the last digit."""
    run_dir = tmp_path / ("run" + "".join(flags))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="evo"):
        assert run_in_process([*TINY_ACROBOT, *flags, "--run-dir", str(run_dir)], "wta", "collective") == 0
    return read_population(run_dir), read_lineage(run_dir), caplog.text


def test_tied_members_keep_their_weights_unless_told_to_copy(tmp_path, caplog):
    rows, lineage, log = wta(tmp_path, caplog)
    first = [float(row["score"]) for row in rows if row["generation"] == "1"]
    assert first == [-20.0, -20.0]  # the premise: a tie
    kept = [e for e in lineage if e["generation"] == 1]
    assert [(e["recipient"], e["donor"]) for e in kept] == [(1, 1)]  # explores, copies nobody
    assert kept[0]["old_hparams"] != kept[0]["new_hparams"]
    first_rows = {row["member"]: row for row in rows if row["generation"] == "1"}
    assert first_rows["1"]["donor"] == ""  # population.csv agrees: member 1 copied nobody
    assert "  member 1 (-20.00) keeps its weights: " in log
    assert "copies 0 (+1 tied: explored without a copy)" in log  # it said "exploits 1": nothing was copied
    assert "member 1 (-20.00) <- member 0 (-20.00)" not in log  # generation 1: nobody copied

    rows, lineage, log = wta(tmp_path, caplog, "--ties", "copy")
    copied = [e for e in lineage if e["generation"] == 1]
    assert [(e["recipient"], e["donor"]) for e in copied] == [(1, 0)]  # the old rule: member 0, by index
    assert {row["member"]: row for row in rows if row["generation"] == "1"}["1"]["donor"] == "0"
    assert "  member 1 (-20.00) <- member 0 (-20.00): " in log
    assert "copies 1  " in log


def test_strategy_none_trains_the_same_population_without_pbt(tmp_path, caplog):
    from evo.config import parse_config
    from evo.runner.session import member_factory

    tiny = write_hyperparams(tmp_path)
    run_dir = tmp_path / "control"
    flags = ["--env-id", "CartPole-v1", *budget(4, 3, 256), "--hyperparams", str(tiny), "--seed", "5"]
    with caplog.at_level(logging.INFO, logger="evo"):
        status = run_in_process(
            [*flags, "--strategy", "none", "--run-dir", str(run_dir), "--tb-writer", "False"], "wta"
        )
    assert status == 0
    assert "no (control: --strategy none) selection" in caplog.text
    rows = read_population(run_dir)
    assert len(rows) == 12 and all(row["donor"] == "" for row in rows)
    assert read_lineage(run_dir) == []
    initial = member_factory(parse_config(flags, world_size=2, check_run_dir=False)).initial
    for row in rows:  # every member keeps the initial hyperparameters a PBT run with this seed starts from
        assert {name: float(row[name]) for name in PPO_SIX} == pytest.approx(initial.of(int(row["member"])))
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["strategy"] == "none"


def test_a_resumed_run_counts_the_failures_before_it(tmp_path, monkeypatch):
    """Member 0 fails once in generation 3 under --max-member-failures 1 and the run completes; the resumed
    run reads that failure from the lineage, so member 0's next one (its env, restored from the checkpoint,
    passes step 300 again in generation 5) ends the job, its last checkpoint intact."""
    monkeypatch.setattr(tests.faulty_env, "_raised", [0])  # the faults this process raised: none yet
    run_dir = tmp_path / "run"
    argv = [
        *("--env-id", "tests.faulty_env:FaultyCartPole-v0", "--env-kwargs", "fail_rank:0", "fail_after:300"),
        *("fail_times:1", "--hyperparams", str(write_hyperparams(tmp_path, TINY_DEFAULT))),
        *budget(2, 4, 256),
        *("--run-dir", str(run_dir), "--tb-writer", "False", "--max-member-failures", "1", "--seed", "1"),
    ]
    assert run_in_process(argv) == 0
    assert generations_recorded(run_dir) == {g: [0, 1] for g in (1, 2, 3, 4)}
    (restart,) = [e for e in read_lineage(run_dir) if e.get("event") == "restart"]
    assert (restart["generation"], restart["member"], restart["failures"]) == (3, 0, 1)
    monkeypatch.setattr(tests.faulty_env, "_raised", [0])  # a new process would raise again
    with pytest.raises(TooManyFailures, match=r"member 0 \(2 failures, the last: RuntimeError: injected fault"):
        run_in_process(["--run-dir", str(run_dir), "--resume", "--total-generations", "6"])
    assert ckpt.latest(run_dir)[0].generation == 4

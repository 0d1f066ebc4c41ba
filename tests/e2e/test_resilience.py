"""Surviving the cluster, with real MPI processes: resume, stop signals, dead ranks, bad input."""

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import (
    a_kill_takes_the_rank_with_it,
    assert_best_kept,
    common,
    running,
    scalar_tags,
    tree_digest,
    wait_for,
)
from tests.gated_env import gate_flags, held
from tests.support import (
    PPO_SIX,
    ROOT,
    TINY_DEFAULT,
    budget,
    generations_recorded,
    mpi_env,
    mpiexec,
    read_population,
    write_hyperparams,
)


def tb_steps(event_dir, tag):
    accumulator, _ = scalar_tags(event_dir)
    return [event.step for event in accumulator.Scalars(tag)]


def test_resume_continues_records_on_another_world_size(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    first = mpiexec(2, ["pbt_rl_truct.py", *budget(4, 2, 256), *common(run_dir, tiny_hyperparams)])
    assert first.returncode == 0, first.stderr[-3000:]
    saved = {m: ckpt.load_payload(ckpt.generation_dir(run_dir, 2) / ckpt.member_filename(m)) for m in range(4)}
    best_before = assert_best_kept(run_dir).best

    # 4 members from 2 ranks x 2 onto 4 ranks x 1; more generations extend the run
    second = mpiexec(4, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "4"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stdout
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3, 4)}
    population = read_population(run_dir)
    for row in population:
        assert int(row["env_steps"]) == 256 * int(row["generation"])
        assert int(row["rank"]) == int(row["member"]) // (2 if int(row["generation"]) <= 2 else 1)
    # generation 3 trained with exactly the hyperparameters the checkpoint held
    for row in (r for r in population if r["generation"] == "3"):
        for name, value in saved[int(row["member"])]["hparams"].items():
            assert float(row[name]) == value
    lineage = [yaml.safe_load(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    assert [e["generation"] for e in lineage] == [1, 2, 3, 4]
    # TensorBoard continues with no step missing or shown twice
    for member in range(4):
        steps = tb_steps(run_dir / "tb" / f"member_{member}", "pbt/score")
        assert steps == [256, 512, 768, 1024]
    assert ckpt.latest(run_dir)[0].generation == 4
    assert [p.name for p in ckpt.candidates(run_dir)] == ["gen_000004", "gen_000003"]  # --keep-checkpoints 2
    # the resumed run went on from the kept best: it kept it unless a later score beat it
    best_after = assert_best_kept(run_dir).best
    if best_after["generation"] <= 2:
        assert best_after == best_before
    # it compares with its checkpoint's best: one that no score can beat stays, its file carried over
    last = ckpt.latest(run_dir)[0]
    unbeaten = {**last.best, "score": 1e9}
    ckpt.write_manifest(last.directory, {**last.manifest, "best": unbeaten})
    third = mpiexec(4, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "5"])
    assert third.returncode == 0, third.stderr[-3000:]
    fifth = ckpt.latest(run_dir)[0]
    assert fifth.generation == 5 and fifth.best == unbeaten
    # its weights are still those it was scored with in generation 4; its member has trained on since
    kept_state = ckpt.load_payload(fifth.best_path())["state"]
    assert not torch.equal(kept_state, ckpt.load_payload(fifth.member_path(unbeaten["member"]))["state"])
    assert generations_recorded(run_dir)[5] == [0, 1, 2, 3]


@pytest.mark.parametrize("target, signum", [("rank", signal.SIGTERM), ("mpiexec", signal.SIGUSR1)])
def test_stop_signal_mid_generation_checkpoints_and_resumes(tmp_path, target, signum):
    """A signal to one rank (the other learns of it by a stop notice) or to mpiexec (which forwards
    it to every rank), while generation 2 trains: the run stops with generation 1's checkpoint and
    resumes from it. The signalled ranks are held inside generation 2 until it comes."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    ranks = [1] if target == "rank" else [0, 1]
    # 2 envs x 64 steps a rollout: generation 1 is each env's first 1024 steps
    args = [*budget(2, 3, 2048), *gate_flags("CartPole-v1", 1024 + 100, gate, ranks)]
    with running(2, ["pbt_rl_truct.py", *args, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]) as job:
        wait_for(lambda: len(held(gate, ranks)) == len(ranks), 240, "the gate in generation 2")
        os.kill(held(gate, ranks)[1] if target == "rank" else job.pid, signum)
        stdout, stderr = job.communicate(timeout=90)
    assert job.returncode == 75, stderr[-3000:]
    assert "checkpoint of generation 1" in stdout + stderr
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1

    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--agent-training-steps", "512"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert generations_recorded(run_dir) == {1: [0, 1], 2: [0, 1], 3: [0, 1]}


FAULTY = ["--env-id", "tests.faulty_env:FaultyCartPole-v0"]


def test_exception_on_rank_2_of_4_ends_the_job_with_its_traceback(tmp_path, tiny_hyperparams):
    """With --max-member-failures 0, a member's failure ends the job at once, as before restarts."""
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    result = mpiexec(  # it trains 10^6 steps unless the fault ends it: a hang meets the timeout
        4,
        [
            "pbt_rl_truct.py",
            *FAULTY,
            *("--env-kwargs", "fail_rank:2", "fail_after:3000"),
            *("--agent-training-steps", "1000000", "--total-generations", "2", "--max-member-failures", "0"),
            *("--hyperparams", str(hyperparams), "--run-dir", str(tmp_path / "run")),
        ],
        timeout=120,
    )
    assert result.returncode != 0
    assert "RuntimeError: injected fault on rank 2" in result.stderr
    assert "Traceback" in result.stderr and "unrecoverable error on rank 2" in result.stderr
    assert ckpt.latest(tmp_path / "run")[0].generation == 0


@pytest.mark.parametrize("script", ["pbt_rl_truct.py", "pbt_rl_wta.py"])  # both transports, both rules
def test_a_member_whose_env_raises_is_restarted_and_the_run_completes(tmp_path, script):
    """Member 2 (the first of rank 1) fails once in generation 3 (its env's step 301 of 128 a
    generation): logged with its traceback, restarted from a top member's weights with a fresh
    draw, it trains generation 3 again, and every (generation, member) is recorded once."""
    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        [
            script,
            *FAULTY,
            *("--env-kwargs", "fail_rank:1", "fail_after:300", "fail_times:1"),
            *budget(4, 4, 256),
            *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT)),
        ],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stdout + result.stderr
    assert "member 2 failed in generation 3 while training" in log and "Traceback" in log
    assert "RuntimeError: injected fault on rank 1" in log
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3, 4)}
    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    assert all(int(row["env_steps"]) == 256 * g for (g, _), row in rows.items())  # its own counter, kept
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    (restart,) = [entry for entry in lineage if entry.get("event") == "restart"]
    assert (restart["generation"], restart["member"], restart["failures"]) == (3, 2, 1)
    assert restart["error"] == "RuntimeError: injected fault on rank 1"
    # a donor among the best of generation 3's members that kept their weights (a quarter: the best)
    exploits = [e for e in lineage if "recipient" in e and e["generation"] == 3]
    copied = {e["recipient"] for e in exploits if e["donor"] != e["recipient"]}
    kept = {m: float(rows[(3, m)]["score"]) for m in (0, 1, 3) if m not in copied}
    assert restart["donor"] == max(kept, key=lambda m: (kept[m], -m))
    assert restart["donor_score"] == kept[restart["donor"]]
    assert restart["new_hparams"] != restart["old_hparams"]
    assert {name: float(rows[(3, 2)][name]) for name in PPO_SIX} == pytest.approx(restart["new_hparams"])
    said = "member 2 failed (RuntimeError: injected fault on rank 1; failure 1): restarted from member"
    assert f"{said} {restart['donor']}'s weights" in log


def test_a_member_failing_past_the_limit_ends_the_job_with_its_checkpoint(tmp_path):
    """Both members of rank 1 fail in generation 3 (their envs' step 301) and restart with new envs,
    in which the fault comes back in generation 5: a second failure each, past
    --max-member-failures 1. Generation 4's checkpoint stays."""
    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        [
            "pbt_rl_truct.py",
            *FAULTY,
            *("--env-kwargs", "fail_rank:1", "fail_after:300"),
            *budget(4, 8, 256),
            *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT), "--max-member-failures", "1"),
        ],
    )
    assert result.returncode != 0
    for member in (2, 3):
        assert f"member {member} (2 failures, the last: RuntimeError: injected fault on rank 1)" in result.stderr
    assert "more than --max-member-failures 1 allows" in result.stderr
    found, skipped = ckpt.latest(run_dir)
    assert found is not None and found.generation == 4, skipped
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3, 4)}
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    assert [(e["generation"], e["member"]) for e in lineage if e.get("event") == "restart"] == [(3, 2), (3, 3)]


def test_sigkill_of_one_rank_ends_the_job_and_the_checkpoint_loads(tmp_path):
    """Rank 0 killed while it trains generation 2 (held there by tests/gated_env.py, so generation 1's
    checkpoint is complete): the other rank ends with it, and the checkpoint loads."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    args = [*budget(2, 3, 2048), *gate_flags("CartPole-v1", 1024 + 100, gate, ranks=[0])]
    with running(2, ["pbt_rl_truct.py", *args, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]) as job:
        wait_for(lambda: 0 in held(gate, [0]), 240, "rank 0 at the gate in generation 2")
        os.kill(held(gate, [0])[0], signal.SIGKILL)
        job.communicate(timeout=60)  # the other rank ends with it (a hang meets the timeout)
    assert job.returncode != 0
    found, skipped = ckpt.latest(run_dir)
    assert found is not None and found.generation == 1, skipped
    for member in (0, 1):
        assert ckpt.load_payload(found.member_path(member))["generation"] == 1


def bad_inputs(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("CartPole-v1: {n_steps: [64\n")
    unknown = tmp_path / "unknown.yml"
    unknown.write_text("CartPole-v1:\n  n_step: 64\n")
    wrong_type = tmp_path / "type.yml"
    wrong_type.write_text("CartPole-v1:\n  n_epochs: ten\n")
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    no_checkpoint = tmp_path / "no-checkpoint"
    no_checkpoint.mkdir()
    from evo.config import parse_config

    saved = parse_config(["--run-dir", str(no_checkpoint)], world_size=2, check_run_dir=False)
    (no_checkpoint / "config.yaml").write_text(yaml.safe_dump(saved.to_dict()))
    existing = tmp_path / "existing"
    twice = tmp_path / "twice.yml"
    twice.write_text("CartPole-v1:\n  gamma: 0.9\n  gamma: 0.95\n")
    empty = tmp_path / "empty.yml"
    empty.write_text("# nothing yet\n")
    return [
        (["--env-id", "CartPol-v1"], "Did you mean 'CartPole-v1'"),
        (["--hyperparams", "max_grad_norm:-0.5"], "max_grad_norm (--hyperparams) is -0.5; it must be > 0"),
        (["--hyperparams", "ent_coef:.nan"], "ent_coef (--hyperparams) is nan (not a number); it must be >= 0"),
        (
            ["--hyperparams", "policy_kwargs:{net_arch: [1000000, 1000000]}"],
            "memory: each member needs at least 32.0 TB",
        ),
        (["--conf-file", str(twice)], "'gamma' is given twice in one mapping (lines 2 and 3)"),
        (["--conf-file", str(empty)], "is empty: it holds no settings"),
        (["--num-agents", "3"], "--num-agents 3 is not a multiple of the 2 MPI ranks"),
        (["--agent-training-steps", "0"], "--agent-training-steps 0: must be a positive whole number"),
        (["--total-generations", "-2"], "--total-generations -2: must be a positive whole number"),
        (["--truncation-fraction", "0.6"], "--truncation-fraction 0.6: must be in (0, 0.5]"),
        (["--learning-rate-range", "1e-3", "1e-4"], "the range is reversed"),
        (["--gamma-range", "0.99", "0.99"], "the range is empty"),
        (["--hyperparams", str(broken)], "invalid YAML"),
        (["--hyperparams", str(unknown)], "unknown key 'n_step'; did you mean 'n_steps'?"),
        (["--hyperparams", str(wrong_type)], "n_epochs must be int, got 'ten'"),
        (["--hyperparams", str(tmp_path / "missing.yml")], "cannot read the file"),
        (["--run-dir", str(existing)], "already exists; evo will not overwrite a run"),
        (["--run-dir", str(not_a_dir / "run")], "is not a writable directory"),
        (["--run-dir", str(no_checkpoint), "--resume"], "--resume: no complete checkpoint"),
        (["--run-dir", str(existing), "--resume"], "is not an evo run directory"),
        # issue 38: --objective and env parameters
        (["--objective", "retrun"], "'retrun' is not an objective; did you mean 'return'?"),
        (["--objective", "return,info:energy:lowest"], "the direction 'lowest' of info:energy is not 'max' or 'min'"),
        (
            [
                "--env-id",
                "evo.examples.shaped:ShapedCorridor-v0",
                "--objective",
                "return,info:success",
                "--explore",
                "pb2",
            ],
            "several objectives rank members by Pareto fronts, and pb2 its GP models how one score changes",
        ),
        (["--objective", "info:is_success"], "ended without 'is_success' in its info; the keys it reported: no key"),
        (["--hyperparams", "search_space:{env.gravityy: {low: 9, high: 10}}"], "has no attribute 'gravityy'"),
        (
            ["--env-id", "bigfish", "--hyperparams", "search_space:{env.x: {low: 0.1, high: 1.0}}"],
            "Procgen games take no env parameters",
        ),
    ]


def test_every_bad_input_exits_2_once_and_touches_nothing(tmp_path):
    """Each bad input is refused by rank 0 once, every rank exits 2, nothing is written; and no rank
    imports torch or SB3 first (they are blocked here), so the answer comes at once on any number
    of ranks."""
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "population.csv").write_text("generation,member\n1,0\n")
    cases = bad_inputs(tmp_path)
    before = tree_digest(tmp_path)
    for argv, message in cases:
        if "--run-dir" not in argv:
            argv = [*argv, "--run-dir", str(tmp_path / "never-created")]
        result = mpiexec(2, [*WITHOUT_TORCH, "pbt_rl_truct.py", *argv], timeout=60)
        assert result.returncode == 2, (argv, result.stderr[-2000:])
        assert result.stderr.count(message) == 1, (argv, result.stderr)
        assert result.stderr.count("error:") == 1 and "Traceback" not in result.stderr, (argv, result.stderr)
        assert not (tmp_path / "never-created").exists()
        assert tree_digest(tmp_path) == before, argv


WITHOUT_TORCH = [str(ROOT / "tests" / "without.py"), "torch,stable_baselines3"]


def test_the_blocked_imports_are_really_blocked(tmp_path, tiny_hyperparams):
    """The same wrapper around good input: the run needs torch, and fails without it."""
    argv = [*budget(2, 1, 128), *common(tmp_path / "run", tiny_hyperparams)]
    result = mpiexec(2, [*WITHOUT_TORCH, "pbt_rl_truct.py", *argv], timeout=60)
    assert result.returncode != 0 and "torch is blocked by tests/without.py" in result.stderr, result.stderr[-2000:]


@pytest.mark.skipif(os.getuid() != 0, reason="Open MPI's root check only applies to root")
def test_launcher_names_the_root_variables():
    env = {k: v for k, v in mpi_env().items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    result = subprocess.run(
        [sys.executable, "-m", "evo.launch", "-n", "2", "pbt_rl_truct.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in result.stderr


def test_launcher_asks_for_oversubscribe():
    cores = len(os.sched_getaffinity(0))
    result = subprocess.run(
        [sys.executable, "-m", "evo.launch", "-n", str(cores + 1), "pbt_rl_truct.py"],
        cwd=ROOT,
        env={k: v for k, v in mpi_env().items() if k != "SLURM_JOB_ID"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "add --oversubscribe" in result.stderr


def test_a_launcher_killed_outright_takes_its_job_with_it(tmp_path):
    """SIGKILL gives evo.launch no chance to pass a signal on: the kernel's death signal stops mpiexec,
    and mpiexec its rank."""
    launcher = [sys.executable, "-m", "evo.launch", "-n", "1", str(tmp_path / "rank.py"), str(tmp_path / "pid")]
    a_kill_takes_the_rank_with_it(launcher, tmp_path)


def test_launcher_runs_the_script(tmp_path, tiny_hyperparams):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "evo.launch",
            "-n",
            "2",
            "pbt_rl_wta.py",
            "--total-generations",
            "1",
            "--agent-training-steps",
            "128",
            *common(tmp_path / "run", tiny_hyperparams),
        ],
        cwd=ROOT,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert generations_recorded(tmp_path / "run") == {1: [0, 1]}


def test_the_launcher_keeps_open_mpis_noise_out_of_a_refusal_and_passes_a_stop_on(tmp_path):
    """A refused input through the launcher: evo's message, exit 2, and neither Open MPI's banner about a
    non-zero exit nor PMIx's unreachable-peer line. A stop signal to the launcher reaches the run (75)."""
    refused = subprocess.run(
        [sys.executable, "-m", "evo.launch", "-n", "2", "pbt_rl_truct.py", "--env-id", "CartPol-v1"],
        cwd=ROOT,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "did you mean 'CartPole-v1'" in refused.stderr.lower() or "Did you mean 'CartPole-v1'" in refused.stderr
    assert "prterun detected" not in refused.stderr and "PMIX ERROR" not in refused.stderr, refused.stderr
    gate = tmp_path / "gate"
    gate.mkdir()
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)  # the gated env's id takes the default block
    flags = [*gate_flags("CartPole-v1", 100, gate), *budget(2, 3, 128), *common(tmp_path / "run", hyperparams)]
    job = subprocess.Popen(
        [sys.executable, "-m", "evo.launch", "-n", "2", "pbt_rl_truct.py", *flags],
        cwd=ROOT,
        env=mpi_env(),
        stdout=subprocess.DEVNULL,  # read by nobody while the run goes: a pipe would fill and hold it
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: job.poll() is not None or set(held(gate, range(2))) == {0, 1}, 300, "both ranks at the gate")
        assert job.poll() is None, job.communicate()[1][-3000:]
        job.send_signal(signal.SIGUSR1)
        _, errors = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 75, errors[-3000:]
    assert generations_recorded(tmp_path / "run") == {1: [0, 1]}


def test_long_episodes_no_score_is_lost_to_an_exploit_or_a_resume(tmp_path):
    """8 envs x 32 steps per generation while CartPole's episodes grow to hundreds of steps: a
    recipient often finishes no episode in the generation after its exploit. It is scored by
    the score its new weights carried (marked stale), never NaN; and since the training envs
    travel in the checkpoint, the run stopped by SIGUSR1 and resumed records exactly what the
    uninterrupted run records (no more stale scores). The stopped run's ranks are held in generation
    13 until the signal comes (tests/gated_env.py); the whole run goes through the same env ungated."""
    hyperparams = tmp_path / "long.yml"
    hyperparams.write_text("default:\n  n_envs: 8\n  n_steps: 32\n  n_minibatches: 4\n  n_epochs: 10\n")
    args = [
        "pbt_rl_truct.py",
        *budget(4, 30, 256),
        "--tb-writer",
        "False",
        "--hyperparams",
        str(hyperparams),
        "--seed",
        "5",
    ]
    gate = tmp_path / "gate"
    gate.mkdir()
    whole_args = [*args, *gate_flags("CartPole-v1", 0, gate), "--run-dir", str(tmp_path / "whole")]
    uninterrupted = mpiexec(2, whole_args)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    run_dir = tmp_path / "stopped"
    # each env's 32 steps a generation: generation 13 starts at its step 385
    with running(2, [*args, *gate_flags("CartPole-v1", 12 * 32 + 5, gate), "--run-dir", str(run_dir)]) as job:
        wait_for(lambda: len(held(gate, [0, 1])) == 2, 240, "the gate in generation 13")
        job.send_signal(signal.SIGUSR1)
        job.communicate(timeout=90)
    assert job.returncode == 75
    assert max(generations_recorded(run_dir)) == 12
    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    whole, interrupted = read_population(tmp_path / "whole"), read_population(run_dir)
    for population in (whole, interrupted):
        assert len(population) == 4 * 30
        assert not [row for row in population if row["score"] == "nan"]
    stale = [(row["generation"], row["member"]) for row in whole if row["score_train_stale"] == "1"]
    assert stale, "the test must reach generations where a recipient finishes no episode"
    assert [(row["generation"], row["member"]) for row in interrupted if row["score_train_stale"] == "1"] == stale
    assert interrupted == whole  # the envs' episodes in progress continued through the checkpoint

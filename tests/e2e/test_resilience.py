"""Surviving the cluster, with real MPI processes: a resume in a new job on another world size (and no rank
of either job importing torch._dynamo), a stop signal to one rank mid-generation, an exception on rank 2 of 4
and a rank killed outright ending the job, bad input refused with exit 2 on every rank at each step of
start-up, and the launcher (its refusal, a stop passed on, a script run, its job taken with it when it is
killed).

Proven below this tier: every bad input's refusal (tests/unit/test_main.py), the launcher's root and core
checks (tests/unit/test_launch.py), a member whose env raises restarted, the failure limit, a member hung
past --step-timeout restarted (tests/unit/runner/test_restart_runs.py, and across ranks
tests/mpi/ranks/test_restarts.py), long episodes stopped by a signal and resumed
(tests/unit/runner/test_stopped_runs.py)."""

import os
import shutil
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
    wait_for,
)
from tests.gated_env import gate_flags, held
from tests.support import (
    ROOT,
    TINY_DEFAULT,
    budget,
    generations_recorded,
    mpi_env,
    mpiexec,
    read_population,
    run_in_process,
    tree_digest,
    write_hyperparams,
)


def tb_steps(event_dir, tag):
    accumulator, _ = scalar_tags(event_dir)
    return [event.step for event in accumulator.Scalars(tag)]


WATCH = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('torch._dynamo imported:', 'torch._dynamo' in sys.modules, flush=True))\n"
    "atexit.register(lambda: print('gym or cv2 imported:', bool({'gym', 'cv2'} & set(sys.modules)), flush=True))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
"""``python -c WATCH SCRIPT ARGS``: SCRIPT run as __main__, saying at exit whether torch._dynamo was imported, and
whether gym or OpenCV was (held back in a run that uses neither: evo/sb3/holdback.py)."""


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """4 members on 2 ranks x 2 for 2 generations, then resumed in a new job on 4 ranks x 1 to generation 4;
    both jobs' ranks say at exit whether they imported torch._dynamo. Returns the run directory, both
    jobs, the hyperparameters generation 2's checkpoint held and the kept best before the resume."""
    base = tmp_path_factory.mktemp("resume")
    run_dir = base / "run"
    first = mpiexec(2, ["-c", WATCH, "pbt_rl_truct.py", *budget(4, 2, 256), *common(run_dir, write_hyperparams(base))])
    assert first.returncode == 0, first.stderr[-3000:]
    saved = {m: ckpt.load_payload(ckpt.generation_dir(run_dir, 2) / ckpt.member_filename(m)) for m in range(4)}
    best_before = assert_best_kept(run_dir).best
    # 4 members from 2 ranks x 2 onto 4 ranks x 1; more generations extend the run
    second = mpiexec(
        4, ["-c", WATCH, "pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "4"]
    )
    assert second.returncode == 0, second.stderr[-3000:]
    return run_dir, first, second, {m: saved[m]["hparams"] for m in range(4)}, best_before


def test_resume_continues_records_on_another_world_size(resumed):
    run_dir, _, second, saved, best_before = resumed
    assert "resumed from" in second.stdout
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3, 4)}
    population = read_population(run_dir)
    for row in population:
        assert int(row["env_steps"]) == 256 * int(row["generation"])
        assert int(row["rank"]) == int(row["member"]) // (2 if int(row["generation"]) <= 2 else 1)
    # generation 3 trained with exactly the hyperparameters the checkpoint held
    for row in (r for r in population if r["generation"] == "3"):
        for name, value in saved[int(row["member"])].items():
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


def test_an_evo_run_and_its_resume_never_import_dynamo(resumed):
    """EagerAdam in real runs: every rank of a real run (PPO updates, scoring, the exchange, checkpoints,
    TensorBoard) and of its resume (optimizer state loaded from the checkpoint) ends without torch._dynamo.
    (Formerly tests/e2e/test_optimizer_runs.py, with runs of its own.)"""
    _, first, second, _, _ = resumed
    assert first.stdout.count("torch._dynamo imported: False") == 2, first.stdout[-3000:]
    assert second.stdout.count("torch._dynamo imported: False") == 4, second.stdout[-3000:]
    assert "resumed from" in second.stdout
    assert first.stdout.count("gym or cv2 imported: False") == 2, first.stdout[-3000:]  # CartPole uses neither
    assert second.stdout.count("gym or cv2 imported: False") == 4, second.stdout[-3000:]


def test_a_resume_compares_with_its_checkpoints_best(resumed, tmp_path):
    """A best that no score can beat stays, its file carried over, through a resume (here in this process,
    on a third world size: a copy of the run above)."""
    run_dir = tmp_path / "run"
    shutil.copytree(resumed[0], run_dir)
    last = ckpt.latest(run_dir)[0]
    unbeaten = {**last.best, "score": 1e9}
    ckpt.write_manifest(last.directory, {**last.manifest, "best": unbeaten})
    assert run_in_process(["--run-dir", str(run_dir), "--resume", "--total-generations", "5"]) == 0
    fifth = ckpt.latest(run_dir)[0]
    assert fifth.generation == 5 and fifth.best == unbeaten
    # its weights are still those it was scored with in generation 4; its member has trained on since
    kept_state = ckpt.load_payload(fifth.best_path())["state"]
    assert not torch.equal(kept_state, ckpt.load_payload(fifth.member_path(unbeaten["member"]))["state"])
    assert generations_recorded(run_dir)[5] == [0, 1, 2, 3]


def test_sigterm_to_one_rank_mid_generation_checkpoints_and_resumes(tmp_path):
    """A signal to one rank (the other learns of it by a stop notice) while generation 2 trains: the run
    stops with generation 1's checkpoint and resumes from it. Rank 1 is held inside generation 2 until it
    comes. (SIGUSR1 to mpiexec, which forwards it to every rank: tests/e2e/test_hung_env.py,
    tests/e2e/test_slurm_local.py; every rank and mpiexec signalled: tests/e2e/test_stopping_runs.py, whose
    resume is a new job; this one resumes in this process.)"""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    # 2 envs x 64 steps a rollout: generation 1 is each env's first 1024 steps
    args = [*budget(2, 3, 2048), *gate_flags("CartPole-v1", 1024 + 100, gate, [1])]
    with running(2, ["pbt_rl_truct.py", *args, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]) as job:
        wait_for(lambda: len(held(gate, [1])) == 1, 240, "the gate in generation 2")
        os.kill(held(gate, [1])[1], signal.SIGTERM)
        stdout, stderr = job.communicate(timeout=90)
    assert job.returncode == 75, stderr[-3000:]
    assert "checkpoint of generation 1" in stdout + stderr
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1

    assert run_in_process(["--run-dir", str(run_dir), "--resume", "--agent-training-steps", "512"]) == 0
    assert generations_recorded(run_dir) == {1: [0, 1], 2: [0, 1], 3: [0, 1]}


FAULTY = ["--env-id", "tests.faulty_env:FaultyCartPole-v0"]


def test_exception_on_rank_2_of_4_ends_the_job_with_its_traceback(tmp_path):
    """With --max-member-failures 0, a member's failure ends the job at once, as before restarts."""
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    result = mpiexec(  # it trains 10^6 steps unless the fault ends it: a hang meets the timeout
        4,
        [
            "pbt_rl_truct.py",
            *FAULTY,
            *("--env-kwargs", "fail_rank:2", "fail_after:300"),
            *("--agent-training-steps", "1000000", "--total-generations", "2", "--max-member-failures", "0"),
            *("--hyperparams", str(hyperparams), "--run-dir", str(tmp_path / "run")),
        ],
        timeout=120,
    )
    assert result.returncode != 0
    assert "RuntimeError: injected fault on rank 2" in result.stderr
    assert "Traceback" in result.stderr and "unrecoverable error on rank 2" in result.stderr
    assert ckpt.latest(tmp_path / "run")[0].generation == 0


def test_sigkill_of_one_rank_ends_the_job_and_the_checkpoint_loads(tmp_path):
    """Rank 0 killed while it trains generation 2 (held there by tests/gated_env.py, so generation 1's
    checkpoint is complete): the other rank ends with it, and the checkpoint loads."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    # 2 envs x 64 steps a generation per member: env step 100 is in generation 2
    args = [*budget(2, 3, 128), *gate_flags("CartPole-v1", 100, gate, ranks=[0])]
    with running(2, ["pbt_rl_truct.py", *args, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]) as job:
        wait_for(lambda: 0 in held(gate, [0]), 240, "rank 0 at the gate in generation 2")
        os.kill(held(gate, [0])[0], signal.SIGKILL)
        job.communicate(timeout=60)  # the other rank ends with it (a hang meets the timeout)
    assert job.returncode != 0
    found, skipped = ckpt.latest(run_dir)
    assert found is not None and found.generation == 1, skipped
    for member in (0, 1):
        assert ckpt.load_payload(found.member_path(member))["generation"] == 1


WITHOUT_TORCH = [str(ROOT / "tests" / "without.py"), "torch,stable_baselines3"]


def test_bad_input_exits_2_on_every_rank_once_and_touches_nothing(tmp_path):
    """Under a real mpiexec, with torch and SB3 unimportable on every rank (tests/without.py), one refusal at
    each step of start-up where rank 0 answers and the other rank takes its answer: the command line
    (two problems, said at once) and a --resume's checkpoint, found after the run directory's lock. Every
    bad input, each rank's start-up and the block itself are checked in tests/unit/test_main.py."""
    from tests.startup_refusals import bad_inputs

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "population.csv").write_text("precious\n")
    resume = next(argv for argv, message in bad_inputs(tmp_path) if message == "--resume: no complete checkpoint")
    cases = [
        (
            ["--num-agents", "3", "--run-dir", str(existing)],
            ["--num-agents 3 is not a multiple of the 2 MPI ranks", "already exists; evo will not overwrite a run"],
        ),
        (resume, ["--resume: no complete checkpoint"]),
    ]
    before = tree_digest(tmp_path)
    for argv, messages in cases:
        result = mpiexec(2, [*WITHOUT_TORCH, "pbt_rl_truct.py", *argv], timeout=60)
        assert result.returncode == 2, (argv, result.stderr[-2000:])
        for message in messages:
            assert result.stderr.count(message) == 1, (argv, result.stderr)
        assert result.stderr.count("error:") == 1 and "Traceback" not in result.stderr, (argv, result.stderr)
        assert tree_digest(tmp_path) == before, argv
    assert [p.name for p in existing.iterdir()] == ["population.csv"]
    assert (existing / "population.csv").read_text() == "precious\n"


def test_a_launcher_killed_outright_takes_its_job_with_it(tmp_path):
    """SIGKILL gives evo.launch no chance to pass a signal on: the kernel's death signal stops mpiexec,
    and mpiexec its rank."""
    launcher = [sys.executable, "-m", "evo.launch", "-n", "1", str(tmp_path / "rank.py"), str(tmp_path / "pid")]
    a_kill_takes_the_rank_with_it(launcher, tmp_path)


RANK_SAYS = """\
import sys
from mpi4py import MPI
print("rank", MPI.COMM_WORLD.Get_rank(), "of", MPI.COMM_WORLD.Get_size(), "got", sys.argv[1:], flush=True)
"""


def test_launcher_runs_the_script(tmp_path):
    """The launcher runs its script on every rank with the script's arguments, and passes its exit status 0
    on. (A real PBT script through the launcher, its records and its stop: the test below.)"""
    script = tmp_path / "rank.py"
    script.write_text(RANK_SAYS)
    result = subprocess.run(
        [sys.executable, "-m", "evo.launch", "-n", "2", str(script), "--total-generations", "1"],
        cwd=ROOT,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    said = sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))
    assert said == [f"rank {rank} of 2 got ['--total-generations', '1']" for rank in (0, 1)], result.stdout


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

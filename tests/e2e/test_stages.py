"""BG-PBT's stages in a real run under mpiexec (``--max-distillations``), the stages' one stop and resume
across the process boundary: a stage's students are planned, distilled from the top members, cut by
successive halving, and the survivors take the members' places with their architectures; a run stopped
by SIGUSR1 in the middle of a distillation resumes there in a new job and records what the uninterrupted
run records. In one process: a stage's rungs as generations of the loop, a failing student
(tests/unit/runner/test_drivers.py), and HalfCheetah with --explore casmo resumed at its stage's start
(tests/unit/runner/test_stage_runs.py); survivors crossing ranks: tests/mpi/ranks/test_stages.py."""

import csv
import json
import signal

import torch

from evo.rundir.checkpoint import load_payload
from evo.rundir.history import ancestry, copy_sources, load_run, stage_starts
from tests.e2e.runs import running, wait_for
from tests.gated_env import gate_flags, held
from tests.in_process import plots
from tests.support import last_manifest, mpiexec, read_lineage, read_population, write_hyperparams
from tests.unit.runner.test_architecture_runs import ARCHITECTURE, shape
from tests.unit.runner.test_architecture_runs import SPACE as ARCHITECTURE_SPACE

SPACE = ARCHITECTURE_SPACE.replace("Pendulum-v1:", "default:")
"""test_architecture_runs.py's space (the learning rate and three architecture dimensions) for any env."""
MEMBERS, STUDENTS, STEPS, DISTILLATION = 2, 6, 128, 512
"""6 students for 2 members (one a rank): rungs of 6 -> 3 (RUNG env steps each) and 3 -> 2 (the other 384):
generations 2 and 3, the stage being due after generation 1 (--stage-steps 128). A rollout is 128 env steps."""
RUNG = DISTILLATION // 4
"""The first rung's env steps (tests/unit/core/test_stages.py: halving_rungs)."""
GATE = 200
"""The gate's env step (per env, 2 envs a learner): a member's envs are at 64 when the stage starts, a
student's reach 64 in its first rung and 256 in its second."""


def stage_flags(tmp_path, run_dir, *extra) -> list[str]:
    return [
        "pbt_rl_truct.py",
        *("--num-agents", str(MEMBERS), "--total-generations", "4", "--agent-training-steps", str(STEPS)),
        *("--hyperparams", str(write_hyperparams(tmp_path, SPACE)), "--seed", "3", "--run-dir", str(run_dir)),
        *("--max-distillations", "1", "--stage-steps", str(STEPS), "--patience", "100"),
        *("--distillation-steps", str(DISTILLATION)),
        *extra,
    ]


def gated(gate_at: int, gate) -> list[str]:
    """Pendulum behind tests/gated_env.py's gate (0: none), its episodes cut to 50 steps so that every
    learner finishes some in each generation and rung."""
    return [*gate_flags("Pendulum-v1", gate_at, gate), "max_episode_steps:50"]


def open_gates(gate, ranks: int) -> None:
    """The gate is for the stopped run: a rank that was not held there (the signal stopped it first)
    would be held by its resumed run (tests/gated_env.py opens a rank's gate once it released it)."""
    for rank in range(ranks):
        (gate / f"released-{rank}").touch()


def assert_one_stage(run_dir) -> None:
    """The records of a run whose one stage ran after generation 1, as its rungs 2 and 3."""
    rows = read_population(run_dir)
    lineage = read_lineage(run_dir)
    with (run_dir / "generations.csv").open(newline="") as handle:
        timings = list(csv.DictReader(handle))
    assert [int(t["generation"]) for t in timings] == [1, 2, 3, 4]  # the rungs 2 and 3 too
    assert all(float(t["env_steps_per_s"]) > 0 for t in timings)
    by_key = {(int(r["generation"]), int(r["member"])): r for r in rows}
    students = [e for e in lineage if e.get("event") == "student"]
    rungs = [e for e in lineage if e.get("event") == "rung"]
    survivors = [e for e in lineage if e.get("event") == "survivor"]
    assert [e["member"] for e in students] == list(range(MEMBERS, MEMBERS + STUDENTS))
    assert {e["generation"] for e in students} == {1} and {e["stage"] for e in students} == {1}
    assert {e["how"] for e in students} <= {"bo", "random", "kept"}
    # the teachers: the top quarter of generation 1 (at least one member: max(1, int(N / 4))), by score
    best = max(range(MEMBERS), key=lambda m: float(by_key[(1, m)]["score"]))
    assert {e["teacher"] for e in students} == {best}
    # the rungs: every student in the first, the kept ones in the second, each rung keeping the best
    halved = STUDENTS // 2
    assert [(e["generation"], len(e["kept"]), len(e["dropped"])) for e in rungs] == [
        (2, halved, STUDENTS - halved),
        (3, MEMBERS, halved - MEMBERS),
    ]
    for e in rungs:
        kept_scores = [e["scores"][str(m)] for m in e["kept"]]
        assert kept_scores == sorted(kept_scores, reverse=True)
        assert min(kept_scores) >= max(e["scores"][str(m)] for m in e["dropped"])
    assert [int(r["member"]) for r in rows if r["generation"] == "2"] == [e["member"] for e in students]
    assert sorted(int(r["member"]) for r in rows if r["generation"] == "3") == sorted(rungs[0]["kept"])
    planned = {e["member"]: e for e in students}
    for r in rows:
        generation, member = int(r["generation"]), int(r["member"])
        if generation in (2, 3):  # a student's row: its teacher, its stage, its planned architecture
            assert (r["stage"], int(r["teacher"])) == ("1", planned[member]["teacher"])
            assert shape(r) == tuple(planned[member]["hparams"][name] for name in ARCHITECTURE)
            assert int(r["env_steps"]) == STEPS + (RUNG if generation == 2 else DISTILLATION)
        else:
            assert r["teacher"] == "" and r["stage"] == ("0" if generation == 1 else "1")
    # member i takes survivor i (best first): its architecture and hyperparameters, its env steps
    assert [(e["member"], e["student"]) for e in survivors] == list(enumerate(rungs[1]["kept"]))
    for e in survivors:
        after = by_key[(4, e["member"])]
        student = by_key[(3, e["student"])]
        assert shape(after) == shape(student)
        assert int(after["env_steps"]) == STEPS + DISTILLATION + STEPS
        assert after["learning_rate"] == student["learning_rate"]  # what member i trained with in generation 4


def test_a_stage_distils_students_cuts_them_and_resumes_in_the_middle_of_its_distillation(tmp_path, capsys):
    """The uninterrupted run goes through the gated env's ungated twin; the stopped one is held in its
    distillation's second rung (a student's env at step GATE) until SIGUSR1, then resumed: three mpiexec
    jobs of 2 ranks distilling real students (up to about 20 s on a busy 2-core host)."""
    gate = tmp_path / "gate"
    gate.mkdir()
    whole_dir = tmp_path / "whole"
    whole = mpiexec(2, stage_flags(tmp_path, whole_dir, *gated(0, gate)), timeout=600)
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-3000:]
    assert_one_stage(whole_dir)
    said = f"stage 1 after generation 1 (the stage has trained {STEPS} env steps per member"
    assert said in whole.stdout + whole.stderr

    run_dir = tmp_path / "stopped"
    first_rung = run_dir / "checkpoints" / "gen_000002" / "manifest.json"
    with running(2, stage_flags(tmp_path, run_dir, *gated(GATE, gate))) as job:
        # every rank holding a student in the second rung reaches the gate: wait for all of them, so
        # that the signal finds each one held (a rank stopped before its gate would not be released)
        wait_for(first_rung.exists, 400, "the first rung's checkpoint")
        alive = json.loads(first_rung.read_text())["stages"]["distilling"]["alive"]
        ranks = {((member - MEMBERS) % STUDENTS) % 2 for member in alive}
        wait_for(lambda: set(held(gate, range(2))) >= ranks, 400, f"the students of ranks {sorted(ranks)} at the gate")
        job.send_signal(signal.SIGUSR1)
        output, errors = job.communicate(timeout=300)
    assert job.returncode == 75, output[-2000:] + errors[-3000:]
    open_gates(gate, 2)
    # the checkpoint of the first rung: the members, the students still in (half), each with its teacher
    manifest = last_manifest(run_dir)
    assert manifest["generation"] == 2
    distilling = manifest["stages"]["distilling"]
    assert distilling["rung"] == 1 and len(distilling["alive"]) == STUDENTS // 2
    assert sorted(int(m) for m in manifest["members"]) == sorted([*range(MEMBERS), *distilling["alive"]])
    directory = run_dir / "checkpoints" / "gen_000002"
    for student in distilling["alive"]:
        payload = load_payload(directory / f"member_{student}.pt")
        saved = payload["distillation"]
        assert saved is not None and saved["total_steps"] == DISTILLATION and 0.05 <= saved["coef"] <= 1.0
        assert saved["start"] == STEPS and payload["num_timesteps"] == STEPS + RUNG
        assert isinstance(saved["teacher"], torch.Tensor) and saved["teacher"].numel() > 0
    for member in range(MEMBERS):
        assert load_payload(directory / f"member_{member}.pt")["distillation"] is None

    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    assert_one_stage(run_dir)
    assert read_population(run_dir) == read_population(whole_dir)
    assert read_lineage(run_dir) == read_lineage(whole_dir)
    assert_history_and_tools(run_dir, tmp_path / "plots", capsys)


def assert_history_and_tools(run_dir, out, capsys) -> None:
    """Reading the run back: each member after the stage descends from the student whose place it took;
    the plots draw the stage; a replay of a line that went through a distillation is refused (the tools in
    this process)."""
    from evo.tools import replay as replay_tool

    history = load_run(run_dir)
    assert "stage" not in history.names and "teacher" not in history.names
    survivors = {e["member"]: e["student"] for e in read_lineage(run_dir) if e.get("event") == "survivor"}
    founders = ancestry(history)
    for member, student in survivors.items():
        assert copy_sources(history)[(3, member)] == (student, 3)
        assert founders[4][member] == student  # a student's line starts at its first rung
    assert stage_starts(history) == {1: 1}
    figures = plots(run_dir, out)
    assert all(path.stat().st_size > 0 for path in figures.values())
    assert replay_tool.main([str(run_dir), "--member", "0", "--out", str(out / "schedule.yml")]) == 2
    assert "a schedule cannot replay a distillation" in capsys.readouterr().err

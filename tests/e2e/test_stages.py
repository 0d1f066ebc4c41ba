"""BG-PBT's stages in real runs under mpiexec (``--max-distillations``): a stage's students are planned,
distilled from the top members, cut by successive halving, and the survivors take the members' places
with their architectures; a run stopped in the middle of a distillation resumes there and records what
the uninterrupted run records; HalfCheetah on 4 ranks with --explore casmo reaches its second stage."""

import csv
import json
import signal

import torch

from evo.rundir.checkpoint import load_payload
from evo.rundir.history import ancestry, copy_sources, load_run, stage_starts
from tests.e2e.runs import plots, python, running, scalar_tags, wait_for
from tests.e2e.test_architecture_runs import ARCHITECTURE, shape
from tests.e2e.test_architecture_runs import SPACE as ARCHITECTURE_SPACE
from tests.gated_env import gate_flags, held
from tests.support import last_manifest, mpiexec, need_mujoco, read_lineage, read_population, write_hyperparams

SPACE = ARCHITECTURE_SPACE.replace("Pendulum-v1:", "default:")
"""test_architecture_runs.py's space (the learning rate and three architecture dimensions) for any env."""
MEMBERS, STUDENTS, STEPS, DISTILLATION = 4, 12, 256, 1024
"""12 students for 4 members: rungs of 12 -> 6 (256 env steps each) and 6 -> 4 (768): generations 2 and 3,
the stage being due after generation 1 (--stage-steps 256)."""
GATE = 200
"""The gate's env step (per env, 2 envs a learner): a member's envs are at 128 when the stage starts, a
student's reach 128 in its first rung and pass 200 in its second."""


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
    # the teachers: the top quarter of generation 1 (one member of 4), by score
    best = max(range(MEMBERS), key=lambda m: float(by_key[(1, m)]["score"]))
    assert {e["teacher"] for e in students} == {best}
    # the rungs: every student in the first, the kept ones in the second, each rung keeping the best
    assert [(e["generation"], len(e["kept"]), len(e["dropped"])) for e in rungs] == [(2, 6, 6), (3, 4, 2)]
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
            assert int(r["env_steps"]) == STEPS + (256 if generation == 2 else DISTILLATION)
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


def test_a_stage_distils_students_cuts_them_and_resumes_in_the_middle_of_its_distillation(tmp_path):
    """The uninterrupted run goes through the gated env's ungated twin; the stopped one is held in its
    distillation's second rung (a student's env at step GATE) until SIGUSR1, then resumed."""
    gate = tmp_path / "gate"
    gate.mkdir()
    whole_dir = tmp_path / "whole"
    whole = mpiexec(2, stage_flags(tmp_path, whole_dir, *gated(0, gate)), timeout=600)
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-3000:]
    assert_one_stage(whole_dir)
    assert "stage 1 after generation 1 (the stage has trained 256 env steps per member" in whole.stdout + whole.stderr

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
    # the checkpoint of the first rung: the members, the 6 students still in, each with its teacher
    manifest = last_manifest(run_dir)
    assert manifest["generation"] == 2
    distilling = manifest["stages"]["distilling"]
    assert distilling["rung"] == 1 and len(distilling["alive"]) == 6
    assert sorted(int(m) for m in manifest["members"]) == sorted([*range(MEMBERS), *distilling["alive"]])
    directory = run_dir / "checkpoints" / "gen_000002"
    for student in distilling["alive"]:
        payload = load_payload(directory / f"member_{student}.pt")
        saved = payload["distillation"]
        assert saved is not None and saved["total_steps"] == DISTILLATION and 0.05 <= saved["coef"] <= 1.0
        assert saved["start"] == STEPS and payload["num_timesteps"] == STEPS + 256
        assert isinstance(saved["teacher"], torch.Tensor) and saved["teacher"].numel() > 0
    for member in range(MEMBERS):
        assert load_payload(directory / f"member_{member}.pt")["distillation"] is None

    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    assert_one_stage(run_dir)
    assert read_population(run_dir) == read_population(whole_dir)
    assert read_lineage(run_dir) == read_lineage(whole_dir)
    assert_history_and_tools(run_dir, tmp_path / "plots")


def assert_history_and_tools(run_dir, out) -> None:
    """Reading the run back: each member after the stage descends from the student whose place it took;
    the plots draw the stage; a replay of a line that went through a distillation is refused."""
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
    replay = python("-m", "evo.tools.replay", str(run_dir), "--member", "0", "--out", str(out / "schedule.yml"))
    assert replay.returncode == 2 and "a schedule cannot replay a distillation" in replay.stderr


def test_halfcheetah_on_4_ranks_with_casmo_reaches_its_second_stage_and_resumes_within_it(tmp_path):
    """The issue's configuration, short: ``mpiexec -n 4 pbt_rl_truct.py --env-id HalfCheetah-v5
    --explore casmo`` with the architecture in the space and normalisation, the stage due by its env
    steps (a stage due by patience depends on the scores, which differ between hosts: the rule is
    tested in tests/unit/core/test_stages.py). Stopped during the stage's one rung (a student's env at
    step 300; the members' are at 256 when the stage starts), it resumes from the stage's start and plans,
    distils and cuts the same students as the uninterrupted run; TensorBoard."""
    need_mujoco()
    space = SPACE.replace("default:", "default:\n  normalize: true").replace("[16, 32, 64]", "[32, 64, 256]")
    hyperparams = write_hyperparams(tmp_path, space)
    gate = tmp_path / "gate"
    gate.mkdir()

    def args(run_dir, gate_at):
        return [
            "pbt_rl_truct.py",
            *gate_flags("HalfCheetah-v5", gate_at, gate), "max_episode_steps:100",
            *("--explore", "casmo", "--num-agents", "4", "--total-generations", "4", "--agent-training-steps", "256"),
            *("--hyperparams", str(hyperparams), "--seed", "1", "--run-dir", str(run_dir)),
            *("--max-distillations", "1", "--stage-steps", "512", "--students", "8", "--distillation-steps", "1024"),
        ]  # fmt: skip

    whole = mpiexec(4, args(tmp_path / "whole", 0), timeout=900)
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-3000:]
    run_dir = tmp_path / "run"
    with running(4, args(run_dir, 300)) as job:
        wait_for(lambda: len(held(gate, range(4))) == 4, 600, "a student of every rank at the gate in the stage's rung")
        job.send_signal(signal.SIGUSR1)
        output, errors = job.communicate(timeout=300)
    assert job.returncode == 75, output[-2000:] + errors[-3000:]
    manifest = last_manifest(run_dir)
    assert manifest["generation"] == 2 and manifest["stages"]["distilling"] is None  # the stage's start
    open_gates(gate, 4)
    resumed = mpiexec(4, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    # the same students, distilled alike, the same survivors; after the stage the members' MuJoCo envs
    # start fresh episodes (their simulator state is not in a checkpoint: evo/sb3/envstate.py)
    rows, whole_rows = read_population(run_dir), read_population(tmp_path / "whole")
    assert [r for r in rows if int(r["generation"]) <= 3] == [r for r in whole_rows if int(r["generation"]) <= 3]
    assert len(rows) == len(whole_rows)
    lineage = read_lineage(run_dir)
    assert [e for e in lineage if "event" in e] == [e for e in read_lineage(tmp_path / "whole") if "event" in e]

    students = [e for e in lineage if e.get("event") == "student"]
    assert len(students) == 8 and "has trained 512 env steps per member" in students[0]["reason"]
    assert students[0]["generation"] == 2
    rows = read_population(run_dir)
    assert {r["stage"] for r in rows if int(r["generation"]) > 2} == {"1"}
    assert {int(r["member"]) for r in rows if int(r["generation"]) == 3} == set(range(4, 12))
    assert {int(r["member"]) for r in rows if int(r["generation"]) == 4} == set(range(4))
    assert len([e for e in lineage if e.get("event") == "survivor"]) == 4
    manifest = last_manifest(run_dir)
    assert manifest["stages"]["stage"] == 1 and manifest["stages"]["distilling"] is None
    _, tags = scalar_tags(run_dir / "tb" / "population")
    assert {"pbt/stage", "stage/best_student_score", "stage/students"} <= tags
    _, student_tags = scalar_tags(run_dir / "tb" / f"member_{students[0]['member']}")
    assert {"train/distill_kl", "train/distill_coef", "train/distill_value_mse"} <= student_tags

"""BG-PBT's configuration in whole runs in one process (tests/support.py:run_in_process): HalfCheetah with
--explore casmo, the architecture in the space and normalisation, its stage due by env steps, distilled,
cut and replacing the members; the same run ended at the stage's start and resumed plans, distils and cuts
the same students; TensorBoard's stage and distillation scalars. Moved down from the e2e tier (it ran on 4
ranks under mpiexec, stopped by SIGUSR1 in the stage's rung): what it checks is the stages', the explorer's
and the records'; survivors crossing ranks are tests/mpi/ranks/test_stages.py's, and a stage stopped by a
signal mid-distillation and resumed in a new job is tests/e2e/test_stages.py's."""

import pytest

from tests.in_process import logged, scalar_tags
from tests.support import last_manifest, need_mujoco, read_lineage, read_population, write_hyperparams
from tests.unit.runner.test_architecture_runs import SPACE

MEMBERS, STUDENTS = 2, 4
"""2 members, 4 students: one rung of 4 -> 2 (generation 3) after generation 2."""


@pytest.fixture(scope="module")
def halfcheetah(tmp_path_factory):
    """The uninterrupted run (4 generations of 128 env steps; the stage due once the members have trained
    256, after generation 2; its students distilled for 256), and the same run ended after generation 2 and
    resumed to 4: their run directories."""
    need_mujoco()
    root = tmp_path_factory.mktemp("stage")
    space = SPACE.replace("Pendulum-v1:", "default:\n  normalize: true").replace("[16, 32, 64]", "[32, 64, 256]")
    hyperparams = write_hyperparams(root, space)

    def argv(run_dir, generations):
        return [
            *("--env-id", "HalfCheetah-v5", "--env-kwargs", "max_episode_steps:100", "--explore", "casmo"),
            *("--num-agents", str(MEMBERS), "--total-generations", str(generations)),
            *("--agent-training-steps", "128", "--hyperparams", str(hyperparams), "--seed", "1"),
            *("--run-dir", str(run_dir), "--max-distillations", "1", "--stage-steps", "256"),
            *("--students", str(STUDENTS), "--distillation-steps", "256"),
        ]

    for run_dir, generations in ((root / "whole", 4), (root / "run", 2)):
        status, log = logged(argv(run_dir, generations))
        assert status == 0, log[-3000:]
    manifest = last_manifest(root / "run")
    assert manifest["generation"] == 2 and manifest["stages"]["distilling"] is None  # the stage's start
    status, log = logged(["--run-dir", str(root / "run"), "--resume", "--total-generations", "4"])
    assert status == 0 and "resumed from" in log, log[-3000:]
    return root / "whole", root / "run"


def test_halfcheetah_with_casmo_resumed_at_its_stage_plans_distils_and_cuts_the_same_students(halfcheetah):
    """After the stage the members' MuJoCo envs start fresh episodes (their simulator state is not in a
    checkpoint: evo/sb3/envstate.py), so generation 4's rows may differ; everything before, and every
    stage event, is the uninterrupted run's."""
    whole, run_dir = halfcheetah
    rows, whole_rows = read_population(run_dir), read_population(whole)
    assert [r for r in rows if int(r["generation"]) <= 3] == [r for r in whole_rows if int(r["generation"]) <= 3]
    assert len(rows) == len(whole_rows)
    lineage = read_lineage(run_dir)
    assert [e for e in lineage if "event" in e] == [e for e in read_lineage(whole) if "event" in e]


def test_the_stage_due_by_env_steps_replaces_the_members_with_its_survivors(halfcheetah):
    """Due by its env steps: a stage due by patience depends on the scores, which differ between hosts (the
    rule is tested in tests/unit/core/test_stages.py)."""
    _, run_dir = halfcheetah
    lineage = read_lineage(run_dir)
    students = [e for e in lineage if e.get("event") == "student"]
    assert len(students) == STUDENTS and "has trained 256 env steps per member" in students[0]["reason"]
    assert students[0]["generation"] == 2
    rows = read_population(run_dir)
    assert {r["stage"] for r in rows if int(r["generation"]) > 2} == {"1"}
    assert {int(r["member"]) for r in rows if int(r["generation"]) == 3} == set(range(MEMBERS, MEMBERS + STUDENTS))
    assert {int(r["member"]) for r in rows if int(r["generation"]) == 4} == set(range(MEMBERS))
    assert len([e for e in lineage if e.get("event") == "survivor"]) == MEMBERS
    manifest = last_manifest(run_dir)
    assert manifest["stages"]["stage"] == 1 and manifest["stages"]["distilling"] is None
    _, tags = scalar_tags(run_dir / "tb" / "population")
    assert {"pbt/stage", "stage/best_student_score", "stage/students"} <= tags
    _, student_tags = scalar_tags(run_dir / "tb" / f"member_{students[0]['member']}")
    assert {"train/distill_kl", "train/distill_coef", "train/distill_value_mse"} <= student_tags

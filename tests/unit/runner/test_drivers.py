"""The run engine's drivers in one process on MPI.COMM_SELF, as the entry point starts them (the session
opened from the accepted config, the driver's checkpoint, continuation and run): a synchronous run and
its resume, an asynchronous run, and BG-PBT's stage whose rungs run through the generation loop, a
failing student restarted by the loop's failure handling."""

import csv
import json
import signal

import pytest
from mpi4py import MPI

from evo.config import parse_config
from evo.rundir import checkpoint as ckpt
from evo.runner import driver_for
from evo.runner.session import open_session
from evo.runner.stopping import EXIT_STOPPED, STOP_SIGNALS
from tests.golden import STAGE_SPACE, weights_digest
from tests.support import budget, read_lineage, read_population, run_in_process, write_hyperparams


@pytest.mark.parametrize("evaluation", [(), ("--eval-episodes", "2", "--select-on", "test")], ids=["train", "test"])
def test_a_synchronous_run_resumed_after_a_generation_is_the_uninterrupted_run(tmp_path, evaluation):
    """Also with evaluation episodes selecting (issue 54 N5: the evaluation env was made afresh on resume, so
    score_test, and the exploits it decides, differed from the resumed generation on)."""
    tiny = write_hyperparams(tmp_path)
    flags = ["--hyperparams", str(tiny), "--tb-writer", "False", "--seed", "4", *budget(3, 3, 128), *evaluation]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert run_in_process([*flags, "--run-dir", str(whole)]) == 0
    assert run_in_process([*flags, "--run-dir", str(part), "--total-generations", "1"]) == 0
    assert run_in_process(["--run-dir", str(part), "--resume", "--total-generations", "3"]) == 0

    rows = read_population(whole)
    assert [(int(r["generation"]), int(r["member"])) for r in rows] == [(g, m) for g in (1, 2, 3) for m in range(3)]
    assert len(read_lineage(whole)) == 3  # one exploit a generation (truncation: the bottom quarter of 3)
    with (whole / "generations.csv").open(newline="") as handle:
        assert [int(row["generation"]) for row in csv.DictReader(handle)] == [1, 2, 3]
    assert [p.name for p in ckpt.candidates(whole)] == ["gen_000003", "gen_000002"]  # the last two kept
    best = ckpt.latest(whole)[0].best
    scores = [float(r["score"]) for r in rows]
    assert best["score"] == max(scores)  # the kept best is the highest selection score of the run
    # the resumed run: the same rows, lineage and final weights as the uninterrupted one
    assert (part / "population.csv").read_bytes() == (whole / "population.csv").read_bytes()
    assert (part / "lineage.jsonl").read_bytes() == (whole / "lineage.jsonl").read_bytes()
    assert weights_digest(part) == weights_digest(whole)
    assert "# resumed from generation 1" in (part / "command.txt").read_text()


def test_a_run_that_has_its_generations_is_not_started_again(tmp_path):
    tiny = write_hyperparams(tmp_path)
    run_dir = tmp_path / "run"
    assert (
        run_in_process(
            ["--hyperparams", str(tiny), "--tb-writer", "False", *budget(1, 1, 64), "--run-dir", str(run_dir)]
        )
        == 0
    )
    config = parse_config(["--run-dir", str(run_dir), "--resume"], world_size=1)
    driver = driver_for(False)
    checkpoint = driver.find(config.run_dir, config.run_id, config.num_agents)
    assert driver.done(checkpoint, config.total_generations, config.num_agents) == (
        "the run already has 1 of 1 generations; pass --total-generations N > 1 to extend it"
    )
    assert driver.done(checkpoint, 2, config.num_agents) is None


def test_an_asynchronous_run_on_one_rank_records_every_member_interval_once(tmp_path):
    tiny = write_hyperparams(tmp_path)
    run_dir = tmp_path / "run"
    argv = ["--hyperparams", str(tiny), "--tb-writer", "False", "--asynchronous", *budget(3, 3, 128)]
    assert run_in_process([*argv, "--run-dir", str(run_dir), "--seed", "2"]) == 0
    rows = read_population(run_dir)
    assert sorted((int(r["generation"]), int(r["member"])) for r in rows) == [
        (i, m) for i in (1, 2, 3) for m in range(3)
    ]
    assert all(r["wall_s"] for r in rows) and {r["rank"] for r in rows} == {"0"}
    points = {(int(r["generation"]), int(r["member"])) for r in rows}
    copies = [e for e in read_lineage(run_dir) if e["recipient"] != e["donor"]]
    assert copies  # 3 intervals of 3 members under truncation: some bottom member copies
    for entry in copies:  # a copy names a ready point of its donor that the records hold
        assert (entry["donor_interval"], entry["donor"]) in points
    for member in range(3):  # every member checkpointed at its last ready point
        assert (run_dir / "checkpoints" / "members" / f"member_{member}" / "interval_000003.json").exists()
    best = json.loads((run_dir / "checkpoints" / "best" / "best.json").read_text())
    assert best["score"] == max(float(r["score"]) for r in rows)
    driver = driver_for(True)
    found = driver.find(run_dir, parse_config(["--run-dir", str(run_dir), "--resume"]).run_id, 3)
    assert driver.done(found, 3, 3) is not None and driver.done(found, 4, 3) is None


STAGE_RUN = [
    *budget(2, 4, 128),
    "--max-distillations",
    "1",
    "--stage-steps",
    "128",
    "--patience",
    "100",
    "--keep-checkpoints",
    "5",
]
"""2 members, a stage due after generation 1 (--stage-steps 128); its 6 students (3 per member) distilled for
256 env steps in rungs of 6 -> 3 students (64 env steps, a rollout: 128) and 3 -> 2 (192: 256) in generations 2
and 3, then PBT in generation 4."""


def stage_flags(tmp_path, run_dir) -> list[str]:
    space = write_hyperparams(tmp_path, STAGE_SPACE)
    return [
        *("--hyperparams", str(space), "--tb-writer", "False", "--seed", "3", "--run-dir", str(run_dir)),
        *STAGE_RUN,
        *("--distillation-steps", "256"),
    ]


def test_a_stage_runs_its_rungs_as_generations_of_the_loop(tmp_path):
    run_dir = tmp_path / "run"
    assert run_in_process(stage_flags(tmp_path, run_dir)) == 0
    lineage = read_lineage(run_dir)
    students = [e["member"] for e in lineage if e.get("event") == "student"]
    rungs = [e for e in lineage if e.get("event") == "rung"]
    survivors = [e for e in lineage if e.get("event") == "survivor"]
    assert students == [2, 3, 4, 5, 6, 7]
    assert [(e["generation"], len(e["kept"]), len(e["dropped"])) for e in rungs] == [(2, 3, 3), (3, 2, 1)]
    assert [(e["member"], e["student"]) for e in survivors] == list(enumerate(rungs[1]["kept"]))
    rows = read_population(run_dir)
    assert sorted(int(r["member"]) for r in rows if r["generation"] == "2") == students
    assert sorted(int(r["member"]) for r in rows if r["generation"] == "3") == sorted(rungs[0]["kept"])
    with (run_dir / "generations.csv").open(newline="") as handle:
        timings = list(csv.DictReader(handle))
    assert [int(t["generation"]) for t in timings] == [1, 2, 3, 4]  # the loop's timing row for each rung too
    assert all(float(t["env_steps_per_s"]) > 0 for t in timings)
    manifest = json.loads((ckpt.generation_dir(run_dir, 2) / "manifest.json").read_text())
    assert sorted(int(m) for m in manifest["members"]) == [
        0,
        1,
        *sorted(rungs[0]["kept"]),
    ]  # members and living students


def test_a_failing_student_is_restarted_from_fresh_weights_and_trains_its_rung_again(tmp_path, monkeypatch):
    """The loop's failure handling in a rung: student 3's update raises once in the first rung; it is
    rebuilt with its own plan's hyperparameters, distils anew from its teacher, trains the rung again, is
    scored and cut like the others, and the restart is in the lineage."""
    from evo.runner.stages import Stages

    built = Stages.student
    failed = []

    def student(self, plan, distilling):
        learner = built(self, plan, distilling)
        if plan.member == 3 and not failed:
            train = learner.train

            def breaks(*args, **kwargs):
                if not failed:
                    failed.append(learner)
                    raise RuntimeError("injected: student 3's update")
                return train(*args, **kwargs)

            learner.train = breaks
        return learner

    distilling = []
    distil = Stages._distil_from_teacher

    def noted(self, learner, plan):
        distilling.append((plan.member, learner))
        distil(self, learner, plan)

    monkeypatch.setattr(Stages, "student", student)
    monkeypatch.setattr(Stages, "_distil_from_teacher", noted)
    run_dir = tmp_path / "run"
    assert run_in_process(stage_flags(tmp_path, run_dir)) == 0
    assert len(failed) == 1
    # the rebuilt student (a new learner) distils from its teacher again
    (first, second) = [learner for member, learner in distilling if member == 3]
    assert first is failed[0] and second is not first
    lineage = read_lineage(run_dir)
    (restart,) = [e for e in lineage if e.get("event") == "restart"]
    assert (restart["member"], restart["generation"], restart["donor"]) == (3, 2, None)
    plan = next(e for e in lineage if e.get("event") == "student" and e["member"] == 3)
    assert restart["new_hparams"] == restart["old_hparams"]
    assert {name: restart["new_hparams"][name] for name in plan["hparams"]} == plan["hparams"]
    first_rung = next(e for e in lineage if e.get("event") == "rung")
    assert "3" in first_rung["scores"] and first_rung["scores"]["3"] is not None  # scored after its second try
    rows = [r for r in read_population(run_dir) if r["generation"] == "2"]
    assert sorted(int(r["member"]) for r in rows) == [2, 3, 4, 5, 6, 7]  # once each: the restart's row replaces none
    assert int(next(r for r in rows if r["member"] == "3")["env_steps"]) == 128 + 128  # began + the rung, once


def test_a_run_stopped_in_its_first_generation_exits_75_with_the_initial_population_on_disk(tmp_path):
    """The stop request is the session's: a signal's flag set before the first generation stops it at
    the loop's agree step, with generation 0's checkpoint written, every member closed and the handlers
    given back."""
    tiny = write_hyperparams(tmp_path)
    run_dir = tmp_path / "run"
    argv = ["--hyperparams", str(tiny), "--tb-writer", "False", *budget(2, 2, 64), "--run-dir", str(run_dir)]
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        session = open_session(parse_config(argv, world_size=1), MPI.COMM_SELF, ["test"], None)
        session.stop.signal_name = "SIGUSR1"  # what the handler records when the signal comes
        assert driver_for(False).load().run(session, None) == EXIT_STOPPED
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN  # a repeat cannot kill it while it exits
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert [p.name for p in ckpt.candidates(run_dir)] == ["gen_000000"]
    assert read_population(run_dir) == []

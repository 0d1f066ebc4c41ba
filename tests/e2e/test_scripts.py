"""Tier 3: each entry script under mpiexec on a tiny budget; check the files and numbers it leaves and that
no rank prints gym's notice; one tiny bigfish run; progress lines during a generation through a pipe. (Bad
input refused on every rank: tests/e2e/test_resilience.py and tests/unit/test_main.py.)"""

import csv
import json

import pytest
import yaml

from tests.e2e.runs import assert_best_kept, scalar_tags
from tests.support import PPO_SIX, TINY_PROCGEN, budget, mpiexec, read_lineage, read_population, write_hyperparams


@pytest.mark.parametrize(
    "script, ranks, agents, exploits_per_generation",
    [
        ("pbt_rl_truct.py", 2, 8, 2),  # 4 members a rank, 2 exploits a generation
        ("pbt_rl_truct_collective.py", 2, 4, 1),
        ("pbt_rl_wta.py", 2, 4, 3),
    ],
)
def test_script_runs_and_leaves_its_records(tmp_path, tiny_hyperparams, script, ranks, agents, exploits_per_generation):
    run_dir = tmp_path / "run"
    generations = 3
    result = mpiexec(
        ranks,
        [
            script,
            *budget(agents, generations, 256),
            "--hyperparams",
            str(tiny_hyperparams),
            "--run-dir",
            str(run_dir),
            "--seed",
            "3",
        ],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Gym has been unmaintained" not in result.stderr  # SB3 imports gym on every rank: evo.sb3._quiet

    # provenance
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["num_agents"] == agents and config["world_size"] == ranks
    assert config["agent"]["n_steps"] == 64  # the --hyperparams file reached the config
    assert script in (run_dir / "command.txt").read_text()
    versions = json.loads((run_dir / "versions.json").read_text())
    assert not any("\x00" in value for value in versions.values())  # MPI pads its library string with a NUL
    assert versions["torch"].startswith("2.13.0") and "Open MPI" in versions["mpi"]

    # population.csv: one row per member per generation, owners and steps consistent
    rows = read_population(run_dir)
    assert len(rows) == generations * agents
    per_rank = agents // ranks
    for row in rows:
        assert int(row["rank"]) == int(row["member"]) // per_rank
        assert int(row["env_steps"]) == 256 * int(row["generation"])
        assert float(row["score"]) > 0
    by_generation = {g: [r for r in rows if int(r["generation"]) == g] for g in range(1, generations + 1)}

    # lineage: exploits as the rule says, recorded consistently with the csv
    lineage = read_lineage(run_dir)
    assert len(lineage) == generations * exploits_per_generation
    for exploit in lineage:
        generation = exploit["generation"]
        rows_now = {int(r["member"]): r for r in by_generation[generation]}
        recipient, donor = exploit["recipient"], exploit["donor"]
        assert rows_now[recipient]["donor"] == str(donor)
        assert float(rows_now[donor]["score"]) >= float(rows_now[recipient]["score"])
        assert exploit["donor_score"] == pytest.approx(float(rows_now[donor]["score"]))
        assert exploit["old_hparams"] == pytest.approx({k: float(rows_now[recipient][k]) for k in PPO_SIX})
        assert exploit["new_hparams"] != exploit["old_hparams"]
        if generation < generations:  # the recipient trains the next generation with the new values
            rows_next = {int(r["member"]): r for r in by_generation[generation + 1]}
            assert {k: float(rows_next[recipient][k]) for k in PPO_SIX} == pytest.approx(exploit["new_hparams"])
    kept = [r for r in rows if r["donor"] == ""]
    assert len(kept) == generations * (agents - exploits_per_generation)
    assert_best_kept(run_dir)  # the best of the run, in the last checkpoint, with the weights it scored with

    # TensorBoard: a directory per member with SB3's metrics and ours, plus population aggregates
    for member in range(agents):
        accumulator, tags = scalar_tags(run_dir / "tb" / f"member_{member}")
        assert {"pbt/score", "hparams/learning_rate", "train/loss", "train/clip_range"} <= tags
        assert len(accumulator.Scalars("pbt/score")) == generations
    accumulator, tags = scalar_tags(run_dir / "tb" / "population")
    assert {"pbt/best_score", "pbt/mean_score", "pbt/min_score", "pbt/exploits"} <= tags
    best = [event.value for event in accumulator.Scalars("pbt/best_score")]
    assert best == pytest.approx([max(float(r["score"]) for r in by_generation[g]) for g in by_generation])

    # timing per generation: where the wall time went
    with (run_dir / "generations.csv").open() as handle:
        timing = list(csv.DictReader(handle))
    assert [int(t["generation"]) for t in timing] == list(range(1, generations + 1))
    for t in timing:
        assert float(t["wall_s"]) >= float(t["train_s"]) > 0 and float(t["wait_s"]) >= 0
        assert float(t["env_steps_per_s"]) > 0

    # console: rank 0 logs one line per generation
    assert result.stdout.count("INFO gen ") == generations, result.stdout


def test_bigfish_runs_and_writes_its_files(tmp_path):
    """Its time is the evaluation's: an episode of bigfish a member and generation, hundreds of steps of
    IMPALA's network each (in one process it is no faster: the two ranks evaluate side by side)."""
    hyperparams = write_hyperparams(tmp_path, TINY_PROCGEN)
    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        [
            "pbt_rl_truct.py",
            "--env-id",
            "bigfish",
            "--total-generations",
            "2",
            "--agent-training-steps",
            "64",
            "--hyperparams",
            str(hyperparams),
            "--run-dir",
            str(run_dir),
            "--tb-writer",
            "False",
            "--num-levels",
            "10",
            "--eval-episodes",
            "1",
            "--select-on",
            "test",
        ],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Gym has been unmaintained" not in result.stderr
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["agent"]["policy"] == "impala" and config["env_id"] == "bigfish"
    rows = read_population(run_dir)
    assert len(rows) == 4 and {int(r["env_steps"]) for r in rows} == {64, 128}
    assert len(read_lineage(run_dir)) == 2
    assert config["eval_start_level"] == 10 and config["select_on"] == "test"
    for row in rows:  # both scores recorded; selection used the held-out one
        assert row["score"] == row["score_test"] and float(row["score_test"]) >= 0
        assert row["score_train"] != ""
    assert not (run_dir / "tb").exists()  # --tb-writer False


def test_progress_lines_appear_during_each_generation(tmp_path, tiny_hyperparams):
    """stdout is a pipe here, as in a SLURM log (Open MPI gives each rank a pseudo-terminal: the launcher's
    output decides): rank 0 logs a progress line every 0.05 s (--progress-interval 0.05) while a generation
    trains (2048 env steps of a member: 0.3 s on a fast 2-core host, so several lines each)."""
    import re

    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        [
            "pbt_rl_truct.py",
            *budget(2, 2, 2048),
            "--progress-interval",
            "0.05",
            "--hyperparams",
            str(tiny_hyperparams),
            "--tb-writer",
            "False",
            "--run-dir",
            str(run_dir),
        ],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    generation_lines = [i for i, line in enumerate(lines) if re.search(r"INFO gen \d/2  env steps/member", line)]
    assert len(generation_lines) == 2, result.stdout
    progress = re.compile(
        r"INFO gen (\d)/2  rank 0 env steps ([\d,]+)/2,048 \(\d+%\)  [\d,]+ env-steps/s  "
        r"ETA generation (\d+s|\d+m\d\ds|\?), run (\d+s|\d+m\d\ds|\?)$"
    )
    found = {1: [], 2: []}
    for index, line in enumerate(lines):
        match = progress.search(line)
        if match:
            generation = int(match.group(1))
            assert index < generation_lines[generation - 1], "a progress line after its generation ended"
            if generation == 2:
                assert index > generation_lines[0], "generation 2's progress before generation 1 ended"
            found[generation].append(int(match.group(2).replace(",", "")))
    assert found[1] and found[2], result.stdout
    for steps in found.values():
        assert steps == sorted(steps) and 0 < steps[-1] <= 2048
    assert "\r" not in result.stdout  # a pipe gets log lines, never the terminal's bar

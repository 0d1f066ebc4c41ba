"""A categorical hyperparameter in real runs: n_epochs from {choices: [1, 2, 4]} given on the
command line, explored by perturb, by PB2 (on its index scale) and by PB2-Mix (as a category)
under mpiexec, recorded in population.csv and the lineage, and trained with (the next
generation's row holds what explore chose)."""

import pytest

from tests.support import PPO_SIX, budget, last_manifest, mpiexec, read_lineage, read_population

CHOICES = [1, 2, 4]


def run_with_choices(run_dir, hyperparams, *extra):
    result = mpiexec(
        2,
        [
            "pbt_rl_truct.py",
            "--env-id",
            "CartPole-v1",
            *budget(4, 3, 256),
            "--conf-file",
            str(hyperparams),
            "--hyperparams",
            f"search_space:{{n_epochs: {{choices: {CHOICES}}}}}",
            "--run-dir",
            str(run_dir),
            "--seed",
            "3",
            *extra,
        ],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def check_records(run_dir):
    rows = read_population(run_dir)
    assert list(rows[0])[6 : 6 + len(PPO_SIX) + 1] == [*PPO_SIX, "n_epochs"]
    assert {row["n_epochs"] for row in rows} <= {str(c) for c in CHOICES}  # whole numbers, from the choices
    lineage = read_lineage(run_dir)
    assert len(lineage) == 3
    for exploit in lineage:
        assert exploit["old_hparams"]["n_epochs"] in CHOICES and exploit["new_hparams"]["n_epochs"] in CHOICES
        if exploit["generation"] < 3:  # the recipient trained the next generation with it
            row = next(
                r
                for r in rows
                if int(r["generation"]) == exploit["generation"] + 1 and int(r["member"]) == exploit["recipient"]
            )
            assert int(row["n_epochs"]) == exploit["new_hparams"]["n_epochs"]
    return lineage


def test_perturb_moves_n_epochs_to_a_neighbouring_choice(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    run_with_choices(run_dir, tiny_hyperparams)
    for exploit in check_records(run_dir):
        change = next(c for c in exploit["changes"] if c.startswith("n_epochs :"))
        old, new = exploit["old_hparams"], exploit["new_hparams"]
        donor_epochs = int(change.split(" : ")[1].split(" ")[0])
        if "resample" not in change:
            assert "index" in change
            assert abs(CHOICES.index(new["n_epochs"]) - CHOICES.index(donor_epochs)) <= 1, (old, new, change)


@pytest.mark.parametrize("explore, how", [("pb2", "(pb2)"), ("pb2-mix", "(pb2-mix bandit)")])
def test_pb2_reads_n_epochs_on_its_index_scale_and_pb2_mix_as_a_category(tmp_path, tiny_hyperparams, explore, how):
    run_dir = tmp_path / "run"
    result = run_with_choices(run_dir, tiny_hyperparams, "--explore", explore)
    assert f"({explore} explore)" in result.stdout
    lineage = check_records(run_dir)
    for exploit in lineage[1:]:  # generation 1 warms up with perturb
        assert any(c.startswith("n_epochs :") and how in c for c in exploit["changes"])
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == explore
    history = explorer["state"]
    assert all(len(x) == len(PPO_SIX) + 1 for _, x, _ in history["observations"])


def test_a_resumed_run_keeps_its_columns_and_its_choices(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    run_with_choices(run_dir, tiny_hyperparams, "--explore", "pb2")
    header = (run_dir / "population.csv").read_text().splitlines()[0]
    result = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "4"])
    assert result.returncode == 0, result.stderr[-4000:]
    lines = (run_dir / "population.csv").read_text().splitlines()
    assert lines[0] == header and len(lines) == 1 + 4 * 4
    rows = read_population(run_dir)
    assert {row["n_epochs"] for row in rows if row["generation"] == "4"} <= {str(c) for c in CHOICES}
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == "pb2"
    assert [t for t, _, _ in explorer["state"]["observations"]][-4:] == [4] * 4

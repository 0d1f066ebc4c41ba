"""A categorical hyperparameter in whole PPO runs in one process (tests/support.py:run_in_process): n_epochs
from {choices: [1, 2, 4]} given on the command line, explored by perturb, by PB2 (on its index scale) and by
PB2-Mix (as a category), recorded in population.csv and the lineage, trained with (the next generation's row
holds what explore chose), and a resumed run keeping its columns and choices. Moved down from the e2e tier,
where they ran under mpiexec: what they check is the explorers' and the records', not MPI's."""

import pytest

from tests.in_process import logged
from tests.support import PPO_SIX, budget, last_manifest, read_lineage, read_population, write_hyperparams

CHOICES = [1, 2, 4]


def run_with_choices(run_dir, hyperparams, *extra) -> str:
    """pbt_rl_truct.py's run of 4 members for 3 generations in this process; returns its log."""
    argv = [
        *("--env-id", "CartPole-v1", *budget(4, 3, 256), "--conf-file", str(hyperparams)),
        *("--hyperparams", f"search_space:{{n_epochs: {{choices: {CHOICES}}}}}"),
        *("--run-dir", str(run_dir), "--seed", "3", "--tb-writer", "False", *extra),
    ]
    status, log = logged(argv)
    assert status == 0, log[-3000:]
    return log


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(explore)``: the run with ``--explore explore``, made once (its run directory and log)."""
    root = tmp_path_factory.mktemp("choices")
    hyperparams = write_hyperparams(root)
    made = {}

    def made_for(explore):
        if explore not in made:
            run_dir = root / explore
            made[explore] = run_dir, run_with_choices(run_dir, hyperparams, "--explore", explore)
        return made[explore]

    return made_for


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


def test_perturb_moves_n_epochs_to_a_neighbouring_choice(runs):
    run_dir, _ = runs("perturb")
    for exploit in check_records(run_dir):
        change = next(c for c in exploit["changes"] if c.startswith("n_epochs :"))
        old, new = exploit["old_hparams"], exploit["new_hparams"]
        donor_epochs = int(change.split(" : ")[1].split(" ")[0])
        if "resample" not in change:
            assert "index" in change
            assert abs(CHOICES.index(new["n_epochs"]) - CHOICES.index(donor_epochs)) <= 1, (old, new, change)


@pytest.mark.parametrize("explore, how", [("pb2", "(pb2)"), ("pb2-mix", "(pb2-mix bandit)")])
def test_pb2_reads_n_epochs_on_its_index_scale_and_pb2_mix_as_a_category(runs, explore, how):
    run_dir, log = runs(explore)
    assert f"({explore} explore)" in log
    lineage = check_records(run_dir)
    for exploit in lineage[1:]:  # generation 1 warms up with perturb
        assert any(c.startswith("n_epochs :") and how in c for c in exploit["changes"])
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == explore
    history = explorer["state"]
    assert all(len(x) == len(PPO_SIX) + 1 for _, x, _ in history["observations"])


def test_a_resumed_run_keeps_its_columns_and_its_choices(runs):
    """The PB2 run above, resumed for a fourth generation."""
    run_dir, _ = runs("pb2")
    header = (run_dir / "population.csv").read_text().splitlines()[0]
    status, log = logged(["--run-dir", str(run_dir), "--resume", "--total-generations", "4"])
    assert status == 0, log[-3000:]
    lines = (run_dir / "population.csv").read_text().splitlines()
    assert lines[0] == header and len(lines) == 1 + 4 * 4
    rows = read_population(run_dir)
    assert {row["n_epochs"] for row in rows if row["generation"] == "4"} <= {str(c) for c in CHOICES}
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == "pb2"
    assert [t for t, _, _ in explorer["state"]["observations"]][-4:] == [4] * 4

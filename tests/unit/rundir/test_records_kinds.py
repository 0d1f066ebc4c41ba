"""A run that explores counts and limits records them: population.csv columns (stable over the
run and its resume), the lineage, the history, hparams.png, the replayed schedule and --schedule.
No MPI, no training: RunRecords is fed MemberResults directly."""

import csv
import json

import pytest

from evo.config import parse_config
from evo.core.plan import Exploit
from evo.core.result import MemberResult
from evo.core.schedule import load_schedule
from evo.learners import learner_spec
from evo.rundir.history import load_run, schedule_of
from evo.rundir.records import Continuation, RunRecords, population_fields
from evo.runner.session import open_records
from tests.support import PPO_SIX

# every n_epochs written below is one of the choices: a kind writes a value as one of its own (a member's
# hyperparameters always are, set_hparams coerces them), so 4 would be recorded as its nearest choice, 3
SPACE = "search_space:{n_epochs: {choices: [3, 4, 5, 6, 10, 20]}, target_kl: {choices: [0.02, null]}}"
TUNABLE = {s.name: (s.type, s.may_be_off) for s in learner_spec("ppo").settings if s.tunable}
"""PPO's tunable settings as --schedule reads a file against them (evo.config.checks.schedule)."""


def hparams(n_epochs: int, target_kl: float | None) -> dict:
    return {**{name: 0.5 for name in PPO_SIX}, "n_epochs": n_epochs, "target_kl": target_kl}


def write(records: RunRecords, generation: int) -> None:
    population = [
        MemberResult(0, 0, 100 * generation, 1.0, hparams=hparams(3 + generation, None)),  # None: off
        MemberResult(1, 0, 100 * generation, 2.0, hparams=hparams(10, 0.02)),
    ]
    exploit = Exploit(generation, 0, 1, 1.0, 2.0, population[0].hparams, hparams(20, None))
    records.write_generation(generation, population, [exploit])


@pytest.fixture
def run_dir(tmp_path):
    config = parse_config(
        ["--run-dir", str(tmp_path / "run"), "--tb-writer", "False", "--hyperparams", SPACE], world_size=1
    )
    assert config.explored_names == (*PPO_SIX, "n_epochs", "target_kl")
    records = open_records(config)
    for generation in (1, 2, 3):
        write(records, generation)
    records = open_records(config, continued=Continuation(2, records.lineage[:2]))
    write(records, 3)
    return config.run_dir


def test_population_csv_has_a_stable_column_per_explored_hyperparameter(run_dir):
    text = (run_dir / "population.csv").read_text()
    header = text.splitlines()[0].split(",")
    scores = ["score_train", "score_test", "score_train_stale"]
    assert header == [*population_fields(PPO_SIX)[:-3], "n_epochs", "target_kl", *scores]
    rows = list(csv.DictReader(text.splitlines()))
    assert [int(row["generation"]) for row in rows] == [1, 1, 2, 2, 3, 3]  # resume kept the columns
    assert [row["n_epochs"] for row in rows[::2]] == ["4", "5", "6"] and rows[0]["target_kl"] == "inf"
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    assert lineage[0]["old_hparams"]["n_epochs"] == 4 and lineage[0]["new_hparams"]["n_epochs"] == 20
    assert lineage[0]["new_hparams"]["target_kl"] is None  # off (no early stop) as standard JSON


def test_history_schedule_and_replay_carry_the_extra_columns(run_dir, tmp_path):
    history = load_run(run_dir)
    assert history.names == (*PPO_SIX, "n_epochs", "target_kl")
    assert history.row(2, 1).hparams["n_epochs"] == 10 and isinstance(history.row(2, 1).hparams["n_epochs"], int)
    schedule = schedule_of(history, 0)
    # member 0 copied member 1 after generations 1 and 2: its weights trained with 10, then its own 6
    assert [(entry["hparams"]["n_epochs"], entry["hparams"]["target_kl"]) for entry in schedule] == [
        (10, 0.02),
        (6, None),  # off: None in hyperparameter dicts (was inf)
    ]

    from evo.tools.replay import write_schedule

    out, document = write_schedule(run_dir, member=0, out=tmp_path / "schedule.yml")
    assert "target_kl: null" in out.read_text()
    loaded, env_id, algo = load_schedule(out, TUNABLE)
    assert [(hp["n_epochs"], hp["target_kl"]) for _, hp in loaded] == [(10, 0.02), (6, None)]
    assert (env_id, algo) == ("CartPole-v1", "ppo")
    config = parse_config(
        ["--num-agents", "1", "--schedule", str(out), "--run-dir", str(tmp_path / "replay")], world_size=1
    )
    assert config.explored_names == (*PPO_SIX, "n_epochs", "target_kl")


def test_hparams_png_has_a_panel_per_recorded_hyperparameter_with_choice_ticks(run_dir):
    from evo.tools.plot import plot_hparams

    figure = plot_hparams(load_run(run_dir))
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert len(panels) == len(PPO_SIX) + 2
    epochs = next(ax for ax in panels if "(n_epochs)" in ax.get_title())
    assert [tick.get_text() for tick in epochs.get_yticklabels()] == ["3", "4", "5", "6", "10", "20"]
    kl = next(ax for ax in panels if "(target_kl)" in ax.get_title())
    assert [tick.get_text() for tick in kl.get_yticklabels()] == ["0.02", "none"]


def test_a_schedule_must_keep_the_same_names_and_known_ones(tmp_path):
    six = {name: 0.5 for name in PPO_SIX}
    path = tmp_path / "s.yml"
    path.write_text(
        json.dumps(
            {"schedule": [{"env_steps": 0, "hparams": {**six, "n_epochs": 3}}, {"env_steps": 9, "hparams": six}]}
        )
    )
    with pytest.raises(ValueError, match="every entry must give the same hyperparameters"):
        load_schedule(path, TUNABLE)
    path.write_text(json.dumps({"schedule": [{"env_steps": 0, "hparams": {**six, "n_step": 3}}]}))
    with pytest.raises(ValueError, match="unknown n_step"):
        load_schedule(path, TUNABLE)


def test_a_schedule_file_is_checked_before_it_is_read_and_never_quoted(tmp_path):
    """As --conf-file (issue 54 N11, N12): --schedule /dev/zero was read until memory ran out, and a YAML error
    echoed the file's lines."""
    path = tmp_path / "s.yml"
    path.write_text("schedule:\n  - env_steps: 0\n    hparams: {secret: hunter2\n")
    with pytest.raises(ValueError) as refused:
        load_schedule(path, TUNABLE)
    assert "is not valid YAML" in str(refused.value) and "line" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match=r"--schedule /dev/zero: not a regular file \(a character device\)"):
        load_schedule("/dev/zero", TUNABLE)
    path.write_bytes(b"schedule: [caf\xe9]\n")
    with pytest.raises(ValueError, match="not UTF-8 text"):
        load_schedule(path, TUNABLE)

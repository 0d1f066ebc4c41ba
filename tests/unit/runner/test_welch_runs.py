"""``--exploit-test welch`` in whole CartPole runs in one process (tests/support.py:run_in_process), synchronous
and asynchronous: every exploit selection decided carries its test in lineage.jsonl, a recipient copies
exactly when the test showed its drawn donor better, the log says each test and TensorBoard counts them. An
asynchronous run's ready records keep the outcomes behind each score (the returns its training score averages),
which a resume reads back (evo.rundir.records.result_of_record). The test's arithmetic and its gate:
tests/unit/core/test_welch.py; the run's final pick with the test on, stopped and resumed:
tests/unit/runner/test_final_runs.py. (Under mpiexec the tests are decided on rank 0 from the gathered
results, as every other exploit: the rank tier's gather and exchange tests.)"""

import math

import numpy as np
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from evo.rundir.ready import latest_ready
from evo.rundir.records import result_of_record
from tests.in_process import logged
from tests.support import TINY_DEFAULT, assert_tested, budget, read_lineage, read_population, write_hyperparams

CASES = pytest.mark.parametrize(
    "mode, alpha",
    [([], 0.2), (["--asynchronous"], 0.2), ([], 1e-9)],
    ids=["synchronous", "asynchronous", "synchronous-no-donor-better-at-1e-9"],
)


@CASES
def test_each_exploit_is_tested_and_copies_only_where_the_donor_is_shown_better(tmp_path, mode, alpha):
    """At alpha 1e-9 no early CartPole donor is shown better (that would take t near 10 on 10 episodes): every
    recipient keeps its weights and explores its own values, and population.csv names no donor."""
    run_dir = tmp_path / "run"
    tiny = write_hyperparams(tmp_path, TINY_DEFAULT)
    argv = [*budget(4, 3, 256), "--hyperparams", str(tiny), "--seed", "3", *mode]
    argv += ["--exploit-test", "welch", "--exploit-alpha", str(alpha), "--run-dir", str(run_dir)]
    status, log = logged(argv)
    assert status == 0, log[-3000:]
    lineage = read_lineage(run_dir)
    tested = assert_tested(lineage, alpha)
    assert tested
    for line in tested:
        assert f"Welch's t-test against member {line['welch']['donor']}" in log
    lines = [line for line in lineage if "event" not in line and "failures" not in line]
    # population.csv names a donor exactly where a recipient copied
    copied = {
        (line["generation"], line["recipient"]): line["donor"] for line in lines if line["donor"] != line["recipient"]
    }
    rows = {(int(r["generation"]), int(r["member"])): r["donor"] for r in read_population(run_dir)}
    assert {key: int(donor) for key, donor in rows.items() if donor != ""} == copied
    # TensorBoard's population counts the tests and the copies as the lineage does
    accumulator = EventAccumulator(str(run_dir / "tb" / "population"))
    accumulator.Reload()
    assert sum(event.value for event in accumulator.Scalars("pbt/welch_tests")) == len(tested)
    copies = sum(line["welch"]["copied"] for line in tested)
    assert sum(event.value for event in accumulator.Scalars("pbt/welch_copies")) == copies
    if alpha < 1e-6:
        assert not copied and "not better by Welch's t-test: explored without a copy" in log
    if not mode:
        return
    # the asynchronous run's ready records hold each score's outcomes: the returns its training score averages
    run_id = yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]
    found, _ = latest_ready(run_dir, run_id, 4)
    for member in range(4):
        record = found.last_record(member)
        result = result_of_record(record, {})  # the row's scores and the record's outcomes (no hyperparameters)
        assert result.outcomes == tuple(record["outcomes"]) and 1 <= len(result.outcomes) <= 10
        assert result.score == pytest.approx(np.mean(result.outcomes)) and math.isfinite(result.score)

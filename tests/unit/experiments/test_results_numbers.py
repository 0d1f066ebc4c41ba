"""experiments/results_numbers.py (issue 55, item 8): the numbers docs/results.md and README.md quote about the
Procgen studies and the horizon, recomputed from the committed records. The committed record
(docs/results/procgen-learning/descriptive.json) is what the records give; its selected members, fresh means and
floors are the committed report's; and the docs quote it (they said +705 for 704.48, left seed 0's PB2-Mix at
25 % out of the agents below the floor, quoted the pilot's full-budget 2.7 standard errors for its 393,216 env
steps, and hid that a comparison's sign rests on a tie)."""

import json
import math

import pytest

from experiments.results_numbers import (
    LEARNING,
    RECORD,
    horizon,
    learning_points,
    main,
    normalised,
    normalised_table,
    pilot_20_at_393216,
)
from tests.support import ROOT


def test_the_committed_record_is_what_the_records_give(capsys):
    assert main(["--check"]) == 0, capsys.readouterr().out


def test_its_selected_members_and_floors_are_the_committed_reports():
    """The same rule as the report (first by selection score, the lower id on a tie) on the same caches."""
    from evo.study.records import Point
    from evo.study.report import FloorValues, above_floor

    report = json.loads((LEARNING / "report.json").read_text())
    points = learning_points()
    assert len(points) == len(report["points"]) == 36
    record = json.loads(RECORD.read_text())
    below = {(b["method"], b["seed"], b["fraction"]) for b in record["below_floor"]}
    floors = {
        int(seed): FloorValues(**{k: v for k, v in values.items() if k != "constant_returns"})
        for seed, values in report["floors"]["starpilot"].items()
    }
    for reported in report["points"]:
        key = (reported["method"], reported["seed"], reported["fraction"])
        mine = points[key]
        assert (mine["selected_member"], mine["generation"]) == (reported["selected_member"], reported["generation"])
        assert mine["fresh"] == pytest.approx(reported["selected"])
        assert mine["fresh_se"] == pytest.approx(reported["selected_se"], abs=1e-6)
        point = Point(key[2], mine["generation"], 0, 0, 0.0, mine["fresh"], mine["fresh_se"], 0.0, 0.0)
        assert (above_floor(point, floors[key[1]]) < 3) == (key in below), key
    assert ("pb2-mix", 0, 0.25) in below and len(below) == 5  # the one the docs' list missed, and four more


def test_the_docs_quote_the_record():
    results = (ROOT / "docs" / "results.md").read_text()
    readme = (ROOT / "README.md").read_text()
    record = json.loads(RECORD.read_text())
    assert normalised_table(record) in results  # the table is the record's
    assert normalised("starpilot", 2.5) == 0 and normalised("starpilot", 64.0) == 1
    found = horizon()
    assert (round(found["mean"]), round(found["low"]), round(found["high"])) == (704, 66, 1343)
    assert (round(found["low_97_5"]), round(found["high_97_5"])) == (-63, 1472)
    assert "+705" not in results + readme and "+704 [66, 1343]" in readme and results.count("+704 [66,") == 2
    assert round(pilot_20_at_393216(), 1) == 1.0 and "(1.0 on the 20\nplanned;" in readme
    assert "seed 0's PB2-Mix at 25 %, 1.7," in results
    (other,) = record["pb2_mix_minus_random_at_100"]["with_the_other_tied_member"]
    quoted = f"{other['mean']:+.2f} [{other['low']:.2f}, {other['high']:.2f}]".replace("-", "−").lstrip("+")
    assert (other["seed"], other["member"], other["higher_in"]) == (1, 3, 2) and f"the mean {quoted}" in results
    pilot = record["pilot_total"]
    assert math.isclose(pilot["points"][-1]["fresh"], 4.02) and pilot["seed0_at_100"]["pbt"]["fresh"] == 2.71
    assert "| 0 | *the pilot's agent* (descriptive, below) | 2.74 ± 0.27 | 3.36 ± 0.33 | 4.02 ± 0.41 |" in results

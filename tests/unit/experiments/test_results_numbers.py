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
    assert round(pilot_20_at_393216(), 1) == 1.0 and "(1.0 on the 20 planned;" in " ".join(readme.split())
    assert "seed 0's PB2-Mix at 25 %, 1.7," in results
    (other,) = record["pb2_mix_minus_random_at_100"]["with_the_other_tied_member"]
    quoted = f"{other['mean']:+.2f} [{other['low']:.2f}, {other['high']:.2f}]".replace("-", "−").lstrip("+")
    assert (other["seed"], other["member"], other["higher_in"]) == (1, 3, 2) and f"the mean {quoted}" in results
    pilot = record["pilot_total"]
    assert math.isclose(pilot["points"][-1]["fresh"], 4.02) and pilot["seed0_at_100"]["pbt"]["fresh"] == 2.71
    assert "| 0 | *the pilot's agent* (descriptive, below) | 2.74 ± 0.27 | 3.36 ± 0.33 | 4.02 ± 0.41 |" in results


def test_the_atari_section_quotes_its_records():
    """docs/results.md's Breakout table (issue 57, item 2) from the committed records: each agent's fresh mean and
    standard error of its 20 games (PBT's selected member: the one its last selection scores rank first), the
    floors, the standard errors above the higher floor, and the two differences with their standard errors."""
    import csv

    from evo.study.stats import standard_error

    def mean_se(values: list[float]) -> tuple[float, float]:
        return sum(values) / len(values), standard_error(values)

    runs = ROOT / "docs" / "results" / "atari" / "ALE_Breakout-v5"
    floors = json.loads((ROOT / "docs" / "results" / "atari" / "floors" / "ALE_Breakout-v5-seed0.json").read_text())

    def fresh(method: str) -> tuple[float, float]:
        last = list(csv.DictReader((runs / f"{method}-seed0" / "population.csv").open()))
        last = [row for row in last if row["generation"] == last[-1]["generation"]]
        selected = max(last, key=lambda row: (float(row["score"]), -int(row["member"])))["member"]
        return mean_se(json.loads((runs / f"{method}-seed0" / "reevaluation.json").read_text())["members"][selected])

    pbt, fp32, bf16 = fresh("pbt"), fresh("zoo-total"), fresh("zoo-total-bf16")
    constant = {int(action): mean_se(returns) for action, returns in floors["constant"].items()}
    best = max(constant.values())
    results = (ROOT / "docs" / "results.md").read_text()
    for (mean, se), above in ((pbt, "12.8"), (fp32, "11.4"), (bf16, "10.6")):
        assert f"| {mean:.2f} ± {se:.2f} | {above}" in results
        assert f"{(mean - best[0]) / math.hypot(se, best[1]):.1f}" == above
    assert f"| {mean_se(floors['random'])[0]:.2f} ± {mean_se(floors['random'])[1]:.2f} |" in results
    assert best == constant[1] and f"(FIRE; NOOP {constant[0][0]:.2f}, RIGHT {constant[2][0]:.2f}, LEFT" in results
    assert f"| {best[0]:.2f} ± {best[1]:.2f} |" in results
    primary = f"{pbt[0] - fp32[0]:.1f} on this seed, ± {math.hypot(pbt[1], fp32[1]):.1f}".replace("-", "−")
    secondary = f"+{bf16[0] - fp32[0]:.2f} ± {math.hypot(bf16[1], fp32[1]):.2f}, one standard error"
    assert primary in results and secondary in results


def interval(mean: float, low: float, high: float) -> str:
    """A difference as docs/results.md quotes it, "+704 [66, 1343]", with typeset minus signs."""
    return f"{mean:+.0f} [{low:.0f}, {high:.0f}]".replace("-", "−")


DECLARED = {  # a declared study's section title, and its fresh table's columns: (method, results.json's field)
    "evo-seed": (
        "The EVO seed's claims on Ant",
        [("pbt-wta", "fresh_selected"), ("pbt", "fresh_selected"), ("sac-total", "fresh_selected")],
    ),
    "untuned": (
        "A user without tuned settings",
        [
            ("pbt", "fresh_selected"),
            ("pbt", "fresh_best_ever"),
            ("pbt-welch", "fresh_best_ever"),
            ("random", "fresh_selected"),
            ("sb3-default-total", "fresh_selected"),
        ],
    ),
}


@pytest.mark.parametrize("study", sorted(DECLARED))
def test_a_declared_studys_results_quote_its_committed_report(study):
    """The results under a declared study's section (issue 57 item 8, issue 55 item 6), from its committed
    report.json and results.json (rebuilt from the records by tests/unit/study/test_report.py): each comparison's
    mean difference with its 95 % t-interval, the Bonferroni interval where it has one, the seeds each way; and
    its table's fresh returns, one row per seed."""
    title, columns = DECLARED[study]
    folder = ROOT / "docs" / "results" / study
    report = json.loads((folder / "report.json").read_text())
    rows = {(row["method"], row["seed"]): row for row in json.loads((folder / "results.json").read_text())}
    section = (ROOT / "docs" / "results.md").read_text().split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]
    section = " ".join(section.split())  # as read, not as wrapped
    for comparison in report["comparisons"]:
        quoted = interval(comparison["mean"], comparison["low"], comparison["high"])
        assert quoted in section, quoted
        seeds = len(comparison["seeds"])
        assert f"higher in {comparison['wins']}, lower in {comparison['losses']} of {seeds}" in section
        if comparison["correction"] is not None:
            corrected = comparison["correction"]
            assert f"Bonferroni: [{corrected['low']:.0f}, {corrected['high']:.0f}]".replace("-", "−") in section
    for seed in report["seeds_planned"]:
        cells = " | ".join(f"{rows[method, seed][field]:.0f}".replace("-", "−") for method, field in columns)
        assert f"| {seed} | {cells} |" in section, seed

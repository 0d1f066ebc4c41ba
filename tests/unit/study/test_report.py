"""evo/study/records.py and report.py: one run's numbers from its records, and the report's tables,
statistics and verdicts against values computed by hand; the committed reports rebuilt byte for byte
from the committed records (docs/results/)."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from evo.study import report
from evo.study.jobs import Job, has_result, jobs_for
from evo.study.main import BUILT_IN
from evo.study.records import Point, Result, best_within, lineage_counts, reward_threshold, summarise
from evo.study.reporting import collect, results_json, write_report
from evo.study.spec import Comparison, StudyError, load_study, parse_study
from evo.study.stats import paired
from tests.support import PPO_SIX, ROOT, need_atari

T_975_2 = 4.302652729911275  # Student's t, 0.975 quantile, 2 degrees of freedom
T_9875_2 = 6.205346816570706  # ... its 0.9875 quantile (a 97.5 % interval: Bonferroni's for two comparisons)


def write_run(run_dir, scores_by_generation, steps=100, donors=None, wall=12.5):
    """population.csv (every member each generation; ``donors``: {(generation, member): donor}) and wall_s."""
    run_dir.mkdir(parents=True)
    header = "generation,member,rank,env_steps,score,donor," + ",".join(PPO_SIX) + ",score_train,score_test\n"
    lines = [header]
    for generation, scores in enumerate(scores_by_generation, start=1):
        for member, score in enumerate(scores):
            donor = (donors or {}).get((generation, member), "")
            lines.append(f"{generation},{member},0,{steps * generation},{score},{donor}," + ",".join(["0.5"] * 6))
            lines[-1] += ",,\n"
    (run_dir / "population.csv").write_text("".join(lines))
    (run_dir / "wall_s").write_text(f"{wall}\n")


def write_fresh(run_dir, members, generation=None, episodes=4, seed=0):
    """A re-evaluation cache as evo/study/fresh.py writes it."""
    from evo.study.fresh import cache_path, how_made
    from evo.tools.saved import evaluation_seed

    how = how_made(evaluation_seed(seed), episodes, None, True, generation)
    record = {"how": how, "members": {str(m): r for m, r in members.items()}, "best_ever": None}
    cache_path(run_dir, generation).write_text(json.dumps(record))


def test_summary_and_table(tmp_path):
    write_run(tmp_path / "a", [[10, 480, 20], [30, 470, 40], [500, 490, 60]])
    write_run(tmp_path / "b", [[10, 20, 30], [40, 50, 60], [70, 80, 90]])
    a = summarise(Job("CartPole-v1", "pbt", 0, 2, (), tmp_path / "a"), 475)
    assert (a.final_best, a.final_median, a.members, a.wall_s) == (500, 490, 3, 12.5)
    assert a.steps_to_threshold == 300  # the population's total env steps when its best first reached 475
    assert a.curve == [(300, 480), (600, 470), (900, 500)]
    b = summarise(Job("CartPole-v1", "pbt", 1, 2, (), tmp_path / "b"), 475)
    assert b.steps_to_threshold is None
    markdown = report.table([a, b], ["CartPole-v1"], ["pbt", "single"], {"CartPole-v1": 475})
    row = markdown.splitlines()[2]
    # the area under the best curve: a's best is 480, 470, 500 at 300, 600, 900 steps -> 480.0
    assert a.auc == (480 + 470) / 2 * 300 / 600 + (470 + 500) / 2 * 300 / 600
    # one agent's total is 900 / 3 = 300 steps: a's best then was 480, b's 30
    assert (a.equal_total, b.equal_total) == (480, 30)
    assert row.startswith(
        "| CartPole-v1 (≥ 475) | pbt | 3 | 2 | 295.0 ± 289.9 | 285.0 ± 289.9 | 255.0 ± 318.2 | 270.0 ± 297.0 | 300 | "
        "1/2 |"
    )
    assert "single" not in markdown  # no runs, no row
    unset = report.table([a, b], ["CartPole-v1"], ["pbt"], {}).splitlines()[2]  # no threshold declared
    assert unset.startswith("| CartPole-v1 | pbt |") and "| — | — (no threshold) |" in unset  # it said "0/2"


def test_numbers_below_one_keep_three_significant_digits():
    """A success rate's report read 0.1 for 0.0976 and 0.1002 alike (one decimal, whatever the scale)."""
    assert [report.decimals(v) for v in (704.48, 2.7, 1.0, 0.0, 0.1002, 0.0976, 0.004, float("nan"))] == [
        1, 1, 1, 1, 3, 4, 5, 1,
    ]  # fmt: skip
    comparison = Comparison("pbt", "single", 1.0)
    rates = report.verdict(comparison, paired({0: 0.1002, 1: 0.12, 2: 0.11}, {0: 0.0976, 1: 0.1, 2: 0.1}), 3)
    assert ": +0.0109 [" in rates  # the mean difference of 0.0026, 0.02 and 0.01
    assert report._ci(0.1002, 0.0976, 0.11) == "0.100 [0.098, 0.110]" and report._ci(704.48, -1.0, 1500.0) == (
        "704.5 [-1.0, 1500.0]"
    )
    assert report._mean_std([0.0976, 0.1002]) == "0.0989 ± 0.0018"


def test_best_within_is_the_last_generation_inside_the_steps():
    curve = [(400, -900.0), (800, -300.0), (1200, -150.0), (1600, -120.0)]
    assert best_within(curve, 1600 / 4) == -900.0  # 4 members: one agent's total is the first generation's
    assert best_within(curve, 1000) == -300.0  # inside, not the nearest
    assert math.isnan(best_within(curve, 399))  # the first generation already used more
    assert best_within([(100, 7.0), (200, 9.0)], 200 / 1) == 9.0  # one agent: its final best


def result(method, seed, best, env_id="Pendulum-v1"):
    return Result(env_id, method, seed, 4, best, best, None, 1.0, [(1, best)], auc=best)


def test_paired_comparisons_over_seeds():
    results = [result("pbt", s, b) for s, b in enumerate([-300.0, -250.0, -400.0])]
    results += [result("random", s, b) for s, b in enumerate([-350.0, -260.0, -380.0])]
    results += [result("zoo", 0, -500.0)]  # ran one seed only: compared on that seed
    markdown = report.comparisons(results, ["Pendulum-v1"], ["pbt", "random", "zoo"], "pbt")
    rows = {line.split(" | ")[1]: line for line in markdown.splitlines() if line.startswith("| Pendulum-v1")}
    assert rows["pbt"].endswith("| — | — | — |")  # the reference itself
    # random minus pbt, same seed: -50, -10, +20 -> mean -13.3; better on one seed, worse on two
    assert "| -13.3 [" in rows["random"] and "| 1 / 2 of 3 |" in rows["random"]
    assert rows["random"].endswith("| 0.750 |")  # 6 of the 8 sign patterns give |mean| >= 13.3
    assert "| 1 | -500.0 [-500.0, -500.0] |" in rows["zoo"] and "| 0 / 1 of 1 | 1.000 |" in rows["zoo"]
    assert "cannot give p below 0.250" in markdown  # 3 seeds: 2 / 2^3
    # t-intervals over seeds: pbt's -316.7 +- t(0.975, 2) 4.303 x 76.4 / sqrt(3) = 189.7
    assert "| 3 | -316.7 [-506.4, -126.9] |" in rows["pbt"]
    # the differences -50, -10, +20: mean -13.3, sd 35.1 -> half-width 87.2
    assert "| -13.3 [-100.6, 73.9] |" in rows["random"]


def test_lineage_counts_ties_under_both_rules():
    lineage = [
        {"recipient": 1, "donor": 1, "recipient_score": -500.0, "donor_score": -500.0},  # kept (explore)
        {"recipient": 2, "donor": 0, "recipient_score": -500.0, "donor_score": -500.0},  # tie copied (copy)
        {"recipient": 3, "donor": 0, "recipient_score": -480.0, "donor_score": -100.0},  # a real exploit
        {"recipient": 4, "donor": 4, "recipient_score": None, "donor_score": None},  # NaN ties NaN
        {"event": "restart", "member": 2, "generation": 3, "donor": 0},  # no exploit
    ]
    assert lineage_counts(lineage) == (3, 2) and lineage_counts([]) == (0, 0)


def test_the_verdict_says_not_separated_unless_the_interval_excludes_zero():
    comparison = Comparison("pbt", "zoo-total", 1.0)
    # differences 2, 5, -4: mean 1.0, sd sqrt(21), half-width t(0.975, 2) sqrt(21) / sqrt(3)
    pair = paired({0: 10.0, 1: 14.0, 2: 6.0, 3: 1.0}, {0: 8.0, 1: 9.0, 2: 10.0})
    half = T_975_2 * math.sqrt(21) / math.sqrt(3)
    assert pair.seeds == (0, 1, 2) and pair.differences == (2.0, 5.0, -4.0)
    assert (pair.mean, pair.wins, pair.losses, pair.p) == (1.0, 2, 1, 0.75)
    assert pair.low == pytest.approx(1.0 - half) and pair.high == pytest.approx(1.0 + half)
    text = report.verdict(comparison, pair, planned=4)
    assert text.startswith("**pbt − zoo-total** at 100 % of the budget, fresh returns paired over 3 seeds: +1.0 [")
    assert f"[{1.0 - half:.1f}, {1.0 + half:.1f}]" in text and "pbt higher in 2, lower in 1 of 3" in text
    assert "(3 of the 4 planned seeds: provisional)" in text and text.endswith(
        "**Not separated**: the interval includes 0, so these seeds cannot tell which is better."
    )
    above = paired({0: 10.0, 1: 11.0, 2: 12.0}, {0: 1.0, 1: 1.5, 2: 2.0})
    assert report.verdict(comparison, above, 3).endswith("**pbt is better**: the interval lies above 0.")
    below = paired({0: 1.0, 1: 1.5, 2: 2.0}, {0: 10.0, 1: 11.0, 2: 12.0})
    assert report.verdict(comparison, below, 3).endswith("**zoo-total is better**: the interval lies below 0.")
    one = paired({0: 5.0}, {0: 1.0})
    assert report.verdict(comparison, one, 3) == (
        "**pbt − zoo-total** at 100 % of the budget, fresh returns paired over 1 seed: +4.0; pbt higher in 1, "
        "lower in 0 of 1 (1 of the 3 planned seeds: provisional). **Not separated**: one seed gives no interval."
    )
    assert "nothing can be said" in report.verdict(comparison, paired({}, {0: 1.0}), 3)


def test_seeds_whose_selected_members_played_every_episode_alike_are_named_in_the_verdict():
    """Two selected members that return the same on every fresh episode differ by exactly 0. The verdict
    names those seeds and the per-seed table marks them; equal means from other returns do not count. They
    are "the same member" only where their weights digests are equal (a top member PBT never replaced trains
    as random search's does from the same seed and draw); with other digests (two argmax policies holding
    one action) or none recorded (caches made before the digests), only "the same score"."""

    def run(method, seed, returns, digest=None):
        point = Point(1.0, 4, 400, 0, 3.0, sum(returns) / len(returns), 0.5, 2.0, 2.0, returns=tuple(returns),
                      digest=digest)  # fmt: skip
        job = Job("starpilot", method, seed, 2, (), Path())
        return type("Run", (), {"measure": "return", "job": job, "points": [point]})()

    runs = [run("pbt", 0, [1.0, 4.0]), run("random", 0, [1.0, 4.0]),  # no digests: the same score only
            run("pbt", 1, [2.0, 3.0]), run("random", 1, [3.0, 2.0]),  # the same mean, other episodes
            run("pbt", 2, [5.0, 5.0]), run("random", 2, [1.0, 1.0]),
            run("pbt", 3, [0.0, 0.0], "aa"), run("random", 3, [0.0, 0.0], "aa"),  # the same weights
            run("pbt", 4, [0.0, 0.0], "aa"), run("random", 4, [0.0, 0.0], "bb"),  # other weights
            run("pbt", 5, [0.0, 0.0], "aa"), run("random", 5, [0.0, 0.0])]  # fmt: skip
    comparison = Comparison("pbt", "random", 1.0)
    assert report.same_episodes(runs, "starpilot", comparison) == [0, 3, 4, 5]
    text = report.verdicts(runs, [(comparison, "starpilot")], comparison, planned=6, fresh=True)
    assert "most likely" not in text
    assert text.endswith(
        "In seed 3 both selected members are the same member (the same weights: their digests are equal), "
        "trained alike from the same seed and draw (any exploits changed other members), so the difference "
        "there is exactly 0. In seed 4 both selected members returned the same score on every fresh episode "
        "from other weights (their digests differ): policies that act alike on these episodes, so the "
        "difference there is exactly 0. In seeds 0, 5 both selected members returned the same score on every "
        "fresh episode, so the difference there is exactly 0.\n"
    )
    rows = report.per_seed_table(runs, [(comparison, "starpilot")], fresh=True).splitlines()[2:]
    assert rows == [
        "| starpilot | pbt − random at 100 % | fresh return | 0 | 2.5 | 2.5 | +0.0 (the same score on every episode) |",
        "| starpilot | pbt − random at 100 % | fresh return | 1 | 2.5 | 2.5 | +0.0 |",
        "| starpilot | pbt − random at 100 % | fresh return | 2 | 5.0 | 1.0 | +4.0 |",
        "| starpilot | pbt − random at 100 % | fresh return | 3 | 0.0 | 0.0 | +0.0 (the same member: the same "
        "weights) |",
        "| starpilot | pbt − random at 100 % | fresh return | 4 | 0.0 | 0.0 | +0.0 (the same score on every "
        "episode, other weights) |",
        "| starpilot | pbt − random at 100 % | fresh return | 5 | 0.0 | 0.0 | +0.0 (the same score on every episode) |",
    ]
    assert "same" not in report.verdicts(runs[2:6], [(comparison, "starpilot")], comparison, planned=6, fresh=True)


def tiny_study(tmp_path: Path):
    """pbt (4 members) against one agent given the population's env steps, 3 seeds of 2 generations of
    100 env steps per member, re-evaluated on 4 fresh episodes at 50 % and 100 % of the budget."""
    return parse_study(
        {
            "envs": ["CartPole-v1"],
            "seeds": [0, 1, 2],
            "budget": {"default": {"generations": 2, "steps": 100}},
            "methods": {"pbt": {}, "zoo-total": {"kind": "single", "total": True}},
            "fresh": {"episodes": 4, "at": [0.5, 1.0]},
            "compare": {"primary": "pbt - zoo-total at 1.0", "secondary": ["pbt - zoo-total at 0.5"]},
        },
        "tiny",
        out=tmp_path / "study",
    )


# Per seed, pbt's selection scores (generation 1, generation 2), its fresh returns per member at each
# generation, the copies at the end of generation 2 ({recipient: donor}); then the single agent's.
PBT = {
    0: ([[5, 9, 7, 1], [20, 30, 10, 25]], {1: [[4, 4, 4, 4], [9, 9, 9, 9], [6, 6, 6, 6], [2, 2, 2, 2]],
                                            2: [[18, 18, 18, 18], [9, 11, 10, 9], [2, 2, 2, 2], [26, 26, 26, 26]]}),
    1: ([[1, 2, 3, 4], [40, 10, 20, 30]], {1: [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [8, 8, 8, 8]],
                                            2: [[12, 16, 14, 14], [5, 5, 5, 5], [30, 30, 30, 30], [20, 20, 20, 20]]}),
    2: ([[3, 3, 3, 3], [0, 50, 5, 5]], {1: [[7, 7, 7, 7], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
                                         2: [[1, 1, 1, 1], [4, 8, 6, 6], [9, 9, 9, 9], [3, 3, 3, 3]]}),
}  # fmt: skip
COPIES = {(2, 2): 1, (2, 3): 1}  # at the end of generation 2, members 2 and 3 copy member 1
ZOO = {0: ([[11], [12]], {1: [[3, 3, 3, 3]], 2: [[8, 8, 8, 8]]}),
       1: ([[13], [14]], {1: [[5, 5, 5, 5]], 2: [[9, 9, 9, 9]]}),
       2: ([[15], [16]], {1: [[1, 1, 1, 1]], 2: [[10, 10, 10, 10]]})}  # fmt: skip


def write_tiny_runs(study):
    for job in jobs_for(study):
        scores, fresh = (PBT if job.method == "pbt" else ZOO)[job.seed]
        members = len(scores[0])
        steps = 100 if members == 4 else 400  # the single agent: the population's env steps in one
        write_run(job.run_dir, scores, steps, COPIES if members == 4 else None, wall=10.0 * job.ranks)
        for generation, returns in fresh.items():
            write_fresh(job.run_dir, dict(enumerate(returns)), None if generation == 2 else generation, seed=job.seed)


def test_a_stages_best_student_is_played_against_its_teacher_on_the_same_fresh_episodes():
    """The committed BG-PBT seed-0 run's lineage: the stage began after generation 4 with teacher 0 and
    ended at generation 5's rung, where student 6 scored best and took member 0's place. Its fresh
    numbers are the teacher's returns at generation 4's checkpoint and member 0's (not member 6's) at
    generation 5's, paired episode by episode."""
    from evo.rundir.history import load_run
    from evo.study.fresh import FreshReturns
    from evo.study.records import stage_facts, stage_generations

    history = load_run(ROOT / "docs/results/bgpbt/HalfCheetah-v5/bgpbt-seed0")
    assert stage_generations(history) == [(4, 5)]
    teacher, decoy = [10.0, 20.0, 30.0], [0.0, 0.0, 0.0]
    fresh = {
        4: FreshReturns({0: teacher, 1: decoy, 2: decoy, 3: decoy}),
        5: FreshReturns({0: [13.0, 21.0, 35.0], 1: decoy, 2: decoy, 3: decoy}),
    }
    (facts,) = stage_facts(history, fresh)
    assert (facts["best_student"], facts["its_teacher"]) == (6, 0)
    assert (facts["teacher_fresh"], facts["best_student_fresh"]) == (20.0, 23.0)
    differences = [3.0, 1.0, 5.0]  # mean 3, standard deviation 2: 3 ± t(0.975, 2) · 2 / √3
    assert facts["fresh_difference"] == pytest.approx(3.0)
    assert facts["fresh_low"] == pytest.approx(3.0 - T_975_2 * 2 / math.sqrt(3))
    assert facts["fresh_high"] == pytest.approx(3.0 + T_975_2 * 2 / math.sqrt(3))
    assert sum(differences) / 3 == facts["fresh_difference"]
    (without,) = stage_facts(history, {5: fresh[5]})  # the teacher's checkpoint was not kept
    assert without["best_student"] == 6 and math.isnan(without["fresh_difference"])
    table = report.stages_table([Result("HalfCheetah-v5", "bgpbt", 0, 4, 1.0, 1.0, None, 1.0, [], stages=[facts])])
    assert "| HalfCheetah-v5 | bgpbt | 0 | 0 | 20.0 | 6 | 23.0 | 3.0 [-2.0, 8.0] |" in table
    assert "at or above its teacher's in 1 of 1 stages; above by more than its interval in 0" in table


def test_the_report_of_a_tiny_study_against_values_computed_by_hand(tmp_path, capsys):
    study = tiny_study(tmp_path)
    write_tiny_runs(study)
    runs = write_report(study, jobs_for(study))
    assert len(runs) == 6
    out = study.out
    record = json.loads((out / "report.json").read_text())
    points = {(p["method"], p["seed"], p["fraction"]): p for p in record["points"]}
    # seed 0 at the end: member 1 is selected (score 30), fresh mean 9.75; members 2 and 3 were copied at
    # the end of generation 2, so the median without them is over members 0 and 1: (18 + 9.75) / 2
    end = points[("pbt", 0, 1.0)]
    assert (end["selected_member"], end["selected"], end["selection_score"]) == (1, 9.75, 30)
    assert end["selection_bias"] == 30 - 9.75 and end["copied"] == [2, 3]
    assert end["median"] == (9.75 + 18) / 2 and end["median_uncopied"] == (18 + 9.75) / 2
    assert end["total_env_steps"] == 800 and end["selected_se"] == pytest.approx(math.sqrt(2.75 / 3) / 2)
    # seed 1 at the end: member 0 (score 40), fresh 14; median of 14, 5, 30, 20 = 17; without 2 and 3: 9.5
    end = points[("pbt", 1, 1.0)]
    assert (end["selected"], end["median"], end["median_uncopied"]) == (14, 17, 9.5)
    # at 50 % (generation 1, 400 env steps in all): seed 0's member 1 (score 9) played 9; no copies then
    half = points[("pbt", 0, 0.5)]
    assert (half["generation"], half["total_env_steps"], half["selected"], half["copied"]) == (1, 400, 9, [])
    assert points[("zoo-total", 2, 0.5)]["total_env_steps"] == 400  # equal total env steps
    # the primary comparison: pbt's 9.75, 14, 6 minus zoo-total's 8, 9, 10 = 1.75, 5, -4
    primary = next(c for c in record["comparisons"] if c["primary"])
    differences = [1.75, 5.0, -4.0]
    mean = sum(differences) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 2)
    assert primary["differences"] == differences and primary["mean"] == pytest.approx(mean)
    assert primary["high"] - primary["mean"] == pytest.approx(T_975_2 * sd / math.sqrt(3))
    assert (primary["wins"], primary["losses"], primary["p_sign_flip"]) == (2, 1, 0.75)
    assert "**Not separated**" in primary["verdict"]
    # at 50 %: pbt's 9, 8 (member 3, score 4), 7 (member 0: every score 3, the lower id) minus 3, 5, 1
    secondary = next(c for c in record["comparisons"] if not c["primary"])
    assert secondary["differences"] == [6.0, 3.0, 6.0] and secondary["wins"] == 3
    # 5 ± t(0.975, 2) · √3 / √3 lies above 0, but a secondary comparison is one of two: Bonferroni's 97.5 %
    # interval, 5 ± t(0.9875, 2) = 5 ± 6.205, includes 0 (the verdict said "pbt is better")
    assert secondary["low"] == pytest.approx(5 - T_975_2) and secondary["low"] > 0
    correction = secondary["correction"]
    assert (correction["comparisons"], correction["confidence"]) == (2, pytest.approx(0.975))
    assert correction["low"] == pytest.approx(5 - T_9875_2) and correction["high"] == pytest.approx(5 + T_9875_2)
    assert secondary["verdict"].endswith(
        "Corrected for the 2 comparisons declared (Bonferroni: a 97.5 % t-interval): [-1.2, 11.2]. **Not separated**: "
        "the corrected interval includes 0, so these seeds cannot tell which is better."
    )
    assert primary["correction"] is None and "Corrected" not in primary["verdict"]
    assert record["source"] is None  # a study from no file names none
    markdown = (out / "results.md").read_text()
    assert markdown.index("Declared comparisons") < markdown.index("| env | method | members |")
    assert "- Primary: **pbt − zoo-total** at 100 % of the budget, fresh returns paired over 3 seeds: +0.9" in markdown
    assert "- Secondary: **pbt − zoo-total** at 50 % of the budget" in markdown
    assert "[-1.2, 11.2]. **Not separated**" in markdown
    # the anytime table: every point by total env steps, the two methods side by side at 400 and 800
    anytime = [line for line in markdown.splitlines() if line.startswith("| CartPole-v1 | 400 |")]
    assert [line.split(" | ")[2] for line in anytime] == ["pbt", "zoo-total"]
    bias = next(line for line in markdown.splitlines() if line.startswith("| CartPole-v1 | pbt | 100 % | 3 |"))
    assert bias.split(" | ")[4:6] == [f"{(30 + 40 + 50) / 3:.1f}", f"{(9.75 + 14 + 6) / 3:.1f}"]
    # wall times from the records: 20 s per population run (2 ranks), 10 s per single agent
    assert "the 6 runs' `wall_s` add up to 90 s (0 h 01 min) (0.0 core-hours" in markdown
    assert (out / "anytime.png").stat().st_size > 10_000 and (out / "compare.png").stat().st_size > 10_000
    results = json.loads((out / "results.json").read_text())
    assert [r["method"] for r in results] == ["pbt", "zoo-total"] * 3 and "stages" not in results[0]
    assert results[0]["fresh_selected"] == 9.75 and results[0]["fresh_median"] == (9.75 + 18) / 2


def test_report_json_names_its_study_file_relative_to_where_the_study_ran(tmp_path, monkeypatch):
    """docs/results/horizon/report.json named /work/main/experiments/studies/horizon.yml: the machine's path."""
    from evo.study.reporting import report_json

    (tmp_path / "studies").mkdir()
    study = replace(tiny_study(tmp_path), source=tmp_path / "studies" / "tiny.yml")
    monkeypatch.chdir(tmp_path)
    assert report_json(study, [], {}, {})["source"] == "studies/tiny.yml"
    monkeypatch.chdir(tmp_path / "studies")
    assert report_json(replace(study, source=Path("tiny.yml")), [], {}, {})["source"] == "tiny.yml"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert report_json(study, [], {}, {})["source"] == "../studies/tiny.yml"
    committed = sorted((ROOT / "docs" / "results").glob("*/report.json"))
    assert committed and not [
        path for path in committed if Path(json.loads(path.read_text())["source"] or "").is_absolute()
    ]


def test_the_committed_horizon_reports_secondary_comparison_is_corrected_for_the_two():
    """report.json called pbt − random "pbt is better" (+704 [66, 1343] at 95 %) where docs/results.md says
    not separated once corrected for the study's two comparisons: Bonferroni's 97.5 % gives [−63, 1472]."""
    record = json.loads((ROOT / "docs" / "results" / "horizon" / "report.json").read_text())
    primary, secondary = record["comparisons"]
    assert (primary["b"], secondary["b"]) == ("zoo-total", "random") and primary["correction"] is None
    assert (round(secondary["mean"]), round(secondary["low"]), round(secondary["high"])) == (704, 66, 1343)
    correction = secondary["correction"]
    assert (correction["comparisons"], round(correction["low"]), round(correction["high"])) == (2, -63, 1472)
    assert secondary["verdict"].endswith(
        "**Not separated**: the corrected interval includes 0, so these seeds cannot tell which is better."
    )
    differences = paired(dict(enumerate(secondary["differences"])), dict.fromkeys(range(8), 0.0))
    assert report.verdict(Comparison("pbt", "random"), differences, 8, family=2) == secondary["verdict"]


def test_a_study_judges_each_comparison_only_where_both_its_methods_run_and_corrects_for_those_judgements():
    """The learning study's report judged ppo − ppo-zoo on Pendulum-v1 too, where neither runs ("no seed has both runs
    yet"), corrected its secondary comparisons for 26 judgements where it makes 13, and, declaring no primary, took
    its first secondary for one (uncorrected)."""
    from evo.study.reporting import report_json

    study = load_study(BUILT_IN / "learning.yml")
    assert study.primary is None and len(study.secondary) == 13
    assert [(str(comparison), env_id) for comparison, env_id in study.judged] == [
        (str(comparison), study.methods[comparison.a].envs[0]) for comparison in study.secondary
    ]
    assert {report.family_size(comparison, study.primary, study.judged) for comparison, _ in study.judged} == {13}
    record = report_json(study, [], {}, {})
    assert [(c["a"], c["env_id"], c["primary"]) for c in record["comparisons"]] == [
        (comparison.a, env_id, False) for comparison, env_id in study.judged
    ]
    text = report.verdicts([], study.judged, study.primary, 5, True)
    assert text.count("- Secondary: ") == 13 and "Primary" not in text


def test_the_fresh_table_has_floor_rows_paired_with_the_reference():
    floors = {0: report.floor_values([1.0, 3.0], {0: [0.0, 0.0], 1: [2.0, 2.0]}),
              1: report.floor_values([2.0, 2.0], {0: [1.0, 1.0], 1: [0.0, 4.0]})}  # fmt: skip
    assert (floors[0].random, floors[0].constant, floors[0].action) == (2.0, 2.0, 1)
    assert floors[1].action == 1 and floors[1].same_as_constant([1.0, 1.0]) == 0
    results = [replace(result("random", s, 0.0, "starpilot"), fresh_selected=v) for s, v in ((0, 4.0), (1, 3.0))]
    text = report.fresh_table(results, ["starpilot"], ["random"], "random", 2, (10, 5), False, {"starpilot": floors})
    assert "2 fresh sampled-action episodes of levels 10-14" in text and "as DrAC's test.py plays Procgen" in text
    argmax = report.fresh_table(results, ["starpilot"], ["random"], "random", 2, (10, 5), True)
    assert "2 fresh deterministic (argmax) episodes of levels 10-14" in argmax and "floor" not in argmax
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| starpilot")}
    # the random policy 2.0 and 2.0 against random search's 4 and 3: -2 and -1
    assert rows["floor: uniform-random policy"].startswith("| starpilot | floor: uniform-random policy | 2 | 2.0 [2.0")
    assert (
        "| -1.5 [" in rows["floor: uniform-random policy"] and "| 0 / 2 of 2 |" in rows["floor: uniform-random policy"]
    )
    assert "floor: best constant action (action 1, 1 by seed)" in rows


def test_an_agent_leaves_the_floor_by_three_standard_errors():
    floor = report.floor_values([1.0, 2.0, 3.0], {0: [0.0, 0.0, 0.0]})  # 2.0 +- 0.577
    point = Point(1.0, 4, 400, 0, math.nan, 4.0, 0.5, 4.0, 4.0)
    assert report.above_floor(point, floor) == pytest.approx(2.0 / math.sqrt(0.5**2 + 1 / 3))
    runs = [type("Run", (), {"measure": "return", "job": Job("starpilot", "one", 0, 1, (), Path()), "points": [
        point, replace(point, fraction=0.5, selected=3.0, total_env_steps=200),
        replace(point, fraction=0.25, selected=10.0, total_env_steps=100, selected_se=0.1)]})()]  # fmt: skip
    summary = report.floor_summary(runs, {"starpilot": {0: floor}}, ["starpilot"], ["one"])
    assert summary == (
        "- starpilot, one: left the floor by 3 standard errors at 25 % of its budget (100 env steps), in all 1 seed.\n"
    )


@pytest.mark.parametrize(
    ("name", "records", "layout"),
    [
        ("continuous", "continuous", "{env}/{method}-seed{seed}"),
        ("sac", "sac", "{env}/{method}-seed{seed}"),
        ("ties", "ties", "{env}/{method}-seed{seed}"),
        ("classic", "classic", "{env}/{method}-seed{seed}"),
        ("procgen", "procgen", "starpilot-seed{seed}/{method}"),
        ("bgpbt", "bgpbt", "{env}/{method}-seed{seed}"),
        ("bgpbt", "bgpbt-rerun", "{env}/{method}-seed{seed}"),
        ("horizon", "horizon", "{env}/{method}-seed{seed}"),
        ("procgen-pilot", "procgen-pilot", "{env}/{method}-seed{seed}"),
        ("procgen-pilot-100", "procgen-pilot-100", "{env}/{method}-seed{seed}"),
        ("procgen-learning", "procgen-learning", "{env}/{method}-seed{seed}"),
        ("learning", "learning", "{env}/{method}-seed{seed}"),
        ("atari", "atari", "{env}/{method}-seed{seed}"),
        ("evo-seed", "evo-seed", "{env}/{method}-seed{seed}"),
        ("untuned", "untuned", "{env}/{method}-seed{seed}"),
    ],
)
def test_the_committed_reports_are_rebuilt_byte_for_byte_from_the_committed_records(name, records, layout, tmp_path):
    """results.json of the first, continuous, SAC, tie-rule, Procgen, BG-PBT, horizon, Procgen pilot, Procgen
    learning, Atari, EVO seed and untuned studies (docs/results/) and of BG-PBT's second set of runs, from the
    committed run records and re-evaluation caches (their stages' included), and the floors where the records have
    them (read back, not played), as `evo-study STUDY --report-only --runs` builds it."""
    import shutil

    if name == "atari":
        need_atari()  # the report asks gymnasium for ALE/Breakout-v5's threshold: ale-py registers the ALE ids
    study = load_study(BUILT_IN / f"{name}.yml")
    docs = ROOT / "docs" / "results"
    if (docs / records / "floors").is_dir():
        shutil.copytree(docs / records / "floors", tmp_path / "out" / "floors")
    else:
        study = replace(study, fresh=study.fresh and replace(study.fresh, floors=False))  # no env played
    study = replace(study, out=tmp_path / "out")
    runs = tmp_path / "runs"
    for job in jobs_for(study, runs):
        folder = records
        if name == "bgpbt" and not job.method.startswith("bgpbt"):  # its pbt and pb2: the continuous study's
            folder = "continuous"
        source = docs / folder / layout.format(env=job.run_dir.parent.name, method=job.method, seed=job.seed)
        job.run_dir.parent.mkdir(parents=True, exist_ok=True)
        job.run_dir.symlink_to(source)
    # results.json as write_report builds it (its markdown, report.json and figures: the tests above)
    thresholds = {env: reward_threshold(env, study.thresholds) for env in study.envs}
    collected = [collect(study, job, thresholds[job.env_id]) for job in jobs_for(study, runs) if has_result(job)]
    assert results_json(collected) == (docs / records / "results.json").read_bytes()


def test_the_procgen_tables_floor_rows_come_from_the_committed_floors(tmp_path):
    """The first Procgen study's fresh table with its floors (docs/results/procgen/floors/, read back, not
    played): the uniform-random policy and the best constant action on the same test levels, and seed 1's
    selected members of pbt, pb2-mix and random search returning what action 9 returns, episode for episode."""
    import shutil

    study = replace(load_study(BUILT_IN / "procgen.yml"), out=tmp_path / "out")
    docs = ROOT / "docs" / "results" / "procgen"
    shutil.copytree(docs / "floors", tmp_path / "out" / "floors")
    for job in jobs_for(study, tmp_path / "runs"):
        job.run_dir.parent.mkdir(parents=True, exist_ok=True)
        job.run_dir.symlink_to(docs / f"starpilot-seed{job.seed}" / job.method)
    write_report(study, jobs_for(study, tmp_path / "runs"))
    text = (tmp_path / "out" / "results.md").read_text()
    assert "Re-evaluated on 20 fresh deterministic (argmax) episodes of levels 10000-10999" in text
    assert "The selection episodes played the policy's most likely action (argmax, or the mean;" in text
    assert "| starpilot | floor: uniform-random policy | 3 | 1.4 [0.1, 2.7] | — | — | -0.2 [-1.3, 1.0] |" in text
    assert "| starpilot | floor: best constant action (action 9, 9, 9 by seed) | 3 | 1.5 [0.6, 2.5] |" in text
    constant = [
        line.split(" | ")[1:3] for line in text.splitlines() if line.endswith("action 9, episode for episode |")
    ]
    assert constant == [["paper-default", "0"], ["pb2-mix", "1"], ["pbt", "1"], ["random", "1"]]


def test_the_anytime_table_has_one_row_per_method_and_fraction_when_the_seeds_totals_differ():
    """SAC's members overshoot a generation's env steps by a few, so each seed's run ends at its own
    total: the seeds' points at one fraction are one row (the range of their totals), not one row each."""
    point = Point(1.0, 10, 80_002, 0, -100.0, -110.0, 1.0, -120.0, -120.0, members={0: -110.0, 1: -130.0})
    runs = [
        type("Run", (), {"measure": "return", "job": Job("Pendulum-v1", "pbt", seed, 2, (), Path()), "points": [
            replace(point, total_env_steps=total, selected=value),
            replace(point, fraction=0.5, generation=5, total_env_steps=total // 2, selected=value - 50)]})()
        for seed, (total, value) in enumerate(((80_002, -110.0), (80_041, -120.0), (80_010, -130.0)))
    ]  # fmt: skip
    rows = [line for line in report.anytime_table(runs, ["Pendulum-v1"], ["pbt"]).splitlines() if "| pbt |" in line]
    low, high = report.t_interval([-110.0, -120.0, -130.0])[1:]
    assert rows == [
        f"| Pendulum-v1 | 40,001–40,020 | pbt | 50 % | 3 | -170.0 [{low - 50:.1f}, {high - 50:.1f}] | "
        "-120.0 [-120.0, -120.0] | -120.0 [-120.0, -120.0] |",
        f"| Pendulum-v1 | 80,002–80,041 | pbt | 100 % | 3 | -120.0 [{low:.1f}, {high:.1f}] | "
        "-120.0 [-120.0, -120.0] | -120.0 [-120.0, -120.0] |",
    ]


def test_the_report_names_how_each_methods_selection_episodes_chose_actions():
    """From the runs' commands: one line when every run played alike, a line per way otherwise; nothing for
    runs without selection episodes (the rl_zoo3 cross-check)."""
    from evo.study.jobs import Job
    from evo.study.records import Run
    from evo.study.reporting import selection_actions

    def run(method, flags, mpi=True, episodes=10):
        job = Job("starpilot", method, 0, 2, ("pbt_rl_truct.py", *flags), Path("x"), mpi=mpi, eval_episodes=episodes)
        return Run(job, None, [], None)

    sampled = ["--eval-actions", "sampled"]
    assert selection_actions([run("pbt", sampled), run("random", sampled)]) == (
        "The selection episodes played actions sampled from the policy (`--eval-actions sampled`).\n"
    )
    mixed = selection_actions([run("pbt", sampled), run("random", []), run("zoo", [], mpi=False)])
    assert mixed.splitlines() == [
        "The selection episodes of pbt played actions sampled from the policy (`--eval-actions sampled`).",
        "The selection episodes of random played the policy's most likely action (argmax, or the mean; "
        "`--eval-actions deterministic`).",
    ]
    assert selection_actions([run("one", [], episodes=0)]) == ""


def test_a_selected_member_resting_on_a_tie_is_said_in_the_verdict_and_the_per_seed_table():
    """The Procgen learning study's "pb2-mix higher in 2 of 3" rests on seed 1, where pb2-mix's selected
    member 2 tied member 3 on selection score at the last generation (the committed records): the study
    takes the lower id, and now says so where the tie decides a seed."""
    from evo.rundir.history import load_run
    from evo.study.records import selected_member, selection_tie

    history = load_run(ROOT / "docs" / "results" / "procgen-learning" / "starpilot" / "pb2-mix-seed1")
    last = history.generations[-1]
    assert (selected_member(history, last), selection_tie(history, last, 2)) == (2, (3,))

    def run(method, seed, mean, tied=()):
        point = Point(1.0, 4, 400, 2, 3.0, mean, 0.5, 2.0, 2.0, returns=(mean,), tied=tied)
        job = Job("starpilot", method, seed, 2, (), Path())
        return type("Run", (), {"measure": "return", "job": job, "points": [point]})()

    runs = [run("pb2-mix", 0, 3.0), run("random", 0, 2.0), run("pb2-mix", 1, 3.1, (3,)), run("random", 1, 3.2)]
    comparison = Comparison("pb2-mix", "random", 1.0)
    text = report.verdicts(runs, [(comparison, "starpilot")], comparison, planned=2, fresh=True)
    assert text.endswith(
        "A selected member rests on a tie of selection scores (seed 1: pb2-mix's member 2 tied member 3): the "
        "study took the lower id, so the difference in those seeds rests on that tie, not on the scores.\n"
    )
    rows = report.per_seed_table(runs, [(comparison, "starpilot")], fresh=True).splitlines()[2:]
    assert rows[0] == "| starpilot | pb2-mix − random at 100 % | fresh return | 0 | 3.0 | 2.0 | +1.0 |"
    assert rows[1] == (
        "| starpilot | pb2-mix − random at 100 % | fresh return | 1 | 3.1 | 3.2 | -0.1 (a tie of selection "
        "scores: pb2-mix's member 2 tied member 3; the lower id taken) |"
    )
    assert "tie" not in report.verdicts(runs[:2], [(comparison, "starpilot")], comparison, planned=2, fresh=True)


def test_a_methods_kept_best_is_compared_with_its_selected_member_seed_by_seed():
    """``pbt:kept - pbt at 1.0`` (issue 55 item 6: the final pick of ``--final-eval`` against the selection pick,
    on the same runs): the kept best's fresh mean (results.json's fresh_best_ever) minus the selected member's,
    paired by seed; a seed whose kept best was not re-evaluated is left out. Refused where the kept best is not
    re-evaluated: at another fraction, of an rl_zoo3 agent, without fresh episodes."""

    def run(method, seed, selected, kept):
        point = Point(1.0, 4, 400, 0, 3.0, selected, 0.5, 2.0, 2.0, returns=(selected,))
        job = Job("Pendulum-v1", method, seed, 2, (), Path())
        result = Result("Pendulum-v1", method, seed, 4, 0.0, 0.0, None, 1.0, [], fresh_best_ever=kept)
        return type("Run", (), {"measure": "return", "job": job, "points": [point], "result": result})()

    runs = [run("pbt", 0, -200.0, -150.0), run("pbt", 1, -300.0, -310.0), run("pbt", 2, -250.0, math.nan)]
    comparison = Comparison("pbt:kept", "pbt", 1.0)
    a, b = report.both_by_seed(runs, "Pendulum-v1", comparison, fresh=True)
    assert a == {0: -150.0, 1: -310.0} and b == {0: -200.0, 1: -300.0, 2: -250.0}
    pair = report.compared(runs, "Pendulum-v1", comparison, fresh=True)
    assert pair.differences == (50.0, -10.0) and pair.seeds == (0, 1)
    assert report.measure_of(runs, "Pendulum-v1", comparison) == "return"
    assert "**pbt:kept − pbt** at 100 % of the budget, fresh returns paired over 2 seeds: +20.0" in report.verdict(
        comparison, pair, 2
    )
    study = {
        "envs": ["Pendulum-v1"], "seeds": [0], "budget": {"default": {"generations": 4, "steps": 64}},
        "methods": {"pbt": {}, "rl-zoo3": {}}, "fresh": {"episodes": 4, "at": [0.5, 1.0]},
        "compare": {"primary": "pbt:kept - pbt at 1.0"},
    }  # fmt: skip
    assert parse_study(study, "s").primary == comparison
    for bad, where in [("pbt:kept - pbt at 0.5", "at 1.0"), ("rl-zoo3:kept - pbt at 1.0", "rl-zoo3 agent")]:
        with pytest.raises(StudyError) as refused:
            parse_study(study | {"compare": {"primary": bad}}, "s")
        assert where in refused.value.problems[0] and "kept best" in refused.value.problems[0]
    with pytest.raises(StudyError):
        parse_study({k: v for k, v in study.items() if k != "fresh"}, "s")


def test_a_runs_kept_best_is_its_final_pick_where_it_made_one(tmp_path):
    """With ``--final-eval`` a study's ``METHOD:kept`` is the run's final pick (final.json: the member
    ``evo-export --member best`` exports), on the fresh episodes every member played; without final.json, the
    weights behind the run's highest selection score. The untuned study's pbt seed 4 (committed records): final pick
    member 0, selection pick member 3, highest selection score member 1's at generation 30 (the study's report
    measured that one as the final pick before this was mended)."""
    import shutil

    study = load_study(BUILT_IN / "untuned.yml")
    (job,) = [j for j in jobs_for(study, tmp_path / "runs") if (j.method, j.seed) == ("pbt", 4)]
    source = ROOT / "docs" / "results" / "untuned" / job.run_dir.parent.name / "pbt-seed4"
    shutil.copytree(source, job.run_dir)
    final = json.loads((job.run_dir / "final.json").read_text())
    fresh = json.loads((job.run_dir / "reevaluation.json").read_text())
    assert (final["pick"]["member"], final["selection_pick"], fresh["best_ever"]["member"]) == (0, 3, 1)
    picked = collect(study, job, 1000.0).result
    assert (picked.fresh_best_ever_member, picked.fresh_selected_member) == (0, 3)
    assert picked.fresh_best_ever == pytest.approx(sum(fresh["members"]["0"]) / 20, rel=1e-12)
    (job.run_dir / "final.json").unlink()
    kept = collect(study, job, 1000.0).result
    assert kept.fresh_best_ever_member == 1
    assert kept.fresh_best_ever == pytest.approx(sum(fresh["best_ever"]["returns"]) / 20, rel=1e-12)

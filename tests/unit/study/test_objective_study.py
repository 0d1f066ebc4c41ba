"""A study whose runs select on an objective of their own (``--objective info:merit`` in a method's flags),
made in process: real tiny runs on tests/objective_env.py (every step pays ``weight``, reports ``merit`` = 1 −
``weight``: the return and the objective disagree), re-evaluated on fresh episodes, and the report written
from them. The verdict, the paired differences and the selection bias use the runs' objective, like minus
like; a comparison of a run of the objective with a run of the return says nothing. (The study's
orchestration against a stub run command: tests/unit/study/test_running.py; a study of returns under
mpiexec: tests/e2e/test_study.py.)"""

import json
import statistics

import pytest

from evo.study.jobs import WALL, jobs_for
from evo.study.reporting import write_report
from evo.study.spec import parse_study
from tests.support import run_in_process

MERIT = ["--objective", "info:merit"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """merit (PBT on the objective) against merit-random (random search on it) and return (PBT on the return),
    2 seeds of 2 generations of 64 env steps, 3 members, re-evaluated on 3 fresh episodes; the runs made here as
    the study's jobs say, then the report."""
    root = tmp_path_factory.mktemp("objective-study")
    spec = parse_study(
        {
            "envs": ["tests.objective_env:Objectives-v0"],
            "seeds": [0, 1],
            "members": 3,
            "ranks": 1,
            "budget": {"default": {"generations": 2, "steps": 64, "eval_episodes": 2}},
            "hyperparams": {"default": {"n_envs": 2, "n_steps": 32, "n_minibatches": 2, "n_epochs": 1}},
            "space": {"default": {"env.weight": {"low": 0.05, "high": 0.95}}},
            "flags": ["--tb-writer", "False", "--progress-interval", "0"],
            "methods": {
                "merit": {"kind": "population", "flags": MERIT},
                "merit-random": {"kind": "random", "flags": MERIT},
                "return": {"kind": "population"},
            },
            "fresh": {"episodes": 3},
            "compare": {"primary": "merit - merit-random at 1.0", "secondary": ["merit - return at 1.0"]},
        },
        "objective",
        out=root / "out",
    )
    jobs = jobs_for(spec, root / "runs")
    for job in jobs:
        assert run_in_process(list(job.command[1:])) == 0
        (job.run_dir / WALL).write_text("1.0\n")
    runs = write_report(spec, jobs)
    return root / "out", {(run.job.method, run.job.seed): run for run in runs}


def fresh_merit(run_dir, member):
    """The member's fresh merit: the mean of merit at the ends of its fresh episodes (reevaluation.json)."""
    saved = json.loads((run_dir / "reevaluation.json").read_text())
    return statistics.mean(saved["objectives"][str(member)]["merit"])


def test_the_verdict_pairs_the_objectives_fresh_values_not_the_returns(study):
    out, runs = study
    report = json.loads((out / "report.json").read_text())
    primary, against_return = report["comparisons"]
    assert primary["measure"] == "fresh info:merit"
    differences = []
    for seed in (0, 1):
        a, b = runs[("merit", seed)], runs[("merit-random", seed)]
        assert a.measure == b.measure == "info:merit" and runs[("return", seed)].measure == "return"
        mine = fresh_merit(a.job.run_dir, a.result.fresh_selected_member)
        theirs = fresh_merit(b.job.run_dir, b.result.fresh_selected_member)
        assert a.result.fresh_selected == pytest.approx(mine) and b.result.fresh_selected == pytest.approx(theirs)
        differences.append(mine - theirs)
    assert primary["differences"] == pytest.approx(differences)
    assert "fresh values of the runs' objective, info:merit (larger better)" in primary["verdict"]
    # a run of the objective against a run of the return: not like with like, nothing said
    assert against_return["measure"] is None and "measure different things" in against_return["verdict"]
    markdown = (out / "results.md").read_text()
    assert "measure different things" in markdown
    # the per-seed table says what each comparison's numbers are
    rows = [line for line in markdown.splitlines() if " − merit-random at 100 % |" in line or " − return at" in line]
    assert [row.split(" | ")[2] for row in rows if row.startswith("| tests.")] == ["fresh info:merit"] * 2 + [
        "different things (not comparable)"
    ] * 2


def test_the_selection_bias_is_the_objectives_selection_score_minus_its_fresh_value(study):
    """The env's merit follows from the member's env parameters alone, so a member's fresh merit is its
    selection merit: the bias is 0, like minus like (on returns it would be merit − 4 × weight, far from 0)."""
    _, runs = study
    for seed in (0, 1):
        point = runs[("merit", seed)].points[-1]
        assert point.selection_bias == pytest.approx(0.0, abs=1e-6)
        assert point.selected == pytest.approx(point.selection_score, abs=1e-6)
        assert point.returns and all(0 < value < 1 for value in point.returns)  # merits, not returns of 4 steps

"""experiments/learning_table.py (issue 57 item 1): the learning table of docs/results.md rebuilt from the learning
study's committed records (docs/results/learning/), and every evo agent of it played by the one evaluation
script the rl_zoo3 agents were played by (scripts/zoo_play.py, stock SB3): the same returns, episode for
episode, as evo-evaluate's re-evaluation that the study's report reads."""

import json

import pytest

from experiments.learning_table import (
    LEARNERS,
    PLAYED,
    RECORDS,
    SETTINGS,
    comparable,
    family,
    results,
    table,
    verdict,
)
from tests.support import ROOT


def test_the_docs_hold_the_table_the_records_give():
    assert table() in (ROOT / "docs" / "results.md").read_text()


def test_every_evo_agent_played_by_stock_sb3_returns_what_evo_evaluate_measured():
    """played.json (``--replay``: each agent exported by evo-export, played by scripts/zoo_play.py on its
    re-evaluation's seed and envs) against reevaluation.json's member 0, for every evo agent of the records."""
    played = json.loads(PLAYED.read_text())
    found = results()
    checked = 0
    for _, method, env_id in LEARNERS:
        for seed in sorted(seed for (m, seed) in found if m == method):
            cache = json.loads((RECORDS / env_id / f"{method}-seed{seed}" / "reevaluation.json").read_text())
            assert played[method][str(seed)] == pytest.approx(cache["members"]["0"], abs=1e-4), (method, seed)
            assert found[(method, seed)]["fresh_selected"] == pytest.approx(sum(cache["members"]["0"]) / 20)
            checked += 1
    assert checked == len([key for key in found if key[0] in {m for _, m, _ in LEARNERS}]) > 0


def test_every_evo_agent_was_built_with_the_settings_rl_zoo3s_train_built_its_own_with():
    """settings.json (``--settings``): what SB3 saved with seed 0's evo agent (exported) and with rl_zoo3's (its zip),
    every setting of the model, equal once each way of saying one thing is said one way (``comparable``: a constant
    learning rate as a float or a ConstantSchedule, policy_kwargs that name a default, gradient_steps -1 at one
    step per update)."""
    found = json.loads(SETTINGS.read_text())
    assert sorted(found) == sorted(method for _, method, _ in LEARNERS)
    for method, sides in found.items():
        assert {"learning_rate", "gamma", "policy_class", "policy_kwargs", "action_space"} <= set(sides["evo"])
        ours, theirs = comparable(sides["evo"]), comparable(sides["rl_zoo3"])
        differing = {k: (ours.get(k), theirs.get(k)) for k in {*ours, *theirs} if ours.get(k) != theirs.get(k)}
        assert not differing, (method, differing)
    assert comparable({**found["crossq"]["evo"], "policy_delay": 3}) != comparable(found["crossq"]["rl_zoo3"])


def test_the_verdict_reads_the_paired_differences_as_the_studys_report_judges_them():
    """On the Bonferroni interval for the learning study's judgements (13: one per comparison, on the env its methods
    run on), as the study's report judges a secondary comparison; a side ahead at 95 % only is said so."""
    from evo.study.stats import paired

    assert family() == 13

    def said(differences):
        pair = paired(dict(enumerate(differences)), dict.fromkeys(range(len(differences)), 0.0))
        return verdict(pair, "evo", "zoo", 13)

    assert said([0.0, 0.0, 0.0]) == "equal on every seed"  # CartPole's 500s on both sides
    assert said([-5.0, 3.0, -9.0]) == "within noise"
    assert said([-2.1, -2.5, -1.3, -1.1]) == "within noise (zoo ahead at 95 %, not once corrected for 13)"
    assert said([-8.0, -9.0, -7.5, -8.5]) == "**zoo ahead**"
    assert said([8.0, 9.0, 7.5, 8.5]) == "evo ahead"
    assert said([8.0]) == "1 seed: not judged" and said([]) == "not run"

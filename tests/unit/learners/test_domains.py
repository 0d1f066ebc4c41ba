"""Every learner setting declares its valid values beside it (its domain: evo/learners/spec.py), the rule
every declaration obeys; the built-in YAML files' values and search ranges lie inside them; the domains'
own forms say what they hold. Pure: no torch."""

import math
import re

import pytest

from evo.config.hyperparams import _check_block, builtin_hyperparams, load_yaml
from evo.core.kinds import kind_from_entry
from evo.learners import LearnerSpec, algos, learner_spec, specs
from evo.learners.spec import (
    COUNT,
    DISCOUNT,
    POSITIVE,
    Interval,
    Named,
    Setting,
    Values,
    at_least,
    setting,
)
from tests.support import ROOT


def undeclared(spec: LearnerSpec) -> list[str]:
    """The settings of ``spec`` without a domain: every one but a switch (a bool) needs one."""
    return [s.name for s in spec.settings if s.type is not bool and s.domain is None]


def test_every_setting_but_a_switch_declares_its_valid_values():
    for algo, spec in specs().items():
        assert not undeclared(spec), f"{algo}: no domain declared for {undeclared(spec)}"
        numeric = [s.name for s in spec.settings if s.numeric]
        assert numeric and all(spec.by_name[name].domain is not None for name in numeric), algo


def test_the_walk_would_see_a_setting_without_a_domain():
    spec = LearnerSpec(
        name="test-only",
        title="Test",
        settings=(
            setting("rate", float, 0.1, "a rate", domain=POSITIVE),
            setting("count", int, 3, "a count"),
            setting("switch", bool, False, "a switch"),
        ),
        action_spaces=("Box",),
    )
    assert undeclared(spec) == ["count"]


def test_every_declared_default_is_valid_or_none():
    """None is "off" (may_be_off) or "not given" (resolved at start-up: n_minibatches, the architecture)."""
    for algo, spec in specs().items():
        for declared in spec.settings:
            assert declared.value_problem(declared.default) is None, (algo, declared.name)


def blocks(algo: str) -> dict:
    return load_yaml(builtin_hyperparams(algo).read_text())  # a key given twice raises


@pytest.mark.parametrize("algo", algos())
def test_every_value_and_search_range_of_the_builtin_yaml_is_inside_its_domain(algo):
    """Every block, as written (a value an env block replaces is checked too)."""
    spec = learner_spec(algo)
    found: list[str] = []
    for name, block in blocks(algo).items():
        where = f"{algo}.yml[{name}]"
        checked = _check_block(block, where, found, spec)
        for key, value in checked.items():
            if key in spec.by_name and (problem := spec.by_name[key].value_problem(value, where)):
                found.append(problem)
        for key, entry in (checked.get("search_space") or {}).items():
            if key.startswith("env."):  # an env parameter: the env's attribute, checked against the env at start-up
                continue
            declared = spec.by_name[key]
            if entry is not None and (problem := declared.range_problem(kind_from_entry(entry, declared.whole), where)):
                found.append(problem)
    assert not found, "\n".join(found)


def test_the_yaml_check_would_see_a_value_outside_its_domain():
    spec = learner_spec("ppo")
    found: list[str] = []
    checked = _check_block({"gamma": 1.5, "search_space": {"n_epochs": {"choices": [0, 5]}}}, "x", found, spec)
    assert not found
    assert spec.by_name["gamma"].value_problem(checked["gamma"], "x").startswith("gamma (x) is 1.5")
    kind = kind_from_entry(checked["search_space"]["n_epochs"], whole=True)
    assert spec.by_name["n_epochs"].range_problem(kind, "x").endswith("drop 0")


# --- the domains' forms ----------------------------------------------------------------------------------------


def test_an_interval_holds_finite_numbers_within_its_ends():
    assert DISCOUNT.text == "in (0, 1]" and POSITIVE.text == "> 0" and COUNT.text == ">= 1"
    assert Interval(0, 1).text == "in [0, 1]" and Interval().text == "a finite number"
    assert Interval(high=0, high_open=True).text == "< 0" and Interval(0.5, 2.5).text == "in [0.5, 2.5]"
    assert DISCOUNT.contains(1.0) and not DISCOUNT.contains(0.0) and DISCOUNT.contains(1e-9)
    for bad in (math.nan, math.inf, -math.inf, True, "0.5", None):
        assert not Interval().contains(bad), bad
    assert POSITIVE.holds(1e-6, 10) and not POSITIVE.holds(0, 10) and not DISCOUNT.holds(0.5, 1.5)


def test_a_set_holds_its_values_and_an_either_any_part():
    noises = Values(("normal", "ornstein-uhlenbeck"))
    assert noises.text == "one of 'normal', 'ornstein-uhlenbeck'" and noises.names == ("normal", "ornstein-uhlenbeck")
    assert noises.contains("normal") and not noises.contains("pink") and not noises.holds(0, 1)
    steps = COUNT | Values((-1,))
    assert steps.text == ">= 1 or -1" and steps.contains(-1) and steps.contains(7)
    assert not steps.contains(0) and not steps.contains(-1.5) and not steps.contains(True)
    assert steps.holds(1, 8) and not steps.holds(-1, 8)  # a range within one part only
    auto = POSITIVE | Values(("auto",)) | Named("auto_", POSITIVE)
    assert auto.text == "> 0, 'auto' or 'auto_<x>' with x > 0"
    assert all(auto.contains(v) for v in (0.1, "auto", "auto_0.1")) and auto.names == ("auto",)
    assert not any(auto.contains(v) for v in (0.0, "auto_0", "auto_x", "automatic", math.nan))


def test_a_message_names_the_value_its_source_its_range_and_the_fix():
    gamma = Setting("gamma", float, 0.99, "discount factor", domain=DISCOUNT)
    assert gamma.value_problem(0.99) is None and gamma.value_problem(None) is None
    assert gamma.value_problem(1.5, "--hyperparams") == (
        "gamma (--hyperparams) is 1.5; it must be in (0, 1] (discount factor): change it, e.g. to its default 0.99"
    )
    assert gamma.value_problem(math.nan).startswith("gamma is nan (not a number); it must be in (0, 1]")
    lr = Setting("lr", float, None, "a limit", may_be_off=True, domain=at_least(1))
    assert lr.value_problem(-math.inf).endswith(
        "is -inf (not finite); it must be >= 1 (a limit): change it (or null: off)"
    )


# --- docs/hyperparameters.md ------------------------------------------------------------------------------------


def valid_cell(declared: Setting) -> str | None:
    """What a learner's table in docs/hyperparameters.md says in its ``valid`` column (None: a switch,
    said in words)."""
    if declared.domain is None:
        return None
    return f"`{declared.domain.text}`" + (", or `null`" if declared.may_be_off else "")


def table_problems(text: str, spec: LearnerSpec) -> list[str]:
    """Where the learner's table (under ``## <title>``) and its declarations differ: a setting missing, or
    a ``valid`` cell that is not its domain's text."""
    section = text.split(f"\n## {spec.title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    column = header.index("valid")
    problems, seen = [], set()
    for row in rows[1:]:  # after the header (the separator is no "| " line)
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        for name in re.findall(r"`([a-z0-9_]+)`", cells[0]):
            seen.add(name)
            expected = valid_cell(spec.by_name[name]) if name in spec.by_name else "(not a setting)"
            if expected is not None and cells[column] != expected:
                problems.append(f"{spec.title} {name}: valid is {cells[column]}, its domain says {expected}")
    problems += [f"{spec.title} {name}: not in the table" for name in spec.by_name if name not in seen]
    return problems


def test_each_learners_table_gives_every_setting_and_its_valid_values():
    text = (ROOT / "docs" / "hyperparameters.md").read_text()
    problems = [problem for spec in specs().values() for problem in table_problems(text, spec)]
    assert not problems, "docs/hyperparameters.md and the declarations differ:\n  " + "\n  ".join(problems)


def test_the_table_check_would_see_a_wrong_range_or_a_missing_setting():
    text = (ROOT / "docs" / "hyperparameters.md").read_text()
    ppo = learner_spec("ppo")
    wrong = text.replace("| `gamma` | 0.99 | `in (0, 1]` |", "| `gamma` | 0.99 | `in [0, 1]` |", 1)
    assert table_problems(wrong, ppo) == ["PPO gamma: valid is `in [0, 1]`, its domain says `in (0, 1]`"]
    missing = "\n".join(line for line in text.splitlines() if not line.startswith("| `microbatch_size`"))
    assert table_problems(missing, ppo) == ["PPO microbatch_size: not in the table"]

"""evo/study/spec.py: the study file parsed and checked; every problem at once, each with its fix."""

import pytest

from evo.core.explorers import EXPLORERS
from evo.study.main import BUILT_IN
from evo.study.spec import (
    EXPLORE_NAMES,
    PRESETS,
    Budget,
    StudyError,
    flag_value,
    load_study,
    parse_study,
    with_overrides,
)

SMALL = {
    "envs": ["CartPole-v1"],
    "seeds": [0, 1],
    "budget": {"default": {"generations": 4, "steps": 512}},
    "methods": {"pbt": {}, "random": {}},
}


def problems_of(data) -> list[str]:
    with pytest.raises(StudyError) as refused:
        parse_study(data)
    return refused.value.problems


def test_every_built_in_study_file_parses():
    names = sorted(path.stem for path in BUILT_IN.glob("*.yml"))
    assert names == ["atari", "bgpbt", "classic", "continuous", "evo-seed", "horizon", "learning", "procgen",
                     "procgen-learning", "procgen-pilot", "procgen-pilot-100", "sac", "ties", "untuned"]  # fmt: skip
    for name in names:
        assert load_study(BUILT_IN / f"{name}.yml").name == name


def test_the_explorer_names_are_evos():
    assert EXPLORE_NAMES == tuple(EXPLORERS)
    assert {p["explore"] for p in PRESETS.values() if "explore" in p} <= set(EXPLORERS)


def test_a_small_study_takes_the_defaults(tmp_path):
    study = parse_study(SMALL, "small")
    assert (study.name, study.members, study.ranks, study.reference) == ("small", 4, 2, "pbt")
    assert study.budgets == {"CartPole-v1": Budget(4, 512, 5)} and study.fresh is None
    assert [m.kind for m in study.methods.values()] == ["population", "random"]
    assert study.runs.as_posix() == "runs/small/runs" and study.comparisons == ()


def test_every_problem_is_reported_at_once_with_its_fix():
    found = problems_of(
        {
            "envs": ["CartPole-v1"],
            "seed": [0],  # a typo of seeds
            "members": 3,
            "budget": {"CartPol-v1": {"generations": 4, "steps": 512}},
            "methods": {
                "pbt": {"explore": "pb3"},
                "mine": {"flags": "--ties copy"},
                "zoo": {"kind": "singel"},
                "pb2": {"flags": ["--hyperparams", "learning_rate:0.1"]},
            },
            "fresh": {"at": [0.3, 1.0], "actions": "argmax"},
            "compare": {"primary": "pbt - rnadom at 1.0", "secondary": ["pbt minus zoo"]},
        }
    )
    expected = [
        "seed: not a study key", "did you mean seeds?",
        "members: 3 is not a multiple of ranks (2)",
        "budget.CartPol-v1: not one of the study's envs", "did you mean CartPole-v1?",
        "budget: give CartPole-v1's (or a default block)",
        "methods.pbt.explore: 'pb3' is not one of", "did you mean pb2?",
        "methods.mine: give its kind",
        "methods.mine.flags: '--ties copy' is not a list",
        "methods.zoo.kind: 'singel' is not one of", "did you mean single?",
        "fresh.actions: 'argmax' is not one of auto, sampled, deterministic",
        "compare.primary: rnadom is not a method of the study",
        "compare.secondary: 'pbt minus zoo' is not 'a - b at F'",
        "methods.pb2.flags: --hyperparams; give evo settings as hyperparams:",
    ]  # fmt: skip
    text = "\n".join(found)
    for part in expected:
        assert part in text, part


def test_fractions_must_be_whole_generations_that_the_runs_keep():
    data = SMALL | {"fresh": {"at": [0.3, 1.0]}}
    assert any("30 % of pbt's 4 generations on CartPole-v1 is not a whole generation" in p for p in problems_of(data))
    data = SMALL | {"fresh": {"at": [0.25, 0.5, 1.0]}, "flags": ["--keep-checkpoints", "2"]}
    pbt, random = problems_of(data)  # each method's runs
    assert "generation 1 of pbt's 4 on CartPole-v1 (fresh.at 0.25) would not be kept" in pbt
    assert "give at least 4" in pbt
    assert "random's 4" in random
    assert problems_of(SMALL | {"fresh": {"at": [0.5]}}) == [
        "fresh.at: [0.5] must lie in (0, 1] and include 1.0 (the end of the budget)"
    ]
    study = parse_study(SMALL | {"fresh": {"at": [0.5, 0.25, 1]}})
    assert study.fresh.at == (0.25, 0.5, 1.0) and study.fresh.episodes == 20


def test_a_comparison_is_declared_in_words_or_as_a_mapping():
    data = SMALL | {"fresh": {"at": [0.5, 1.0]}}
    study = parse_study(
        data | {"compare": {"primary": "random - pbt at 0.5", "secondary": [{"a": "pbt", "b": "random"}]}}
    )
    assert (study.primary.a, study.primary.b, study.primary.at) == ("random", "pbt", 0.5)
    assert str(study.secondary[0]) == "pbt − random at 100 %"
    assert (
        "is not among the fractions re-evaluated"
        in problems_of(data | {"compare": {"primary": "pbt - random at 0.75"}})[0]
    )


def test_the_command_lines_changes_are_checked_with_the_study():
    study = parse_study(SMALL | {"compare": {"primary": "pbt - random"}})
    smaller = with_overrides(study, methods=["pbt"], seeds=[5], generations=2, members=6, ranks=3)
    assert list(smaller.methods) == ["pbt"] and smaller.seeds == (5,) and smaller.primary is None
    assert smaller.budgets["CartPole-v1"] == Budget(2, 512, 5) and (smaller.members, smaller.ranks) == (6, 3)
    with pytest.raises(StudyError) as refused:
        with_overrides(study, envs=["Acrobot-v1"], methods=["rando"], members=5, steps=0)
    assert refused.value.problems == [
        "--envs Acrobot-v1: not in the study (CartPole-v1)",
        "--methods rando: not in the study (pbt, random); did you mean random?",
        "--steps 0: must be at least 1",
        "members 5: use a multiple of ranks (2), at least 2",
    ]


def test_a_flags_value_is_its_last_one_as_argparse_reads_it():
    """One reader of a flag's value in a run's command (the keep-checkpoints check, the cross-check's
    envs, the report's selection actions): argparse keeps a repeated flag's last value."""
    command = ("pbt_rl_truct.py", "--eval-actions", "sampled", "--envs", "8", "--eval-actions", "deterministic")
    assert flag_value(command, "--eval-actions") == "deterministic"
    assert flag_value(command, "--envs") == "8"
    assert flag_value(command, "--seed") is None
    assert flag_value(("--envs",), "--envs") is None  # a flag at the end has no value


def test_a_file_that_is_not_a_study_is_refused(tmp_path):
    for text, message in (("[1, 2]", "a study file is a mapping"), ("a: [", "not YAML")):
        (tmp_path / "bad.yml").write_text(text)
        with pytest.raises(StudyError, match=message):
            load_study(tmp_path / "bad.yml")
    with pytest.raises(StudyError, match=r"cannot read the file \(No such file or directory\)"):
        load_study(tmp_path / "missing.yml")


@pytest.mark.parametrize("name", ["dev-zero", "fifo", "directory", "too-large", "not-utf8"])
def test_a_study_file_that_is_not_a_settings_file_is_refused_before_it_is_read(tmp_path, capsys, name):
    """Issue 54 N11: a study file in Latin-1 was a UnicodeDecodeError traceback, /dev/zero would be read until
    memory ran out. Each is one problem naming the file and the fix (evo-study exits 2); never the file's
    text."""
    import evo.study.main as study_main
    from tests.unit.config.test_settings_files import NOT_A_SETTINGS_FILE, not_a_settings_file

    path = not_a_settings_file(tmp_path, name)
    with pytest.raises(StudyError) as refused:
        load_study(path)
    why = NOT_A_SETTINGS_FILE[name][1].replace("a YAML settings file", "a study file (YAML)")
    assert refused.value.problems == [why] and refused.value.source == str(path)
    assert study_main.main([str(path), "--list"]) == 2
    assert capsys.readouterr().err == f"evo-study: error: {path}:\n  - {why}\n"


def test_every_key_of_the_study_file_is_in_its_docs_page():
    """docs/studies.md is the format (the spec's docstring only showed an example): each section's table has
    a row for each key the parser takes, and the page names every kind, preset, explorer and way of acting, and
    what "defaults" means for a single agent on an env without a block of its own."""
    import re

    from evo.study import spec
    from tests.support import ROOT

    text = (ROOT / "docs" / "studies.md").read_text()
    sections = {title: body for title, body in re.findall(r"^##+ (.+?)\n(.*?)(?=^##+ |\Z)", text, re.M | re.S)}

    def rows(title: str) -> list[str]:
        return re.findall(r"^\| `([a-z_]+)` \|", sections[title], re.M)

    assert rows("Top-level keys") == list(spec.TOP_KEYS)
    assert rows("A method") == list(spec.METHOD_KEYS)
    assert rows("`fresh`: the re-evaluation") == list(spec.FRESH_KEYS)
    assert rows("`compare`: the comparisons, declared before the runs") == list(spec.COMPARE_KEYS)
    named = set(re.findall(r"`([^`\s]+)`", text))
    for words in (spec.BUDGET_KEYS, spec.KINDS, spec.PRESETS, spec.EXPLORE_NAMES, spec.ACTIONS):
        assert not set(words) - named, set(words) - named
    defaults = sections['What "defaults" means for a `single` agent on your own env']
    assert "--initial-hparams defaults" in defaults and "`default` block" in defaults

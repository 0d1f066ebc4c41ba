"""What an explorer or a learner can do is declared on it (an explorer's class attributes, a
learner's LearnerSpec), and the config's refusals, suggestions, help and choices read the
registries when the parser is built: proven with a test-only explorer and a test-only learner,
each registered with one line. Pure."""

import argparse
import ast
import re

import pytest

from evo.config import ConfigError, build_parser, checks, parse_config
from evo.core.explorers import EXPLORERS, Explorer
from evo.learners import LearnerSpec, algos, learner_spec, specs
from tests.mirror_explorer import Mirror
from tests.support import ROOT


class Generational(Mirror):
    """The test explorer, as if it needed a whole generation."""

    name = "generational"
    asynchronous = False
    why_synchronous = "mirrors a generation's recipients as one test batch"


class Ordered(Mirror):
    """The test explorer, as if its values needed an order."""

    name = "ordered"
    named_choices = False
    why_ordered = "its test mirror needs values with an order"


class Picky(Mirror):
    """The test explorer, with a rule of its own for categories."""

    name = "picky"
    category_rule = "takes the first choice"


TEST_LEARNER = LearnerSpec(name="xyz", title="XYZ", settings=(), action_spaces=("Box",), replay=True, distils=True)
"""A learner that learns from a replay buffer and distils (declared only: never built)."""


def parse(argv, tmp_path, **kwargs):
    return parse_config([*argv, "--run-dir", str(tmp_path / "run")], **kwargs)


def problems(argv, tmp_path, **kwargs):
    with pytest.raises(ConfigError) as refused:
        parse(argv, tmp_path, **kwargs)
    return refused.value.problems


def help_text() -> str:
    return " ".join(build_parser("evo").format_help().split())


def test_a_registered_explorer_is_offered_when_the_parser_is_built(tmp_path, monkeypatch):
    with pytest.raises(SystemExit):  # argparse's "invalid choice": not registered yet
        build_parser().parse_args(["--explore", "mirror"])
    assert "'mirror'" not in help_text()
    monkeypatch.setitem(EXPLORERS, "mirror", Mirror)  # after evo.config was imported
    assert "--explore {perturb,pb2,pb2-rand,pb2-mult,pb2-mix,casmo,mirror}" in help_text()
    assert "'mirror': a test-only explorer: each value mirrored within its range (default: perturb)" in help_text()
    config = parse(["--explore", "mirror", "--asynchronous"], tmp_path, world_size=2)
    assert (config.explore, config.asynchronous) == ("mirror", True)


def test_an_explorer_that_is_not_asynchronous_is_refused_with_its_own_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(EXPLORERS, "generational", Generational)
    monkeypatch.setitem(EXPLORERS, "mirror", Mirror)
    assert problems(["--explore", "generational", "--asynchronous"], tmp_path, world_size=2) == [
        "--explore generational --asynchronous: generational mirrors a generation's recipients as one test batch; "
        "asynchronous PBT decides one member at a time: use --explore perturb, pb2, pb2-rand, pb2-mult, pb2-mix or "
        "mirror, or drop --asynchronous"
    ]
    assert "'generational': a test-only explorer: each value mirrored within its range; not with --asynchronous" in (
        help_text()
    )
    assert parse(["--explore", "generational"], tmp_path, world_size=2).explore == "generational"


def test_every_explorer_declares_what_it_can_do_and_why_not():
    for name, explorer in EXPLORERS.items():
        assert explorer.name == name and explorer.summary, name
        assert explorer.asynchronous or explorer.why_synchronous, name
        assert explorer.named_choices or explorer.why_ordered, name
        assert not explorer.category_rule or explorer.named_choices, name
    declared = {name: (e.asynchronous, e.named_choices, bool(e.category_rule)) for name, e in EXPLORERS.items()}
    assert declared == {
        "perturb": (True, True, False),
        "pb2": (True, False, False),
        "pb2-rand": (True, True, True),
        "pb2-mult": (True, True, True),
        "pb2-mix": (True, True, True),
        "casmo": (False, True, False),
    }
    # the interface's defaults: an explorer that learns only in observe() would learn nothing one
    # member at a time, so it runs asynchronously only once it says so
    assert (Explorer.asynchronous, Explorer.named_choices, Explorer.category_rule) == (False, True, "")


def test_named_choices_are_refused_by_what_the_explorer_declares(tmp_path, monkeypatch):
    monkeypatch.setitem(EXPLORERS, "ordered", Ordered)
    monkeypatch.setitem(EXPLORERS, "picky", Picky)
    td3 = ["--algo", "td3", "--env-id", "Pendulum-v1"]  # TD3's space explores noise_type by name
    (problem,) = problems([*td3, "--explore", "ordered"], tmp_path, world_size=2)
    assert problem == (
        "--explore ordered with named choices in the search space (noise_type: ['normal', 'ornstein-uhlenbeck']): "
        "its test mirror needs values with an order; use --explore pb2-rand, pb2-mult, pb2-mix or picky (categories "
        "by a rule of their own: pb2-rand keeps or redraws each at random; pb2-mult draws them from a TV.EXP3.M "
        "bandit; pb2-mix draws them from a TV.EXP3.M bandit; picky takes the first choice), or list ordered numbers "
        "instead"
    )
    assert "; not with named choices" in help_text().split("'ordered':")[1]
    assert parse([*td3, "--explore", "picky"], tmp_path, world_size=2).explore == "picky"


def test_a_learner_s_spec_decides_its_refusals_and_the_texts_that_name_learners(monkeypatch):
    assert [name for name in algos() if learner_spec(name).distils] == ["ppo"]
    built_in = list(algos())
    assert built_in[0] == "ppo" and {"sac", "td3"} <= set(built_in)
    titles = ", ".join(learner_spec(name).title for name in built_in)
    off_policy = ", ".join(name for name in built_in if learner_spec(name).replay)
    monkeypatch.setitem(specs(), "xyz", TEST_LEARNER)  # the registry a learner module's SPEC joins
    assert f"the learner: {', '.join(repr(name) for name in built_in)} or 'xyz'" in help_text()
    assert f"agents ({titles}, XYZ: --algo)" in help_text()
    assert f"off-policy learners ({off_policy}, xyz)" in help_text()
    assert "0: no stages (--algo ppo or xyz, synchronous runs)" in help_text()

    found: list[str] = []
    checks.learner_options(learner_spec("ppo"), "copy", True, found)
    assert found[0].endswith(f"drop the flag (it is for --algo {off_policy} or xyz)")
    stage = argparse.Namespace(max_distillations=1, asynchronous=False, schedule=None, students=None)
    found = []
    checks.stages(stage, learner_spec("sac"), {"pi_layers": {}}, 4, found)
    assert found == [
        "--max-distillations 1 --algo sac: a stage distils its students from their teachers with the learner's own "
        "loss; SAC would need a distillation of its critics and its replay buffer, not built; use --algo ppo or xyz, "
        "or drop --max-distillations"
    ]
    found = []
    checks.stages(stage, TEST_LEARNER, {}, 4, found)  # it distils: on to the next rule
    assert found[0].startswith("--max-distillations 1: a stage proposes new architectures")


def string_constants(path) -> list[str]:
    """The string constants of a module (f-strings' literal parts included), docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def named(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def test_the_config_names_no_explorer_and_no_learner_in_its_code():
    """What the config says of explorers and learners it reads from them, the learner of a run recorded
    before --algo existed included: evo.learners.DEFAULT_ALGO (issue 57: "ppo" was written in three places
    here)."""
    names = {*EXPLORERS, *algos(), *(spec.title for spec in specs().values())}
    found = []
    for path in sorted((ROOT / "evo" / "config").glob("*.py")):
        for text in string_constants(path):
            found += [(path.name, name) for name in sorted(names) if named(text, name)]
    assert found == []
    assert named("use --explore pb2 or perturb", "pb2") and not named("--perturb-factors", "perturb")

"""DrAC's settings in the config: aug_coef and aug_type set or explored on an image env, and refused
with the fix when unknown, negative, or on a policy that reads vectors (pure: no torch)."""

import pytest

from evo.config.agent import AgentSettings
from evo.core.kinds import Categorical, Float
from evo.learners.ppo import AUG_TYPES
from tests.unit.config.test_config import parse, problems

SPACE = "search_space:{aug_coef: {low: 0.01, high: 0.5}, aug_type: {choices: [crop, flip, cutout]}}"


def test_drac_is_off_by_default_and_set_on_a_procgen_game(tmp_path):
    default = parse(["--env-id", "bigfish"], tmp_path / "default")
    assert (default.agent.settings["aug_coef"], default.agent.settings["aug_type"]) == (0.0, "crop")
    config = parse(["--env-id", "bigfish", "--hyperparams", "aug_type:random-conv", "aug_coef:0.1"], tmp_path)
    assert (config.agent.settings["aug_coef"], config.agent.settings["aug_type"]) == (0.1, "random-conv")


def test_both_may_be_explored_and_the_names_survive_config_yaml(tmp_path):
    config = parse(["--env-id", "bigfish", "--hyperparams", "aug_coef:0.1", SPACE], tmp_path)
    space = config.agent.search_space
    assert space["aug_coef"] == Float(0.01, 0.5)
    assert space["aug_type"] == Categorical(["crop", "flip", "cutout"])
    assert tuple(space)[-2:] == ("aug_coef", "aug_type")  # the records' last columns (declaration order)
    again = AgentSettings.from_dict(config.agent.to_dict())
    assert again.search_space == space and again.settings["aug_type"] == "crop"


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["aug_type:blur"], f"aug_type (--hyperparams) is 'blur'; it must be one of {', '.join(map(repr, AUG_TYPES))}"),
        (["aug_type:random_conv"], "did you mean 'random-conv'?"),
        (
            ["aug_coef:0.1", "search_space:{aug_type: {choices: [crop, blur, mixup]}}"],
            "search_space.aug_type (--hyperparams) has the choices ['crop', 'blur', 'mixup']; every value must be "
            f"one of {', '.join(map(repr, AUG_TYPES))}: drop 'blur', 'mixup'",
        ),
        (["aug_coef:-0.1"], "aug_coef (--hyperparams) is -0.1; it must be >= 0 (DrAC's weight"),
        (
            ["search_space:{aug_coef: {low: -0.1, high: 0.5}}"],
            "search_space.aug_coef (--hyperparams) is [-0.1, 0.5]; every value must be >= 0 (DrAC's weight",
        ),
        (["search_space:{aug_type: {choices: [crop, flip]}}"], "DrAC is off (aug_coef 0)"),
        (["search_space:{aug_type: {low: 1, high: 2}}"], "aug_type takes names: give choices"),
    ],
)
def test_drac_settings_are_refused_with_the_fix(tmp_path, overrides, words):
    found = problems(["--env-id", "bigfish", "--hyperparams", *overrides], tmp_path)
    assert any(words in problem for problem in found), found


@pytest.mark.parametrize(
    "overrides",
    [["aug_coef:0.1"], ["search_space:{aug_coef: {low: 0.0, high: 0.3}}"], ["aug_coef:0.1", "aug_type:flip"]],
    ids=["on", "explored", "with-a-type"],
)
def test_drac_on_a_vector_env_is_refused(tmp_path, overrides):
    """CartPole's observations are vectors, read by the mlp policy: there is no frame to augment."""
    found = problems(["--hyperparams", *overrides], tmp_path)
    drac = [problem for problem in found if "DrAC" in problem]
    assert len(drac) == 1, found
    assert "needs image observations" in drac[0] and "policy 'mlp'" in drac[0] and "impala or nature" in drac[0]


def test_every_drac_problem_is_reported_at_once(tmp_path):
    found = problems(["--hyperparams", "aug_type:blur", "aug_coef:-1"], tmp_path)
    assert any("aug_type (--hyperparams) is 'blur'" in problem for problem in found)
    assert any("aug_coef (--hyperparams) is -1.0" in problem for problem in found)
    assert not any("needs image observations" in problem for problem in found)  # a negative weight is not "on"

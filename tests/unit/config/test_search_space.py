"""Search-space kinds in the YAML and --hyperparams: parsed, defaulted, and refused with the reason."""

import pytest

from evo.config import ConfigError, parse_config
from evo.core.kinds import Choice, Integer, LogFloat, OffOr
from tests.support import PPO_SIX


def config_with(space: str, *extra: str):
    return parse_config(["--env-id", "CartPole-v1", "--hyperparams", f"search_space:{space}", *extra], world_size=1)


def problems_of(space: str, *extra: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config_with(space, *extra)
    return caught.value.problems


def test_choices_and_integer_ranges_join_the_six():
    config = config_with(
        "{n_epochs: {choices: [3, 5, 10, 20]}, n_minibatches: {low: 1, high: 8, scale: int}, "
        "max_grad_norm: {low: 0.3, high: 5, scale: log}, target_kl: {choices: [0.01, 0.05, null]}}"
    )
    space = config.agent.search_space
    assert tuple(space)[: len(PPO_SIX)] == tuple(PPO_SIX)
    # the extras follow in PPO's declaration order
    assert tuple(space) == (*PPO_SIX, "n_epochs", "n_minibatches", "max_grad_norm", "target_kl")
    assert space["n_epochs"] == Choice((3, 5, 10, 20))
    assert space["n_minibatches"] == Integer(1, 8)
    assert (space["n_minibatches"].low, space["n_minibatches"].high) == (1, 8)
    assert space["max_grad_norm"] == LogFloat(0.3, 5)
    assert isinstance(space["target_kl"], OffOr) and space["target_kl"].choices == (0.01, 0.05, None)
    assert config.agent.defaults["n_epochs"] == 10 and config.agent.defaults["n_minibatches"] == 4
    assert config.agent.defaults["target_kl"] is None  # absent: no early stop ("off" is None)


def test_the_six_may_be_choices_too():
    config = config_with("{gamma: {choices: [0.95, 0.98, 0.995]}}")  # CartPole's gamma is 0.98
    assert config.agent.search_space["gamma"] == Choice((0.95, 0.98, 0.995))
    assert config.explored_names == tuple(PPO_SIX)  # no new column: gamma has one
    # the six follow the extras' rule now: the YAML's default must be one of the choices
    assert any(
        "the default gamma 0.98 is not in the choices [0.95, 0.99, 0.995]" in p
        for p in problems_of("{gamma: {choices: [0.95, 0.99, 0.995]}}")
    )
    assert any("type: int is for the counts" in p for p in problems_of("{gamma: {low: 0.9, high: 0.99, type: int}}"))


def test_type_int_with_a_log_scale():
    space = config_with("{batch_size: {low: 32, high: 1024, type: int, scale: log}}").agent.search_space
    assert space["batch_size"] == Integer(32, 1024, log=True)


@pytest.mark.parametrize(
    ("space", "words"),
    [
        ("{n_epochs: {choices: []}}", "choices is empty"),
        ("{n_epochs: {choices: [3, five]}}", "mixed types"),
        ("{n_epochs: {choices: [3, 5.5]}}", "whole numbers"),
        ("{n_epochs: {choices: [10, 5, 3]}}", "increasing order"),
        ("{n_epochs: {choices: [3, 5, 20]}}", "default n_epochs 10 is not in the choices [3, 5, 20]"),
        ("{n_epochs: {low: 1, high: 20}}", "takes whole numbers: give type: int"),
        ("{n_epochs: {low: 12, high: 20, type: int}}", "default n_epochs 10 is not in [12"),
        ("{n_epochs: {choices: [3, 10], low: 1}}", "give choices or a range"),
        ("{target_kl: {choices: [null, 0.01]}}", "put it last"),
        ("{max_grad_norm: {choices: [true, 1]}}", "mixed types"),
        ("{batch_size: {low: 2, high: 4096, type: int}}", "between 2 and n_envs * n_steps = 1024"),
        ("{batch_size: {choices: [64, 256]}, n_minibatches: {choices: [4, 8]}}", "explore one of them"),
        ("{n_steps: {choices: [64, 128]}}", "n_steps cannot be explored: it sizes the rollout buffer"),
        ("{n_epoch: {choices: [3, 10]}}", "did you mean 'n_epochs'"),
    ],
)
def test_bad_search_spaces_are_refused_with_the_fix(space, words):
    problems = problems_of(space)
    assert any(words in problem for problem in problems), problems
    assert len(problems) == len(set(problems))  # each problem said once


def test_a_run_without_extra_kinds_keeps_exactly_the_six():
    config = parse_config(["--env-id", "CartPole-v1"], world_size=1)
    assert tuple(config.agent.search_space) == tuple(PPO_SIX)
    assert set(config.agent.defaults) == set(PPO_SIX)
    assert config.agent.settings["target_kl"] is None

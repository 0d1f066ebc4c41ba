"""Every setting a learner declares reaches SB3 by the way it declares: the SB3 side has the code
for each CUSTOM one, and every other setting is an argument of the SB3 class."""

import pytest

from evo.learners import Reach, algos, learner_spec
from evo.sb3.learner import constructor_parameters, learner_class


@pytest.mark.parametrize("algo", algos())
def test_each_custom_setting_has_its_code_and_its_reader(algo):
    spec, learner = learner_spec(algo), learner_class(algo)
    custom = {setting.name for setting in spec.settings if setting.reach is Reach.CUSTOM}
    assert set(learner.custom) == custom, algo
    assert set(learner.readers) == custom, algo


@pytest.mark.parametrize("algo", algos())
def test_every_other_setting_is_an_argument_of_the_sb3_class(algo):
    """A setting that is not CUSTOM is built into the model by its constructor (and, if tunable,
    set on it by name), so its name must be one of the class's arguments; the architecture's make
    policy_kwargs' net_arch (test_architecture.py), and those the learner builds in itself (``built``:
    fixed ones, A2C's choice of RMSpropTFLike) are read where it builds the model."""
    spec, learner = learner_spec(algo), learner_class(algo)
    accepted = constructor_parameters(learner.algorithm)
    assert all(not spec.by_name[name].tunable for name in learner.built), algo
    missing = [
        s.name
        for s in spec.settings
        if s.reach not in (Reach.CUSTOM, Reach.ARCHITECTURE) and s.name not in accepted and s.name not in learner.built
    ]
    assert not missing, f"{algo}: {missing} are not arguments of {learner.algorithm.__name__}"


def test_the_arguments_of_a_subclass_include_its_bases():
    ppo = learner_class("ppo").algorithm  # evo's PPO: microbatch_size and precision, then SB3's through **kwargs
    assert {"microbatch_size", "precision", "n_steps", "gae_lambda", "clip_range"} <= constructor_parameters(ppo)

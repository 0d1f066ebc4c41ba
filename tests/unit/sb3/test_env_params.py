"""Env parameters and the objective in the SB3 layer (issue 38): an ``env.<attribute>`` value reaches every
live env of a member (training and evaluation) at its next step, when the member is built, explores, copies
a donor and is restored, while SB3's own ``set_attr`` does not reach it; a member scores on the objective
(training or evaluation episodes), carries it with its weights and keeps it in its checkpoint (real SB3,
real envs, no MPI)."""

import math

import numpy as np
import pytest

from evo.config import parse_config
from evo.core.result import Standing
from tests.support import TINY_DEFAULT, member_of

ENV = ["--env-id", "tests.objective_env:Objectives-v0"]
SPACE = "search_space:{env.weight: {low: 0.1, high: 0.9}, env.cost: {choices: [0.25, 0.5, 0.75]}}"


def make_config(tmp_path, *extra):
    hp = tmp_path / "tiny.yml"
    hp.write_text(TINY_DEFAULT + f"  {SPACE.replace(':', ': ', 1)}\n")
    return parse_config([*ENV, "--hyperparams", str(hp), *extra], check_run_dir=False)


def seen(venv, reset: bool = False) -> list[tuple[float, float]]:
    """(weight, cost) each env of ``venv`` reports at its next step (after a reset, for envs that have not
    started)."""
    if reset:
        venv.reset()
    _, _, _, infos = venv.step(np.zeros(venv.num_envs, dtype=np.int64))
    return [(info["weight"], info["cost"]) for info in infos]


def test_a_new_value_reaches_every_live_env_at_its_next_step_and_sb3_s_set_attr_does_not(tmp_path):
    config = make_config(tmp_path, "--eval-episodes", "2")
    member = member_of(config, 0, {"env.weight": 0.3, "env.cost": 0.25})
    assert seen(member.model.env, reset=True) == [(0.3, 0.25)] * member.model.env.num_envs  # when it is built
    assert seen(member.eval_env, reset=True) == [(0.3, 0.25)] * member.eval_env.num_envs
    member.train(64)  # the envs are in the middle of episodes
    member.set_hparams({**member.hparams, "env.weight": 0.7, "env.cost": 0.75})  # an explore
    assert seen(member.model.env) == [(0.7, 0.75)] * member.model.env.num_envs
    assert seen(member.eval_env) == [(0.7, 0.75)] * member.eval_env.num_envs
    assert member.effective_hparams(["env.weight"]) == {"env.weight": 0.7}
    # the naive way: SB3's set_attr puts it on the outer wrapper, and reads it back from there
    member.model.env.set_attr("weight", 0.9)
    assert member.model.env.get_attr("weight") == [0.9] * member.model.env.num_envs
    assert seen(member.model.env)[0] == (0.7, 0.75)  # the env still steps with the member's value


def test_a_recipient_takes_its_donor_s_values_at_the_exploit_and_a_restored_member_its_own(tmp_path):
    config = make_config(tmp_path)
    donor = member_of(config, 0, {"env.weight": 0.2, "env.cost": 0.5})
    recipient = member_of(config, 1, {"env.weight": 0.8, "env.cost": 0.75})
    recipient.train(64)
    recipient.load(donor.exploit_state(), {**donor.hparams, "env.weight": 0.24})  # the donor's, explored
    assert seen(recipient.model.env) == [(0.24, 0.5)] * recipient.model.env.num_envs
    saved = recipient.member_state()
    fresh = member_of(config, 1, {"env.weight": 0.6, "env.cost": 0.25})
    fresh.restore(saved)  # its envs as they were, mid-episode (plain data: evo/sb3/envstate.py)
    assert fresh.hparams["env.weight"] == 0.24
    assert seen(fresh.model.env) == [(0.24, 0.5)] * fresh.model.env.num_envs


def test_a_member_scores_on_its_objective_and_trains_on_the_reward(tmp_path):
    config = make_config(tmp_path, "--objective", "info:merit,info:cost:min")
    member = member_of(config, 0, {"env.weight": 0.3, "env.cost": 0.25})
    member.train(64)  # 2 envs x 32 steps, episodes of 4 steps: 16 episodes
    scores = member.evaluate()
    assert scores.score_train == pytest.approx(4 * 0.3)  # the return: what it trains on
    assert scores.objectives == pytest.approx((0.7, 0.25))
    assert scores.score == pytest.approx(0.7)  # the first objective, larger better
    assert scores.info_keys == ("cost", "merit", "weight")
    minimised = member_of(make_config(tmp_path, "--objective", "info:cost:min"), 0, {"env.weight": 0.3})
    minimised.set_hparams({**minimised.hparams, "env.cost": 0.75})
    minimised.train(64)
    assert minimised.evaluate().score == pytest.approx(-0.75)


def test_select_on_test_scores_the_objective_on_evaluation_episodes(tmp_path):
    config = make_config(tmp_path, "--objective", "return,info:merit", "--eval-episodes", "3", "--select-on", "test")
    member = member_of(config, 0, {"env.weight": 0.6, "env.cost": 0.5})
    scores = member.evaluate()  # no training episode yet: the evaluation's
    assert scores.objectives == pytest.approx((4 * 0.6, 0.4))
    assert scores.score_test == pytest.approx(2.4) and math.isnan(scores.score_train)
    assert scores.info_keys == ("cost", "merit", "weight")


def test_before_an_episode_ends_the_objective_is_nan_and_no_key_is_known(tmp_path):
    config = make_config(tmp_path, "--objective", "info:merit")
    member = member_of(config, 0, {"env.weight": 0.3})
    before = member.evaluate()
    assert before.info_keys is None and math.isnan(before.score) and math.isnan(before.objectives[0])
    member.train(64)
    assert member.evaluate().objectives == pytest.approx((0.7,))


def test_objectives_are_carried_with_the_weights_and_kept_in_the_checkpoint(tmp_path):
    config = make_config(tmp_path, "--objective", "info:merit")
    donor = member_of(config, 0, {"env.weight": 0.1})
    donor.train(64)
    recipient = member_of(config, 1, {"env.weight": 0.9})
    recipient.load(donor.exploit_state(), donor.hparams)
    assert math.isnan(recipient.evaluate().score)  # no episode with the new weights, nothing carried
    recipient.carry(Standing(0.4, (0.9,)))
    assert recipient.evaluate().objectives == (0.9,) and recipient.evaluate().score_train_stale
    restored = member_of(config, 1, {"env.weight": 0.5})
    restored.restore(recipient.member_state())
    assert restored.evaluate().objectives == (0.9,)
    donor_copy = member_of(config, 0, {"env.weight": 0.5})
    donor_copy.restore(donor.member_state())  # the window's episodes come back with their info values
    assert donor_copy.evaluate().objectives == pytest.approx(donor.evaluate().objectives)
    assert donor_copy.evaluate().objectives == pytest.approx((0.9,))


def test_the_export_s_wrapper_sets_a_value_where_evo_does_and_refuses_an_attribute_the_env_lacks(capsys, monkeypatch):
    """evo/sb3/set_env_params.py (written into an export as evo_env_params.py, issue 57): the value set on the
    outermost layer that has the attribute (CartPole's own env, under gymnasium's wrappers) and said once; an
    attribute no layer has refused by name, not created on the wrapper where the env would never read it."""
    import gymnasium as gym

    from evo.sb3 import set_env_params
    from evo.sb3.set_env_params import SetEnvParams

    monkeypatch.setattr(set_env_params, "_SAID", set())  # nothing said before
    env = SetEnvParams(gym.make("CartPole-v1"), attrs={"gravity": 5.0})
    assert env.unwrapped.gravity == 5.0 and "gravity" not in vars(env)
    SetEnvParams(gym.make("CartPole-v1"), attrs={"gravity": 5.0})
    assert capsys.readouterr().out.count("CartPole-v1 runs with the member's env parameters: gravity=5.0") == 1
    with pytest.raises(AttributeError, match="gravityy=1.0: the env CartPole-v1 has no attribute 'gravityy'"):
        SetEnvParams(gym.make("CartPole-v1"), attrs={"gravityy": 1.0})

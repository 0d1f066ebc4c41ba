"""DDPG behind the learner interface (evo/sb3/ddpg.py, TD3's machinery; real SB3, real Pendulum, no MPI
job): every tunable value reaches the next update or collection, read where TD3's tests read them (TD3's
update spy: DDPG's update is SB3's TD3 update), with DDPG's own shape: one critic, the actor and the
targets updated at every critic step, no target-policy smoothing. The state's moves (exploit, checkpoint):
test_zoo_learners.py; the exploration noise's own behaviour (per-env copies, type switches, the running
Ornstein-Uhlenbeck value): test_td3.py, which DDPG shares."""

import pytest
from stable_baselines3.common.noise import OrnsteinUhlenbeckActionNoise

from evo.sb3.ddpg import DDPG
from tests.support import member_of
from tests.unit.sb3 import offpolicy
from tests.unit.sb3.offpolicy import NEW_VALUES
from tests.unit.sb3.test_td3 import UpdateSpy

NEW = {**NEW_VALUES, "noise_type": "ornstein-uhlenbeck", "noise_std": 0.25}


def test_every_tunable_value_reaches_the_next_update(monkeypatch):
    config = offpolicy.config_of("ddpg")
    spec = config.agent.spec
    assert set(NEW) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    model = member.model
    assert isinstance(model, DDPG) and len(model.critic.q_networks) == 1  # one critic
    member.train(100)
    assert model._n_updates == 50
    spy, rows = offpolicy.train_with_new_values(member, NEW, UpdateSpy, monkeypatch)

    offpolicy.assert_collections_and_updates(member, spy)  # train_freq, gradient_steps, batch_size, gamma
    # every critic step is an actor step and a target update (no delay), each target with the new tau
    assert [n for n, _ in spy.critic_steps] == spy.actor_steps == list(range(51, 63))
    assert spy.taus == [("critic", 0.02), ("actor", 0.02)] * 12
    # no target-policy smoothing: SB3's DDPG clips that noise to [0, 0]
    assert spy.clips == [(-0.0, 0.0)] * 12
    # noise_type and noise_std: every action's noise from one Ornstein-Uhlenbeck process with the new σ
    assert all(drawn is model.action_noise and cls is OrnsteinUhlenbeckActionNoise for drawn, cls, _ in spy.draws)
    assert len(spy.draws) == 16 and all(sigma == [0.25] for _, _, sigma in spy.draws)
    offpolicy.assert_new_values_in_effect(member, NEW, rows, optimizer_count=2)  # learning_rate, in both Adams


def test_a_ddpg_member_is_refused_on_discrete_actions():
    from evo.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as refused:
        parse_config(["--algo", "ddpg", "--env-id", "CartPole-v1"], check_run_dir=False)
    assert "--algo ddpg: DDPG acts in Box action spaces, and CartPole-v1 has a Discrete action space" in str(
        refused.value
    )

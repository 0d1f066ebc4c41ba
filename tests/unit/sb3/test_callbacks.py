"""What runs inside learn() (evo/sb3/callbacks.py): a replayed schedule (--schedule) puts each entry in
effect from its env step (PPO), and on an off-policy learner a change of train_freq at a
generation boundary sizes that generation's collections from the first one, so one agent
replaying a line trains each generation as long as the line did (the budget rounded up to whole
collections of the generation's train_freq)."""

import pytest

from evo.config import parse_config
from evo.runner.session import member_factory
from tests.support import member_of, write_hyperparams

TINY_SAC = ["--algo", "sac", "--env-id", "Pendulum-v1", "--num-agents", "1"]
TINY_SAC += ["--hyperparams", "learning_starts:1000", "buffer_size:1000", "policy_kwargs:{net_arch: [8]}"]


def test_a_train_freq_change_at_a_generation_boundary_sizes_its_first_collection():
    config = parse_config(TINY_SAC, world_size=1, check_run_dir=False)
    first = {**member_factory(config).initial.of(0), "train_freq": 10}
    second = {**first, "train_freq": 7}
    schedule = [(0, first), (200, second)]
    member = member_factory(config).make(0, first, tensorboard=False)
    try:
        member.train(200, schedule=schedule)
        assert (member.env_steps, member.hparams["train_freq"]) == (200, 10)  # 20 collections of 10
        member.train(200, schedule=schedule)
        assert member.hparams["train_freq"] == 7
        assert member.env_steps == 200 + 203  # 29 collections of 7, not one of 10 and then 7s
    finally:
        member.close()


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    hp = write_hyperparams(tmp_path_factory.mktemp("hp"))
    return parse_config(["--hyperparams", str(hp)], check_run_dir=False)


def test_schedule_callback_puts_each_entry_in_effect_from_its_env_step(config):
    """A replayed schedule: at every rollout the optimizer, the rollout buffer and the clip
    range hold the schedule's values for the env-step count at which the rollout starts."""
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from evo.core.schedule import hparams_at
    from evo.sb3.callbacks import ScheduleCallback

    defaults = config.agent.defaults
    second = {**defaults, "learning_rate": 1e-3, "clip_range": 0.3, "gamma": 0.95}
    third = {**defaults, "learning_rate": 2e-4, "clip_range": 0.15, "gae_lambda": 0.9, "ent_coef": 0.01}
    schedule = [(0, dict(defaults)), (200, second), (300, third)]  # rollouts are 128 steps: not aligned
    member = member_of(config, 0, defaults)
    seen = []

    class Record(BaseCallback):
        def _on_rollout_end(self):
            seen.append((self.model.num_timesteps - 128, member.effective_hparams()))

        def _on_step(self):
            return True

    for _ in range(4):
        member.train(128, callback=CallbackList([ScheduleCallback(member, schedule), Record()]))
    assert [start for start, _ in seen] == [0, 128, 256, 384]
    for start, effective in seen:
        wanted = hparams_at(schedule, start)
        for name, value in wanted.items():
            assert effective[name] == pytest.approx(value), (start, name)
    assert seen[2][1]["learning_rate"] == pytest.approx(1e-3)  # 256 >= 200: the second entry
    assert member.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(2e-4)


def test_a_nan_reward_fails_the_member_at_its_step_naming_it(tmp_path):
    """Not later, in the update, as "invalid logits" that hide the cause."""
    from evo.sb3.callbacks import NonFiniteReward
    from tests.support import TINY_DEFAULT

    config = parse_config(
        [
            *("--env-id", "tests.nan_env:NanCartPole-v0", "--env-kwargs", "nan_after:40"),
            *("--hyperparams", str(write_hyperparams(tmp_path, TINY_DEFAULT)), "--tb-writer", "False"),
        ],
        check_run_dir=False,
    )
    member = member_factory(config).make(3, tensorboard=False)
    with pytest.raises(NonFiniteReward, match=r"member 3: its env 0 gave a reward of nan at env step 8\d"):
        member.train(256)
    member.close()

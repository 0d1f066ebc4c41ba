"""A replayed schedule (--schedule) on an off-policy learner: a change of train_freq at a
generation boundary sizes that generation's collections from the first one, so one agent
replaying a line trains each generation as long as the line did (the budget rounded up to whole
collections of the generation's train_freq)."""

from evo.config import parse_config
from evo.run import initial_hparams, make_member

TINY_SAC = ["--algo", "sac", "--env-id", "Pendulum-v1", "--num-agents", "1"]
TINY_SAC += ["--hyperparams", "learning_starts:1000", "buffer_size:1000", "policy_kwargs:{net_arch: [8]}"]


def test_a_train_freq_change_at_a_generation_boundary_sizes_its_first_collection():
    config = parse_config(TINY_SAC, world_size=1, check_run_dir=False)
    first = {**initial_hparams(config, 0), "train_freq": 10}
    second = {**first, "train_freq": 7}
    schedule = [(0, first), (200, second)]
    member = make_member(config, 0, first, tensorboard=False)
    try:
        member.train(200, schedule=schedule)
        assert (member.env_steps, member.hparams["train_freq"]) == (200, 10)  # 20 collections of 10
        member.train(200, schedule=schedule)
        assert member.hparams["train_freq"] == 7
        assert member.env_steps == 200 + 203  # 29 collections of 7, not one of 10 and then 7s
    finally:
        member.close()

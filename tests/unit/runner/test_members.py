"""evo.runner.members without MPI: a member rebuilt on another rank from its payload (a move), with real
SB3 members."""

import numpy as np

from evo.config import parse_config
from evo.runner.session import member_factory
from tests.support import TINY_PROCGEN, write_hyperparams


def test_a_moved_member_is_the_member_and_its_fresh_envs_are_seeded_anew_at_each_move(tmp_path):
    """bigfish's envs are not plain data: after a move they start anew, from a seed of their own for
    each move (not the member's first one again: it would replay the same levels)."""
    hyperparams = write_hyperparams(tmp_path, TINY_PROCGEN)
    config = parse_config(
        ["--env-id", "bigfish", "--hyperparams", str(hyperparams), "--tb-writer", "False"], check_run_dir=False
    )
    member = member_factory(config).make(0, tensorboard=False)
    first = member.model.env.reset()
    member.train(64)
    payloads = [member.member_state()]
    member.train(64)
    payloads.append(member.member_state())
    member.close()
    frames = [first]
    for payload in payloads:
        moved = member_factory(config).moved(0, payload)
        assert moved.env_steps == payload["num_timesteps"] and np.array_equal(moved.pack(), payload["state"].numpy())
        frames.append(moved.model.env.reset())
        moved.close()
    assert not any(np.array_equal(frames[i], frames[j]) for i in range(3) for j in range(i + 1, 3))

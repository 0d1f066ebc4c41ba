"""A whole SB3 member moving to another rank (asynchronous PBT's migration, evo.mpi.asynchronous):
fetched from the holder's service thread, rebuilt on the new rank from its migration payload
(``Learner.member_state``: weights, optimizers, counters, episode statistics, scores, envs, the
replay buffer), it is the member that left, and trains on. The two ranks swap their members (at
size 2 only: 1 and 4 ranks would add time and nothing new)."""

import pickle

import numpy as np
import pytest
import torch
from mpi4py import MPI

from evo.mpi.asynchronous import Service, fetch_member

CASES = {
    "ppo": ["--num-envs", "2", "--hyperparams", "n_steps:32", "n_epochs:1"],
    "sac": [
        *("--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:20", "batch_size:32"),
        *("buffer_size:100", "policy_kwargs:{net_arch: [16, 16]}"),
    ],
    # the learners of issue 39: their counters (DQN's target-update steps, TD3's and DDPG's noise) move too
    "a2c": ["--algo", "a2c", "--hyperparams", "n_envs:2", "n_steps:8", "policy_kwargs:{net_arch: [16, 16]}"],
    **{
        algo: [
            *("--algo", algo, "--env-id", env_id, "--hyperparams", "learning_starts:20", "batch_size:32"),
            *("buffer_size:100", "policy_kwargs:{net_arch: [16, 16]}", *extra),
        ]
        for algo, env_id, extra in (
            ("dqn", "CartPole-v1", ["train_freq:4", "gradient_steps:1", "target_update_interval:7"]),
            ("qrdqn", "CartPole-v1", ["train_freq:4", "gradient_steps:1"]),
            ("ddpg", "Pendulum-v1", ["noise_type:ornstein-uhlenbeck"]),
            ("tqc", "Pendulum-v1", []),
            ("crossq", "Pendulum-v1", []),
        )
    },
}


try:  # an Atari game (the atari extra): its emulator's state and the stacked frames move with the member
    import ale_py  # noqa: F401
    import cv2  # noqa: F401

    ATARI = True
except ImportError:
    ATARI = False
ATARI_CASES = {
    "ppo-atari": [
        "--env-id",
        "ALE/Breakout-v5",
        "--hyperparams",
        "n_envs:2",
        "n_steps:32",
        "n_epochs:1",
        "n_minibatches:2",
    ],
    "dqn-atari": [
        *("--algo", "dqn", "--env-id", "ALE/Breakout-v5", "--hyperparams", "learning_starts:20", "batch_size:32"),
        *("buffer_size:100", "train_freq:4", "target_update_interval:250"),
    ],
}


def plain(value):
    """The payload as comparable bytes (tensors and arrays by content)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.numpy().tobytes())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return tuple((key, plain(item)) for key, item in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, (list, tuple)):
        return tuple(plain(item) for item in value)
    if isinstance(value, float) and value != value:
        return "nan"
    return value


@pytest.mark.skipif(MPI.COMM_WORLD.Get_size() != 2, reason="two ranks swap their members (run at size 2)")
@pytest.mark.parametrize(
    "algo",
    [
        *sorted(CASES),
        *(
            pytest.param(name, marks=pytest.mark.skipif(not ATARI, reason="make install EXTRAS=atari"))
            for name in ATARI_CASES
        ),
    ],
)
def test_a_member_moved_to_another_rank_is_the_member_that_left(algo):
    from evo.config import parse_config
    from evo.runner.session import member_factory

    comm = MPI.COMM_WORLD  # one communicator: the transport runs on a Dup of the run's anyway
    size, rank = comm.Get_size(), comm.Get_rank()
    config = parse_config({**CASES, **ATARI_CASES}[algo], world_size=size, check_run_dir=False)
    members = {rank: member_factory(config).make(rank, config.agent.defaults, tensorboard=False)}
    members[rank].train(40 + 8 * rank)  # each its own counters, episodes, envs mid-episode
    members[rank].scores.append(float(rank))
    left = comm.allgather(plain(members[rank].member_state()))  # every member as it is before it moves
    sizes = []

    def give(member_id):
        member = members.pop(member_id)
        payload = member.member_state()
        sizes.append(len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)))
        member.close()
        return payload

    service = Service(comm, {}, give)
    service.start()
    comm.Barrier()
    source = (rank + 1) % size
    payload = fetch_member(comm, source, source)
    comm.Barrier()  # every member has left before the service threads stop
    service.stop()
    arrived = member_factory(config).make(source, payload["hparams"], tensorboard=False)
    assert arrived.restore(payload) is None  # its envs too
    assert plain(arrived.member_state()) == left[source]
    before = arrived.env_steps
    arrived.train(32)
    assert arrived.env_steps > before
    assert members == {} and sizes and sizes[0] > arrived.buffer.nbytes  # the whole member, not its weights only
    arrived.close()

"""Observation/reward normalisation as member state (real SB3, real envs, no mpiexec): zoo's
VecNormalize wraps the training envs, its statistics move with the weights through the real
loop bit for bit (one more array of the exploit state), survive a checkpoint, and evaluation
sees them frozen. A whole normalised run, its exploits, checkpoints and resume, in one process:
tests/unit/runner/test_normalize_runs.py; the statistics crossing ranks: tests/mpi/ranks/test_normalize.py."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from mpi4py import MPI
from stable_baselines3.common.vec_env import VecNormalize

from evo.config import parse_config
from evo.core.explorers import make_explorer
from evo.rundir import checkpoint as ckpt
from evo.rundir.checkpoint import member_payload
from evo.runner.loop import LoopSettings, run_generations
from evo.sb3.normalize import statistics
from evo.sb3.rng import rng_state
from tests.support import member_of

TINY_PENDULUM = ["--env-id", "Pendulum-v1", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1"]
NORMALIZED = [*TINY_PENDULUM, "normalize:true"]


def config_of(argv, **kwargs):
    return parse_config(argv, check_run_dir=False, **kwargs)


def statistics_bytes(member) -> list[tuple[bytes, bytes, float]]:
    """Every running statistic of the member's training envs, exactly (bytes and the count)."""
    return [(rms.mean.tobytes(), rms.var.tobytes(), rms.count) for rms in statistics(member.normalizer)]


def test_normalize_wraps_the_training_envs_as_zoo_does_and_gamma_follows_pbt():
    config = config_of(NORMALIZED)
    member = member_of(config, 0, dict(config.agent.defaults, gamma=0.93))
    normalizer = member.model.get_env()
    assert isinstance(normalizer, VecNormalize) and normalizer is member.normalizer
    assert (normalizer.norm_obs, normalizer.norm_reward, normalizer.clip_obs, normalizer.training) == (
        True,
        True,
        10.0,
        True,
    )
    assert normalizer.gamma == 0.93
    assert member.stats.dtype == np.float64 and member.stats.size == 2 * 3 + 1 + 3  # obs (3,), returns ()
    member.set_hparams(dict(member.hparams, gamma=0.85))  # what an explore does
    assert normalizer.gamma == 0.85 == member.model.rollout_buffer.gamma
    member.train(128)
    assert statistics(normalizer)[0].count == pytest.approx(2 + 128)  # reset + steps of 2 envs
    member.close()

    plain = member_of(config_of(TINY_PENDULUM), 0, config.agent.defaults)
    assert plain.normalizer is None and plain.stats is None
    assert not isinstance(plain.model.get_env(), VecNormalize)
    plain.close()


def test_reward_normalisation_alone_carries_the_return_statistics_only():
    config = config_of([*TINY_PENDULUM, "normalize:{norm_obs: false}"])
    member = member_of(config, 0, config.agent.defaults)
    assert (member.normalizer.norm_obs, member.normalizer.norm_reward) == (False, True)
    assert member.stats.size == 3
    member.close()


@pytest.mark.parametrize("transport", ["p2p", "collective"])
def test_statistics_move_with_the_weights_through_the_real_loop(transport):
    """Two normalised members on COMM_SELF, winner-takes-all: after the exploit the recipient's
    running statistics are the donor's, bit for bit; its envs' episode state stays its own."""
    from evo.runner.generation import generation_hooks
    from evo.runner.session import member_factory, open_session

    config = config_of(
        [*NORMALIZED, "--num-agents", "2", "--agent-training-steps", "512", "--tb-writer", "False"],
        strategy="wta",
        transport=transport,
    )
    members = member_factory(config).build(config.members_of(0), 0, None)
    explorer = make_explorer(
        config.explore, config.agent.search_space, config.perturb_factors, config.resample_probability
    )
    session = open_session(config, MPI.COMM_SELF, records=False)
    hooks = replace(
        generation_hooks(session, members, explorer),
        records=None,
        snapshot=None,
        save=None,
    )
    before_exchange = {}

    def score(member):  # runs after training, before the exchange
        before_exchange[member.member_id] = (statistics_bytes(member), member.normalizer.returns.copy())
        return hooks.score(member)

    outcome = run_generations(
        MPI.COMM_SELF, members, config.owner, replace(hooks, score=score), LoopSettings(0, 1, transport), None
    )

    ((recipient, donor),) = outcome.last.donors.items()
    assert before_exchange[recipient][0] != before_exchange[donor][0]
    assert statistics_bytes(members[recipient]) == statistics_bytes(members[donor]) == before_exchange[donor][0]
    assert members[recipient].stats.tobytes() == members[donor].stats.tobytes()
    assert np.array_equal(members[recipient].buffer, members[donor].buffer)
    # the statistics travelled as the exploit state's second array, beside the weights
    state = members[donor].exploit_state()
    assert list(state) == ["weights", "normalization"] and state["normalization"] is members[donor].stats
    (exploit,) = outcome.last.exploits
    assert members[recipient].normalizer.gamma == exploit.new_hparams["gamma"]
    assert np.array_equal(members[recipient].normalizer.returns, before_exchange[recipient][1])
    # the next action is chosen from the current observation scaled by the donor's statistics
    normalizer = members[recipient].normalizer
    assert np.array_equal(members[recipient].model._last_obs, normalizer.normalize_obs(normalizer.get_original_obs()))
    for member in members.values():
        member.close()
    session.close()


def test_member_round_trips_its_statistics_bit_exactly(tmp_path):
    config = config_of(NORMALIZED)
    member = member_of(config, 3, config.agent.defaults)
    member.train(256)
    path = tmp_path / "member_3.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(member_payload(member, "run-a", 5, rng_state())))

    payload = ckpt.load_payload(path)  # weights_only=True
    assert payload["normalization"].dtype == torch.float64
    fresh = member_of(config, 3, config.agent.defaults)
    assert statistics_bytes(fresh) != statistics_bytes(member)
    fresh.restore(payload)
    assert statistics_bytes(fresh) == statistics_bytes(member)
    fresh.train(128)  # and it trains on from there, continuing the episodes in progress (no reset)
    assert statistics(fresh.normalizer)[0].count == statistics(member.normalizer)[0].count + 128

    plain = member_of(config_of(TINY_PENDULUM), 3, config.agent.defaults)
    with pytest.raises(ValueError, match="written with observation/reward normalisation, this run trains without"):
        plain.restore(payload)
    for each in (member, fresh, plain):
        each.close()


def test_evaluation_uses_the_statistics_frozen():
    config = config_of([*NORMALIZED, "--eval-episodes", "2"])
    member = member_of(config, 0, config.agent.defaults)
    evaluation = member.eval_env
    assert isinstance(evaluation, VecNormalize)
    assert (evaluation.training, evaluation.norm_obs, evaluation.norm_reward) == (False, True, False)
    for trained in (128, 256):
        member.train(trained)
        before = statistics_bytes(member)
        score = member.evaluate().score_test
        assert np.isfinite(score) and score < 0  # Pendulum's raw returns, not normalised rewards
        assert statistics_bytes(member) == before  # evaluation updated nothing of the member's
        # it saw the member's observation statistics of this moment, and did not update its copy
        obs_rms = member.normalizer.obs_rms
        evaluation = member.eval_env  # the one this evaluation made and played
        assert isinstance(evaluation, VecNormalize) and not evaluation.training
        assert evaluation.obs_rms is not obs_rms
        assert (evaluation.obs_rms.mean.tobytes(), evaluation.obs_rms.var.tobytes(), evaluation.obs_rms.count) == (
            obs_rms.mean.tobytes(),
            obs_rms.var.tobytes(),
            obs_rms.count,
        )
        observation = np.array([[0.3, -0.9, 4.0]], dtype=np.float32)
        assert np.array_equal(evaluation.normalize_obs(observation), member.normalizer.normalize_obs(observation))
    member.close()

"""Atari games (issue 39; real ale-py ROMs, real SB3, no MPI job): an Atari id gets zoo's preprocessing and
zoo's settings for PPO, A2C, DQN and QR-DQN; the CNN policies read its stacked frames; a member's games (the
emulator with its sticky actions' generator, the stacked frames) travel with it, so a restored member plays
on exactly as the one saved would have; bad ids are refused with the fix. Moves between ranks:
tests/mpi/ranks/test_migration.py; whole runs: tests/e2e/test_atari_runs.py."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from evo.config import ConfigError, parse_config
from tests.support import ROOT, member_of, need_atari

BREAKOUT = "ALE/Breakout-v5"  # a random policy's games end within a few hundred steps (5 lives)
TINY = {
    "ppo": ["n_envs:2", "n_steps:32", "n_epochs:1", "n_minibatches:2"],
    "a2c": ["n_envs:2", "n_steps:5"],
    "dqn": ["buffer_size:200", "learning_starts:40", "batch_size:32", "target_update_interval:250"],
    "qrdqn": ["buffer_size:200", "learning_starts:40", "batch_size:32", "target_update_interval:250"],
}
UPDATE = {"ppo": 64, "a2c": 10, "dqn": 48, "qrdqn": 48}
"""Env steps to a first update at the TINY settings (a rollout; past learning_starts)."""
ZOO = {  # zoo's `atari` entries (rl_zoo3 2.9's hyperparams/*.yml), as evo resolves them
    "ppo": {"n_envs": 8, "n_steps": 128, "n_epochs": 4, "batch_size": 256, "learning_rate": 2.5e-4, "clip_range": 0.1}
    | {"vf_coef": 0.5, "ent_coef": 0.01},
    "a2c": {"n_envs": 16, "ent_coef": 0.01, "vf_coef": 0.25, "rms_prop_tf_like": True, "rms_prop_eps": 1e-5},
    "dqn": {"n_envs": 1, "buffer_size": 100_000, "learning_rate": 1e-4, "batch_size": 32, "learning_starts": 100_000}
    | {"target_update_interval": 1000, "train_freq": 4, "gradient_steps": 1, "exploration_fraction": 0.1}
    | {"exploration_final_eps": 0.01},
    "qrdqn": {"n_envs": 1, "learning_starts": 50_000, "exploration_fraction": 0.025},
}


@pytest.fixture(autouse=True)
def _atari():
    need_atari()


def atari_config(algo="ppo", *extra, env_id=BREAKOUT):
    return parse_config(
        ["--algo", algo, "--env-id", env_id, "--num-agents", "1", "--hyperparams", *TINY[algo], *extra],
        world_size=1,
        check_run_dir=False,
    )


@pytest.mark.parametrize("algo", sorted(ZOO))
@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5"])
def test_an_atari_id_takes_zoos_atari_settings(algo, env_id):
    config = parse_config(["--algo", algo, "--env-id", env_id, "--num-agents", "1"], world_size=1, check_run_dir=False)
    agent = config.agent
    assert (agent.policy, agent.frame_stack) == ("nature", 4)
    resolved = {"n_envs": agent.n_envs, **agent.settings}
    assert {name: resolved[name] for name in ZOO[algo]} == ZOO[algo]
    # a -v5 id skips 4 frames of its own: zoo's AtariWrapper does it instead, the sticky actions kept
    assert config.env_kwargs == ({"frameskip": 1} if env_id.endswith("-v5") else {})


def test_the_env_is_zoos_preprocessing_of_the_game():
    from stable_baselines3.common.atari_wrappers import (
        AtariWrapper,
        EpisodicLifeEnv,
        MaxAndSkipEnv,
        StickyActionEnv,
        WarpFrame,
    )
    from stable_baselines3.common.monitor import Monitor

    from evo.sb3.envs import make_env
    from evo.sb3.envstate import layers

    venv = make_env(BREAKOUT, 2, seed=3, env_kwargs={"frameskip": 1}, frame_stack=4)
    try:
        assert venv.observation_space.shape == (84, 84, 4) and venv.reset().shape == (2, 84, 84, 4)
        chain = [type(layer) for layer in layers(venv.envs[0])]
        assert chain[0] is AtariWrapper and {EpisodicLifeEnv, MaxAndSkipEnv, WarpFrame, Monitor} <= set(chain)
        assert chain.index(Monitor) > chain.index(EpisodicLifeEnv)  # the Monitor records whole games, unclipped
        game = venv.envs[0].unwrapped
        assert game._frameskip == 1 and game.ale.getFloat("repeat_action_probability") == 0  # not the emulator's:
        sticky = [layer for layer in layers(venv.envs[0]) if isinstance(layer, StickyActionEnv)]  # plain data
        assert len(sticky) == 1 and sticky[0].action_repeat_probability == 0.25 and chain[-1] is type(game)
        assert chain.index(StickyActionEnv) > chain.index(MaxAndSkipEnv)  # drawn per frame, as -v5 does
    finally:
        venv.close()


@pytest.mark.parametrize("algo", sorted(TINY))
def test_the_cnn_policies_read_the_stacked_frames(algo):
    from evo.sb3.policies import ImpalaCNN, NatureCNNChannelsLast

    for policy, extractor in (("nature", NatureCNNChannelsLast), ("impala", ImpalaCNN)):
        member = member_of(atari_config(algo, f"policy:{policy}"), 0)
        try:
            extractors = [module for module in member.model.policy.modules() if isinstance(module, extractor)]
            assert extractors and member.policy_name() == "CnnPolicy"
            assert member.model.observation_space.shape == (4, 84, 84)  # channels first, as SB3 transposes them
            member.train(UPDATE[algo])  # an update or a few, on batches of those frames
            assert member.env_steps >= UPDATE[algo] and member.model._n_updates > 0
        finally:
            member.close()


@pytest.mark.parametrize("algo", sorted(TINY))
def test_the_nature_policy_is_sb3s_cnn_policy_layer_for_layer(algo):
    """zoo's Atari network is SB3's own CnnPolicy (no hidden layers between the Nature CNN and the heads: SB3 gives
    NatureCNN none, by an ``==`` test evo's channels-last subclass fails); evo's ``nature`` is it, layer for layer."""
    from evo.sb3.learner import learner_class
    from evo.sb3.stock import stock_class

    member = member_of(parse_config(["--algo", algo, "--env-id", BREAKOUT, "--num-agents", "1"], world_size=1), 0)
    try:
        ours = [(name, tuple(p.shape)) for name, p in member.model.policy.named_parameters()]
        model = member.model
        sb3 = stock_class(learner_class(algo).algorithm).policy_aliases["CnnPolicy"]
        theirs = sb3(model.observation_space, model.action_space, lambda _: 1e-4)
        assert ours == [(name, tuple(p.shape)) for name, p in theirs.named_parameters()]
        assert not any(isinstance(module, torch.nn.Tanh) for module in member.model.policy.modules())
    finally:
        member.close()


def test_a2c_on_atari_uses_rmsprop_tf_like_whose_state_is_in_the_flat_buffer():
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    member = member_of(atari_config("a2c", "rms_prop_tf_like:true"), 0)
    try:
        optimizer = member.model.policy.optimizer
        assert type(optimizer) is RMSpropTFLike and optimizer.defaults["eps"] == 1e-5
        averages = [optimizer.state[p]["square_avg"] for group in optimizer.param_groups for p in group["params"]]
        assert all(torch.equal(average, torch.ones_like(average)) for average in averages)  # TF's start, not 0
        buffer = torch.from_numpy(member.buffer)
        start, end = buffer.data_ptr(), buffer.data_ptr() + buffer.numel() * 4
        assert all(start <= average.data_ptr() < end for average in averages)  # they travel with the weights
        member.train(40)
        assert any(not torch.equal(average, torch.ones_like(average)) for average in averages)
    finally:
        member.close()


def play(model, actions: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Step ``model``'s training envs through ``actions`` (steps x envs): what each step returned."""
    return [tuple(np.copy(part) for part in model.env.step(step_actions)[:3]) for step_actions in actions]


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_restored_member_plays_on_exactly_as_the_saved_one(algo):
    """The games in progress, their sticky actions' generator inside the emulator and the stacked frames
    travel in the member's state: the restored member's envs return the same frames, rewards and game ends
    as the saved member's for the same actions (a fresh member's, another's, or a member that kept only the
    weights would not)."""
    config = atari_config(algo)
    saved, restored = member_of(config, 0), member_of(config, 0)
    try:
        saved.train(96)
        restored.train(24)  # its own games elsewhere, until it becomes the saved member
        payload = saved.member_state()
        assert payload["envs"] is not None and "frames" in payload["envs"]
        assert restored.restore(payload) is None
        np.testing.assert_array_equal(restored.model._last_obs, saved.model._last_obs)
        actions = np.random.default_rng(0).integers(0, saved.model.action_space.n, size=(300, saved.model.n_envs))
        expected, played = play(saved.model, actions), play(restored.model, actions)
        assert sum(float(np.abs(step[1]).sum()) for step in expected) > 0 or any(step[2].any() for step in expected)
        for step, (want, got) in enumerate(zip(expected, played, strict=True)):
            for part, name in zip(range(3), ("frames", "rewards", "ends"), strict=True):
                np.testing.assert_array_equal(got[part], want[part], err_msg=f"{name} differ at step {step}")
    finally:
        saved.close()
        restored.close()


def test_an_unknown_game_is_refused_with_the_closest_ids():
    with pytest.raises(ConfigError) as refused:
        parse_config(["--env-id", "ALE/Breakot-v5"], world_size=1, check_run_dir=False)
    assert "'ALE/Breakot-v5'" in str(refused.value) and "Did you mean 'ALE/Breakout-v5'" in str(refused.value)


@pytest.mark.parametrize("blocked", ["cv2"])  # ale-py missing: on every rank, tests/e2e/test_atari_runs.py
def test_atari_without_the_extra_is_refused_naming_the_install(blocked, tmp_path):
    """As where the extra is not installed (tests/without.py makes the package unimportable): exit 2 with
    the install command, before anything is written."""
    run_dir = tmp_path / "run"
    argv = ["pbt_rl_truct.py", "--env-id", "ALE/Pong-v5", "--run-dir", str(run_dir)]
    result = subprocess.run(
        [sys.executable, "tests/without.py", blocked, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "make install EXTRAS=atari" in result.stderr and "ALE/Pong-v5" in result.stderr
    assert not run_dir.exists()


def test_a_video_of_an_atari_member_is_a_whole_game_with_its_frames_stacked(tmp_path):
    """--video plays the member on its own stacked frames until the game ends (all its lives: the Monitor's
    episode), not until the first life lost ends the learner's episode; its return is the game's, unclipped."""
    pytest.importorskip("av", reason="--video is the video extra: make install EXTRAS=video")
    from evo.tools.video import record_member, video_env

    member = member_of(atari_config("ppo"), 0)
    try:
        env = video_env(BREAKOUT, 7, {"frameskip": 1}, frame_stack=4)
        observation, first_life = env.reset(), 0
        while True:  # the steps until the first life is lost
            observation, _, dones, _ = env.step(member.model.predict(observation, deterministic=True)[0])
            first_life += 1
            if dones[0]:
                break
        env.close()
        recording = record_member(member, tmp_path / "game.mp4", seed=7, max_steps=5000)
        assert recording.whole_episode and recording.frames > first_life
    finally:
        member.close()

"""evo.tools.video with the real renderers (pygame, MuJoCo on EGL, Procgen's frames) and real files read
back with imageio: frame count and size, a GIF and an MP4, the policy fed normalised observations
while the frames come from the raw env, an episode that ends before the step limit, and the bad
inputs refused with their fix. Skipped, with the reason, where the video extra or a renderer is
missing (CI installs both: make install EXTRAS=mujoco,video)."""

import ctypes

import numpy as np
import pytest

from evo.config import parse_config
from evo.tools.video import VideoError, check_video, record_member, record_video, video_env, video_format
from tests.support import need_mujoco

EXTRA_MISSING = "the video extra is missing: make install EXTRAS=video"
pytest.importorskip("imageio", reason=EXTRA_MISSING)
pytest.importorskip("av", reason=EXTRA_MISSING)
pytest.importorskip("pygame", reason=EXTRA_MISSING)

import imageio.v3 as iio  # noqa: E402

from tests.support import member_of  # noqa: E402

TINY = ["--hyperparams", "n_envs:1", "n_steps:64", "batch_size:64", "n_epochs:1"]


def frames_of(path) -> np.ndarray:
    """Every frame of a video file, (frames, height, width, 3)."""
    return iio.imread(path, index=None, **({"plugin": "pyav"} if path.suffix == ".mp4" else {}))


def member_for(env_id: str, *argv: str):
    config = parse_config(["--env-id", env_id, *TINY, *argv], check_run_dir=False)
    return member_of(config, 0)


class Spy:
    """The member's model as record_video calls it, keeping every observation the policy is given."""

    def __init__(self, model):
        self.model, self.observations = model, []

    def predict(self, observation, deterministic=True):
        self.observations.append(np.array(observation))
        return self.model.predict(observation, deterministic=deterministic)


def test_a_pendulum_member_as_a_gif_policy_on_normalised_observations_frames_raw(tmp_path):
    """Also: a link planted at the name the video was once built under (``.<stem>.partial<suffix>``) is
    never written through."""
    member = member_for("Pendulum-v1", "normalize:true")
    statistics = member.normalizer.obs_rms
    statistics.mean[:] = 100.0  # far outside Pendulum's observations (|x| <= 8): every one scales to -clip
    statistics.var[:] = 1.0
    spy, env = Spy(member.model), video_env("Pendulum-v1", 7, normalizer=member.normalizer)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "videos" / "pendulum.gif"
    path.parent.mkdir()
    planted = path.with_name(".pendulum.partial.gif")
    planted.symlink_to(victim)
    assert record_video(spy, env, path, max_steps=24).frames == 24
    env.close()

    frames = frames_of(path)
    assert frames.shape == (24, 500, 500, 3)  # Pendulum's own 500x500 picture, one frame per action
    assert len(spy.observations) == 24
    assert np.all(np.concatenate(spy.observations) == -10.0)  # normalised by the member's statistics, clipped
    assert frames.std() > 0 and not np.array_equal(frames[0], frames[-1])  # the raw env is drawn, and moves
    assert statistics.mean.tolist() == [100.0] * 3 and member.normalizer.obs_rms is statistics  # untouched
    assert sorted(path.parent.iterdir()) == [planted, path]  # no partial file left
    assert victim.read_bytes() == b"precious"
    member.close()


def test_a_halfcheetah_member_as_an_mp4_through_mujocos_offscreen_renderer(tmp_path):
    need_mujoco()
    try:
        check_video(tmp_path / "cheetah.mp4", "HalfCheetah-v5")
    except VideoError as error:
        pytest.skip(f"MuJoCo's off-screen renderer is missing here: {error}")
    member = member_for("HalfCheetah-v5", "--env-kwargs", "width:96", "height:64")
    assert member.normalizer is not None  # zoo's HalfCheetah settings normalise
    path = tmp_path / "cheetah.mp4"
    assert record_member(member, path, seed=3, max_steps=20).frames == 20
    frames = frames_of(path)
    assert frames.shape == (20, 64, 96, 3)  # the env's width and height: MuJoCo never ends an episode early
    assert frames.std() > 10  # a picture (the floor's checks), not a blank buffer
    assert iio.immeta(path, plugin="pyav")["fps"] == 20  # HalfCheetah's render_fps
    member.close()


def episode_length(model, env_id: str, seed: int, max_steps: int) -> int | None:
    """How many actions ``model`` takes in the episode of ``seed``, played without a picture; None
    if it lasts ``max_steps`` or more."""
    env = video_env(env_id, seed)
    observation = env.reset()
    for step in range(1, max_steps):
        action, _ = model.predict(observation, deterministic=True)
        observation, _, dones, _ = env.step(action)
        if dones[0]:
            env.close()
            return step
    env.close()
    return None


def test_a_procgen_episode_ends_the_video_at_its_end_frames_the_observation_enlarged(tmp_path):
    from stable_baselines3 import PPO

    model = PPO("CnnPolicy", video_env("bigfish", 0), n_steps=64, batch_size=64, seed=0, device="cpu")
    max_steps = 100
    # an episode the untrained fish loses before max_steps (seed 3: 26 steps with torch 2.13)
    seed, length = next((s, n) for s in (3, 2, 4, 1, 5) if (n := episode_length(model, "bigfish", s, max_steps)))
    env, path = video_env("bigfish", seed), tmp_path / "bigfish.mp4"
    recording = record_video(model, env, path, max_steps=max_steps)
    assert (recording.frames, recording.whole_episode) == (length, True)  # a frame per action, none past the end
    env.close()
    assert frames_of(path).shape == (length, 256, 256, 3)  # 64x64 observations, each pixel 4x4
    assert iio.immeta(path, plugin="pyav")["fps"] == 15


def test_formats_are_chosen_by_suffix_and_others_refused_with_the_ones_that_work(tmp_path):
    assert video_format("a/b.mp4") == "mp4" and video_format("B.GIF") == "gif"
    for bad in ("agent.avi", "agent", "agent.mp4.txt"):
        with pytest.raises(VideoError, match=r"must end in \.mp4 .*\.gif"):
            video_format(bad)
    with pytest.raises(VideoError) as caught:
        check_video(tmp_path / "missing" / "agent.webm", "Pendulum-v1")
    assert "not '.webm'" in str(caught.value) and f"the folder {tmp_path / 'missing'} does not exist" in str(
        caught.value
    )
    check_video(tmp_path / "agent.gif", "CartPole-v1")  # all there: no error


def test_a_renderer_that_cannot_work_here_is_named_with_its_package(tmp_path, monkeypatch):
    need_mujoco()
    monkeypatch.setenv("MUJOCO_GL", "glfw")  # a window's renderer: no display to open
    with pytest.raises(VideoError, match="MUJOCO_GL='glfw' cannot render without a display: unset it"):
        check_video(tmp_path / "cheetah.mp4", "HalfCheetah-v5")
    try:
        ctypes.CDLL("libOSMesa.so.8")
        pytest.skip("libOSMesa is installed here: its absence cannot be shown")
    except OSError:
        pass
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    with pytest.raises(VideoError, match=r"MUJOCO_GL=osmesa needs libOSMesa.so.8 .* apt-get install -y libosmesa6"):
        check_video(tmp_path / "cheetah.mp4", "HalfCheetah-v5")

"""A picture of the agent: one episode of a member recorded to an MP4 or a GIF file.

Where the frames come from:

- **Procgen**: the observation itself, the 64x64 RGB image the agent acts on (procgen's own
  ``render_mode="rgb_array"`` draws a separate 512x512 picture at extra cost; the observation is
  what the policy saw), enlarged without smoothing to 256x256 (:data:`PROCGEN_SCALE`).
- **MuJoCo** (HalfCheetah-v5, ...): gymnasium's ``rgb_array`` through MuJoCo's off-screen renderer,
  on EGL by default (``MUJOCO_GL=egl``). Mesa's EGL renders in software (llvmpipe) where there is
  no GPU and on the GPU where there is one; OSMesa (``MUJOCO_GL=osmesa``, Debian's libosmesa6) is
  used only if you set it, Mesa 25.1 having dropped it. The renderer is checked only when a video
  is asked for: a normal run never needs it.
- **classic control** (Pendulum-v1, CartPole-v1, ...): gymnasium's ``rgb_array``, drawn by pygame.

The Python packages come with the optional extra ``video`` (``make install EXTRAS=video``):
pygame, imageio (which writes the files: GIF through Pillow, MP4 through PyAV's H.264 encoder,
whose wheel carries FFmpeg's libraries). imageio-ffmpeg is not used: procgen's gym3 pins it below
0.4, and that old release no longer imports (it needs setuptools' removed ``pkg_resources``).

A policy trained behind observation normalisation sees observations scaled by the member's
statistics, frozen (:func:`video_env` wraps the raw env as the member's evaluation env is wrapped),
while the frames come from the raw env underneath. One frame is written per action the agent
takes, showing what it acted on: ``max_steps`` frames, fewer if the episode ends first (the
vectorised env resets at the end of an episode, so its last state is not drawn).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

from evo.config.envnames import is_mujoco, procgen_game
from evo.rundir.checkpoint import atomic_file

logger = logging.getLogger(__name__)

FORMATS = {".mp4": "MP4 (H.264)", ".gif": "GIF"}
"""The file suffixes a video may have, and what each writes."""
EXTRA = "make install EXTRAS=video (or pip install 'evo[video]')"
PROCGEN_SCALE = 4
"""Procgen's 64x64 frames are written at 256x256, each pixel a 4x4 square."""
PROCGEN_FPS = 15
"""As gym3's viewer (procgen's interactive player) steps: 15 a second."""
MUJOCO_RENDERERS = {
    "egl": ("libEGL.so.1", "libegl1 libgl1-mesa-dri"),
    "osmesa": ("libOSMesa.so.8", "libosmesa6"),
}
"""MUJOCO_GL's off-screen back-ends: the library each loads and the Debian/Ubuntu packages providing it."""


class Recording(NamedTuple):
    """What :func:`record_video` wrote."""

    frames: int
    episode_return: float
    """The sum of the env's raw rewards over the steps recorded."""
    whole_episode: bool
    """Whether the episode ended within the steps recorded."""

    def __str__(self) -> str:
        length = "the whole episode" if self.whole_episode else f"the first {self.frames} steps"
        return f"{self.frames} frames, {length}, return {self.episode_return:.10g}"


class VideoError(ValueError):
    """A video cannot be made as asked (a format, a folder, a package or a renderer): the message
    names what is missing or wrong and the fix; the tools exit with status 2 on it."""


# --- what is checked before any member is loaded ------------------------------------------


def video_format(path: str | os.PathLike) -> str:
    """The format named by ``path``'s suffix (``.mp4`` or ``.gif``, any case), or :class:`VideoError`."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(f"{name} ({what})" for name, what in FORMATS.items())
        raise VideoError(f"--video {path}: a video file must end in {known}, not {suffix or 'no suffix'!r}")
    return suffix[1:]


def check_video(path: str | os.PathLike, env_id: str) -> None:
    """Everything a video of ``env_id`` at ``path`` needs, checked at once before any work:
    the suffix, the folder, the Python packages, and for MuJoCo the off-screen renderer (which
    this selects, see :func:`select_mujoco_renderer`). Raises :class:`VideoError` with the fixes."""
    problems = []
    try:
        fmt = video_format(path)
    except VideoError as error:
        problems.append(str(error))
        fmt = None
    folder = Path(path).parent
    if not folder.is_dir():
        problems.append(f"--video {path}: the folder {folder} does not exist")
    missing = [name for name in _packages(fmt, env_id) if importlib.util.find_spec(name) is None]
    if missing:
        problems.append(f"a video needs the Python package(s) {', '.join(missing)}: {EXTRA}")
    if procgen_game(env_id) is None and _is_mujoco(env_id):
        try:
            select_mujoco_renderer()
        except VideoError as error:
            problems.append(str(error))
    if problems:
        raise VideoError("; ".join(problems))


def _packages(fmt: str | None, env_id: str) -> list[str]:
    """The importable names a video in ``fmt`` of ``env_id`` needs."""
    needed = ["imageio"] + (["av"] if fmt == "mp4" else ["PIL"] if fmt == "gif" else [])
    if procgen_game(env_id) is None and _drawn_by_pygame(env_id):
        needed.append("pygame")
    return needed


def _drawn_by_pygame(env_id: str) -> bool:
    """Whether gymnasium draws ``env_id`` with pygame (classic control, Box2D, toy text)."""
    import gymnasium

    try:
        entry_point = gymnasium.spec(env_id.rpartition(":")[2]).entry_point
    except gymnasium.error.Error:
        return False
    pygame_families = ("classic_control", "box2d", "toy_text", "phys2d")
    return isinstance(entry_point, str) and any(f"gymnasium.envs.{f}" in entry_point for f in pygame_families)


def _is_mujoco(env_id: str) -> bool:
    import gymnasium

    try:
        return is_mujoco(env_id)
    except gymnasium.error.Error:  # not registered: the env's own check reports it
        return False


def select_mujoco_renderer() -> str:
    """MuJoCo's off-screen back-end for this process: ``MUJOCO_GL`` if set (egl or osmesa), else
    EGL. Sets ``MUJOCO_GL`` (gymnasium reads it when it first renders) and opens one context to
    prove it works; :class:`VideoError` naming the system package if it does not."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower() or "egl"
    if chosen not in MUJOCO_RENDERERS:
        raise VideoError(
            f"MUJOCO_GL={chosen!r} cannot render without a display: unset it (EGL is used) or set one of "
            f"{', '.join(MUJOCO_RENDERERS)}"
        )
    library, packages = MUJOCO_RENDERERS[chosen]
    fix = (
        f"install the system package(s) {packages} (Debian/Ubuntu: apt-get install -y {packages}; "
        f"{EXTRA.split(' (')[0]} does it when run as root)"
    )
    try:
        ctypes.CDLL(library)
    except OSError as error:
        raise VideoError(f"MuJoCo's off-screen renderer MUJOCO_GL={chosen} needs {library} ({error}): {fix}") from None
    os.environ["MUJOCO_GL"] = chosen
    try:
        _open_context(chosen)
    except Exception as error:  # PyOpenGL and the EGL/OSMesa bindings raise many kinds
        raise VideoError(f"MuJoCo's off-screen renderer MUJOCO_GL={chosen} does not start ({error!r}): {fix}") from None
    return chosen


def _open_context(backend: str) -> None:
    """Open and free one tiny GL context on ``backend``, as gymnasium's renderer will."""
    if backend == "egl":
        from mujoco.egl import GLContext
    else:
        from mujoco.osmesa import GLContext
    context = GLContext(8, 8)
    try:
        context.make_current()
    finally:
        context.free()


# --- the env the video is made on ------------------------------------------------------------


def video_env(
    env_id: str,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    normalizer=None,
    distribution_mode: str = "easy",
    num_levels: int = 0,
    start_level: int = 0,
    frame_stack: int = 0,
    wrappers: Sequence = (),
):
    """One env of ``env_id`` that can be drawn, seeded with ``seed``: gymnasium's built with
    ``render_mode="rgb_array"`` (``env_kwargs`` too, e.g. MuJoCo's ``width`` and ``height``),
    Procgen's on the levels given; ``frame_stack`` frames stacked and zoo's ``wrappers`` as the member saw
    them. With a
    member's training ``normalizer`` (its VecNormalize), the env is wrapped as the member's evaluation
    env: observations scaled by a frozen copy of the statistics, raw rewards."""
    from evo.sb3.envs import make_env
    from evo.sb3.normalize import freeze_into, frozen

    kwargs = dict(env_kwargs or {})
    if procgen_game(env_id) is None:
        kwargs["render_mode"] = "rgb_array"
        # pygame draws off-screen: no display to open (SDL would complain on stderr), no greeting
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    env = make_env(
        env_id, 1, seed, distribution_mode, num_levels, start_level, env_kwargs=kwargs, frame_stack=frame_stack,
        wrappers=wrappers,
    )  # fmt: skip
    if normalizer is not None and normalizer.norm_obs:
        env = frozen(env, {"norm_obs": True, "norm_reward": False})
        freeze_into(normalizer, env)
    return env


# --- recording --------------------------------------------------------------------------------


def record_video(
    model,
    env,
    path: str | os.PathLike,
    max_steps: int = 1000,
    deterministic: bool = True,
    fps: float | None = None,
) -> Recording:
    """Play one episode of ``model`` (anything with SB3's ``predict``) on ``env`` (a one-env VecEnv
    from :func:`video_env`) for at most ``max_steps`` steps and write it to ``path`` (``.mp4`` or
    ``.gif``; ``fps`` default: the env's ``render_fps``). Returns the frames written and the episode's
    return (raw rewards).

    The file appears whole or not at all: it is written beside ``path`` under a temporary name
    (``evo.rundir.checkpoint.atomic_file``) and renamed at the end. A GIF shows identical consecutive
    frames as one, shown longer (Pillow merges them), so reading one back may give fewer frames than were
    written; an MP4 keeps them all."""
    fmt = video_format(path)
    if env.num_envs != 1:
        raise ValueError(f"record_video plays one env, got a VecEnv of {env.num_envs}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    path = Path(path)
    procgen = _is_procgen(env)
    fps = float(fps or (PROCGEN_FPS if procgen else env.get_attr("metadata")[0].get("render_fps") or PROCGEN_FPS))
    scale = PROCGEN_SCALE if procgen else 1
    frames, episode_return, ended = 0, 0.0, False
    with atomic_file(path) as handle, _writer(handle, fmt, fps) as write:
        observation = env.reset()
        while frames < max_steps and not ended:
            write(_enlarged(_frame(env), scale))
            frames += 1
            action, _ = model.predict(observation, deterministic=deterministic)
            observation, rewards, dones, infos = env.step(action)
            episode_return += float(rewards[0])
            # the episode is the Monitor's: a whole Atari game (not one of its lives, which ends the
            # learner's episode), its return unclipped
            ended = bool(dones[0]) and "episode" in infos[0]
            if ended:
                episode_return = float(infos[0]["episode"]["r"])
    recording = Recording(frames, episode_return, ended)
    logger.info("video at %g fps written to %s: %s", fps, path, recording)
    return recording


def record_member(
    member,
    path: str | os.PathLike,
    seed: int,
    max_steps: int = 1000,
    start_level: int | None = None,
    num_levels: int | None = None,
) -> Recording:
    """:func:`record_video` of an SB3 member (evo.sb3.learner.SB3Learner, as ``evo.tools.saved.load``
    gives it) on a fresh env of its own (kwargs and normalisation) seeded with ``seed``; Procgen on
    levels ``start_level`` + ``num_levels`` (default: its evaluation levels). Nothing of the member
    changes."""
    settings = member.setup.env
    env = video_env(
        settings.env_id,
        seed,
        settings.env_kwargs,
        member.normalizer,
        settings.distribution_mode,
        num_levels=settings.eval_num_levels if num_levels is None else num_levels,
        start_level=settings.eval_start_level if start_level is None else start_level,
        frame_stack=member.agent.frame_stack,
        wrappers=member.agent.env_wrapper,
    )
    try:
        return record_video(member.model, env, path, max_steps)
    finally:
        env.close()


def _frame(env) -> np.ndarray:
    import gymnasium

    try:
        images = env.get_images()
    except gymnasium.error.DependencyNotInstalled as error:
        raise VideoError(f"{error}; a video needs evo's video extra: {EXTRA}") from None
    frame = images[0] if images else None
    if frame is None:
        raise VideoError("the env drew no frame: build it with render_mode='rgb_array' (video_env does)")
    return np.asarray(frame, dtype=np.uint8)


def _is_procgen(env) -> bool:
    from evo.sb3.envs import ProcgenVecEnv

    return isinstance(env.unwrapped, ProcgenVecEnv)


def _enlarged(frame: np.ndarray, scale: int) -> np.ndarray:
    """``frame`` with each pixel a ``scale`` x ``scale`` square."""
    if scale == 1:
        return frame
    return np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)


@contextmanager
def _writer(file: IO[bytes], fmt: str, fps: float) -> Iterator[Callable[[np.ndarray], None]]:
    """A function writing one frame at a time to ``file``: MP4 frames streamed to the encoder;
    a GIF's kept until the end (Pillow writes a GIF whole)."""
    import imageio.v3 as iio

    if fmt == "gif":
        frames: list[np.ndarray] = []
        yield frames.append
        if frames:
            iio.imwrite(file, np.stack(frames), extension=".gif", duration=1000.0 / fps, loop=0)
        return
    with iio.imopen(file, "w", plugin="pyav", extension=".mp4", container="mp4") as video:
        video.init_video_stream("libx264", fps=fps)
        yield lambda frame: video.write_frame(_even(frame))


def _even(frame: np.ndarray) -> np.ndarray:
    """H.264's 4:2:0 colour needs an even height and width: an odd one loses its last row or column."""
    height, width = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2
    return frame[:height, :width]


# --- --video on the tools (evo-export, evo-evaluate) --------------------------------------------


def add_video_arguments(parser) -> None:
    """``--video FILE`` and ``--video-steps N`` on a tool's argparse parser."""
    parser.add_argument(
        "--video",
        type=Path,
        default=None,
        metavar="FILE",
        help="also record one deterministic episode of the member to FILE, .mp4 or .gif (the video extra: "
        f"{EXTRA}; MuJoCo also needs the system's EGL, libegl1)",
    )
    parser.add_argument(
        "--video-steps",
        type=int,
        default=1000,
        metavar="N",
        help="the video's length at most, in env steps (default 1000; an episode that ends sooner ends it)",
    )


def video_problems(args, run) -> list[str]:
    """Every problem with ``--video``/``--video-steps`` for the saved ``run`` (evo.tools.saved.SavedRun),
    each with its fix; none without ``--video``. For MuJoCo this selects and starts the renderer."""
    if args.video is None:
        return []
    problems = []
    if args.video_steps < 1:
        problems.append(f"--video-steps {args.video_steps}: give at least 1")
    if Path(args.video).resolve().is_relative_to(Path(run.run_dir).resolve()):
        problems.append(f"--video {args.video}: inside the run directory, which stays untouched; give a path outside")
    try:
        check_video(args.video, run.config.env_id)
    except VideoError as error:
        problems.append(str(error))
    return problems


def record_saved(
    prog: str, run, chosen, path: Path, seed: int, max_steps: int, start_level: int = 0, num_levels: int = 0
) -> int:
    """A tool's ``--video``: member ``chosen`` (an evo.tools.saved.MemberFile of ``run``) loaded and recorded
    on env seed ``seed`` (Procgen: levels ``start_level`` + ``num_levels``, 0 + 0 the whole
    distribution, as evo-evaluate plays them). Returns the exit status: 0, or 2 with the message on
    stderr if the video cannot be made after all."""
    from evo.tools.saved import load

    member = load(run, chosen)
    try:
        recording = record_member(member, path, seed, max_steps, start_level=start_level, num_levels=num_levels)
    except VideoError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    finally:
        member.close()
    print(f"video of member {chosen.label}, env seed {seed}: {path} ({recording})")
    return 0

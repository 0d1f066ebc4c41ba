"""--video on evo-evaluate and evo-export (their main, evo.tools.video) on a real run made in this process: the
file is written outside the run with the frames asked for, evo-evaluate's video is the first of its fresh episodes
(the same return), and a bad --video (suffix, place, length) exits with status 2 before anything is written.
Moved down from the e2e tier (the run was made under mpiexec; nothing here crosses a process boundary). The
renderers themselves: tests/unit/tools/test_video.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from tests.support import run_in_process, tree_digest

pytest.importorskip("imageio", reason="the video extra is missing: make install EXTRAS=video")
pytest.importorskip("av", reason="the video extra is missing: make install EXTRAS=video")
pytest.importorskip("pygame", reason="the video extra is missing: make install EXTRAS=video")

import imageio.v3 as iio  # noqa: E402

PENDULUM = ["--env-id", "Pendulum-v1", "--agent-training-steps", "128"]
PENDULUM += ["--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1", "normalize:true"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished PPO run on Pendulum-v1 with normalisation: 2 members, 1 generation, made in this process."""
    run_dir = tmp_path_factory.mktemp("video") / "run"
    flags = ["--num-agents", "2", "--total-generations", "1", "--run-dir", str(run_dir), "--seed", "3"]
    assert run_in_process([*PENDULUM, *flags, "--tb-writer", "False"]) == 0
    return run_dir


def test_evaluate_records_its_first_fresh_episode_and_export_the_exported_member(run_dir, tmp_path, capsys):
    before = tree_digest(run_dir)
    video, record = tmp_path / "member.mp4", tmp_path / "fresh.json"
    flags = ["--member", "1", "--episodes", "1", "--json", str(record), "--video", str(video), "--video-steps", "200"]
    assert evaluate_tool.main([str(run_dir), *flags]) == 0
    printed = capsys.readouterr().out
    line = re.search(r"video of member 1, env seed (\d+): .* \(200 frames, the whole episode, return (\S+)\)", printed)
    assert line, printed
    fresh = json.loads(record.read_text())
    assert int(line[1]) == fresh["seed"]
    assert float(line[2]) == pytest.approx(fresh["members"][0]["returns"][0], rel=1e-8)  # the same episode
    assert iio.imread(video, plugin="pyav", index=None).shape == (200, 500, 500, 3)  # Pendulum: 200 steps

    gif = tmp_path / "exported.gif"
    out = tmp_path / "logs"
    assert export_tool.main([str(run_dir), "--out", str(out), "--video", str(gif), "--video-steps", "12"]) == 0
    assert "12 frames, the first 12 steps" in capsys.readouterr().out
    assert iio.imread(gif, index=None).shape == (12, 500, 500, 3)
    assert list(out.glob("ppo/Pendulum-v1_1/Pendulum-v1.zip"))
    assert tree_digest(run_dir) == before  # nothing of the run changed


@pytest.mark.parametrize("tool", [evaluate_tool, export_tool], ids=["evaluate", "export"])
def test_a_bad_video_exits_2_with_every_fix_and_writes_nothing(tool, run_dir, tmp_path, capsys):
    before = tree_digest(run_dir)
    out_flags = ["--out", str(tmp_path / "logs")] if tool is export_tool else []
    for flags, expected in [
        (["--video", str(tmp_path / "agent.avi")], "must end in .mp4 (MP4 (H.264)), .gif (GIF), not '.avi'"),
        (["--video", str(run_dir / "agent.mp4")], "inside the run directory, which stays untouched"),
        (["--video", str(tmp_path / "agent.gif"), "--video-steps", "0"], "--video-steps 0: give at least 1"),
    ]:
        assert tool.main([str(run_dir), *out_flags, *flags]) == 2
        assert expected in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no video, no export
    assert tree_digest(run_dir) == before

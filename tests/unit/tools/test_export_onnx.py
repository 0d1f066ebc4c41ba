"""evo-export --format onnx on a real tiny CartPole run made in this process (PPO's MLP, with observation
normalisation): onnxruntime, fed observations prepared as the export's JSON states (its mean, var, epsilon and
clip on the env's raw observations), gives the actions SB3's own ``predict`` of the member gives and its action
probabilities; a missing onnxruntime is refused with the install command, nothing written. The IMPALA CNN on
Procgen frames: tests/unit/tools/test_export_impala.py."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from evo.tools import export as export_tool
from tests.support import need_onnx, run_in_process, tree_digest

TINY_CARTPOLE = ["--env-id", "CartPole-v1", "--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32"]
TINY_CARTPOLE += ["n_epochs:1", "normalize:true", "--num-agents", "1", "--total-generations", "1"]
TINY_CARTPOLE += ["--agent-training-steps", "256", "--strategy", "none", "--tb-writer", "False"]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cartpole") / "run"
    assert run_in_process([*TINY_CARTPOLE, "--run-dir", str(run_dir)]) == 0
    return run_dir


def recorded(member, steps: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """The env's raw observations and the normalised ones the member's policy receives, over ``steps`` steps
    of its own training envs played by its deterministic actions (the statistics not updated)."""
    env, normalizer = member.model.env, member.normalizer
    normalizer.training = False
    obs, raw, seen = env.reset(), [], []
    for _ in range(steps):
        raw.append(normalizer.get_original_obs())
        seen.append(obs)
        obs, _, _, _ = env.step(member.model.predict(obs, deterministic=True)[0])
    return np.concatenate(raw), np.concatenate(seen)


def test_cartpole_onnx_acts_as_the_member_on_observations_prepared_as_stated(cartpole_run, tmp_path, capsys):
    need_onnx()
    import onnxruntime

    from evo.tools.saved import choose, load, open_run

    run_dir = cartpole_run
    before = tree_digest(run_dir)
    capsys.readouterr()
    assert export_tool.main([str(run_dir), "--out", str(tmp_path / "out"), "--format", "onnx"]) == 0
    assert "onnxruntime.InferenceSession" in capsys.readouterr().out
    assert tree_digest(run_dir) == before
    experiment = tmp_path / "out" / "ppo" / "CartPole-v1_1"
    assert sorted(p.name for p in experiment.iterdir()) == ["CartPole-v1.onnx", "CartPole-v1.onnx.json"]
    stated = json.loads((experiment / "CartPole-v1.onnx.json").read_text())
    assert stated["check"]["actions_equal"] and stated["action_space"] == {
        "type": "Discrete",
        "n": 2,
        "postprocessing": "none: action is the env's",
    }
    assert stated["preprocessing"]["input"]["shape"] == [None, 4] and stated["preprocessing"]["transpose"] is None
    normalize = stated["preprocessing"]["normalize"]

    session = onnxruntime.InferenceSession(str(experiment / "CartPole-v1.onnx"), providers=["CPUExecutionProvider"])
    run = open_run(run_dir)
    member = load(run, choose(run, "0"), precision="fp32")
    try:
        raw, seen = recorded(member)
        prepared = np.clip(
            (raw - np.asarray(normalize["mean"])) / np.sqrt(np.asarray(normalize["var"]) + normalize["epsilon"]),
            -normalize["clip_obs"],
            normalize["clip_obs"],
        ).astype(np.float32)
        assert prepared == pytest.approx(seen, abs=1e-5)  # the JSON states what the env's observations go through
        logits, actions = session.run(["logits", "action"], {"obs": prepared})
        assert np.array_equal(actions, member.model.predict(seen, deterministic=True)[0])
        assert len(set(actions.tolist())) == 2  # both actions taken: the check is not of a constant
        policy = member.model.policy
        probs = policy.get_distribution(policy.obs_to_tensor(seen)[0]).distribution.probs.detach().numpy()
        softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
        assert softmax / softmax.sum(axis=1, keepdims=True) == pytest.approx(probs, abs=1e-5)
    finally:
        member.close()


def test_format_onnx_without_onnxruntime_is_refused_with_the_install_command(
    cartpole_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed: find_spec gives None
    capsys.readouterr()
    assert export_tool.main([str(cartpole_run), "--out", str(tmp_path / "out"), "--format", "onnx"]) == 2
    message = capsys.readouterr().err
    # onnxruntime alone where onnx is installed; both on a plain install (a normal user's, CI's first phase)
    assert re.search(r"--format onnx: (onnx and )?onnxruntime not installed", message) and "EXTRAS=onnx" in message
    assert "Traceback" not in message and not (tmp_path / "out").exists()

"""evo-export of a member with the IMPALA CNN (evo's own network class) on a real tiny Procgen run made in this
process (one member, one generation of 64 env steps): the export writes the network's module beside the zip
(``bigfish_impala.py``, a copy of evo/sb3/impala.py), the zip names that module's class, and SB3's ``PPO.load``
with the experiment folder on ``sys.path`` opens it with the member's weights bit for bit and its action
probabilities; and ``--format onnx`` of it: onnxruntime, fed the env's frames prepared as the export's JSON
states (transposed to CHW), gives the member's actions and action probabilities. The same exports opened by the
evo-less virtualenv and onnxruntime: tests/e2e/test_export.py."""

from __future__ import annotations

import base64
import json
import pickle
import sys
import zipfile

import numpy as np
import pytest
import torch

from evo.tools import export as export_tool
from tests.support import need_onnx, run_in_process, tree_digest

TINY_BIGFISH = ["--env-id", "bigfish", "--hyperparams", "n_envs:2", "n_steps:32", "n_minibatches:2", "n_epochs:1"]
TINY_BIGFISH += ["--num-agents", "1", "--total-generations", "1", "--agent-training-steps", "64", "--strategy", "none"]


@pytest.fixture(scope="module")
def bigfish_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("bigfish") / "run"
    assert run_in_process([*TINY_BIGFISH, "--run-dir", str(run_dir), "--tb-writer", "False"]) == 0
    return run_dir


def test_an_impala_member_exports_with_its_network_module_and_loads_bit_for_bit(bigfish_run, tmp_path, capsys):
    from stable_baselines3 import PPO

    from evo.tools.saved import choose, load, open_run

    run_dir = bigfish_run
    before = tree_digest(run_dir)
    capsys.readouterr()
    assert export_tool.main([str(run_dir), "--out", str(tmp_path / "logs")]) == 0, capsys.readouterr().err
    assert "on sys.path" in capsys.readouterr().out  # the play line says how to load it
    assert tree_digest(run_dir) == before
    experiment = tmp_path / "logs" / "ppo" / "bigfish_1"
    module = experiment / "bigfish_impala.py"
    assert sorted(p.name for p in experiment.iterdir()) == ["best_model.zip", "bigfish", "bigfish.zip", module.name]
    source = module.read_text()
    assert "class ImpalaCNN" in source and "import evo" not in source and "from evo" not in source
    assert "bigfish_impala" not in sys.modules  # imported only while the zips were saved
    with zipfile.ZipFile(experiment / "bigfish.zip") as archive:
        kwargs = json.loads(archive.read("data"))["policy_kwargs"][":serialized:"]
    pickled = base64.b64decode(kwargs)
    assert b"bigfish_impala" in pickled and b"ImpalaCNN" in pickled and b"evo." not in pickled
    with pytest.raises(ModuleNotFoundError, match="bigfish_impala"):  # by reference to the module, not by value
        pickle.loads(pickled)

    run = open_run(run_dir)
    member = load(run, choose(run, "0"), precision="fp32")
    sys.path.insert(0, str(experiment))
    try:
        model = PPO.load(experiment / "bigfish.zip", device="cpu")
        extractor = model.policy.features_extractor
        assert type(extractor).__module__ == "bigfish_impala" and type(extractor).__name__ == "ImpalaCNN"
        ours, theirs = member.model.policy.state_dict(), model.policy.state_dict()
        assert list(theirs) == list(ours)
        assert all(torch.equal(theirs[name], ours[name]) for name in ours)  # bit for bit
        frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)

        def probs(policy):
            return policy.get_distribution(policy.obs_to_tensor(frames)[0]).distribution.probs.detach().numpy()

        assert probs(model.policy) == pytest.approx(probs(member.model.policy), abs=1e-5)
    finally:
        sys.path.remove(str(experiment))
        sys.modules.pop("bigfish_impala", None)
        member.close()


def test_an_impala_member_as_onnx_acts_as_the_member_on_procgen_frames(bigfish_run, tmp_path, capsys):
    need_onnx()
    import onnxruntime

    from evo.tools.saved import choose, load, open_run

    assert export_tool.main([str(bigfish_run), "--out", str(tmp_path / "out"), "--format", "onnx"]) == 0
    experiment = tmp_path / "out" / "ppo" / "bigfish_1"
    stated = json.loads((experiment / "bigfish.onnx.json").read_text())
    steps = stated["preprocessing"]
    assert steps["transpose"]["numpy"] == "obs.transpose(0, 3, 1, 2)" and steps["normalize"] is None
    assert steps["input"] | {"inside_the_graph": None} == {
        "name": "obs",
        "dtype": "uint8",
        "shape": [None, 3, 64, 64],
        "channel_order": "CHW",
        "inside_the_graph": None,
    }
    assert stated["check"]["actions_equal"] and stated["action_space"]["n"] == 15
    session = onnxruntime.InferenceSession(str(experiment / "bigfish.onnx"), providers=["CPUExecutionProvider"])

    run = open_run(bigfish_run)
    member = load(run, choose(run, "0"), precision="fp32")
    try:
        env = member.model.env.venv  # below SB3's VecTransposeImage: the env's own HWC frames
        frames, obs = [], env.reset()
        for _ in range(24):  # recorded from the member's env, played by its own actions
            frames.append(obs)
            obs = env.step(member.model.predict(obs, deterministic=True)[0])[0]
        frames = np.concatenate(frames)
        logits, actions = session.run(["logits", "action"], {"obs": frames.transpose(0, 3, 1, 2)})
        assert np.array_equal(actions, member.model.predict(frames, deterministic=True)[0])
        policy = member.model.policy
        probs = policy.get_distribution(policy.obs_to_tensor(frames)[0]).distribution.probs.detach().numpy()
        softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
        assert softmax / softmax.sum(axis=1, keepdims=True) == pytest.approx(probs, abs=1e-5)
    finally:
        member.close()

"""``precision: bf16``: refused without native bfloat16, and where it runs, the same learning.

The gradient tests give a float32 and a bfloat16 member the same weights and the same rollout
and compare the first update's gradient; the e2e tests train CartPole to 500 in bfloat16 and
resume a float32 bigfish run in bfloat16.
"""

import copy

import numpy as np
import pytest
import torch
import yaml

from evo.config import ConfigError, parse_config
from evo.config import precision as config_precision
from evo.config.precision import cpu_flags, native_bf16, resolve_precision
from evo.rundir import checkpoint as ckpt
from evo.sb3.agent import build_member
from evo.sb3.precision import torch_bf16_support
from tests.conftest import mpiexec

# /proc/cpuinfo excerpts: this project's AMD EPYC (AVX2, no bfloat16) and an Intel Sapphire Rapids
EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx fma avx2 bmi2\n\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd bf16\n"  # an ARM kernel: no 'flags' line

needs_bf16 = pytest.mark.skipif(
    not (native_bf16(cpu_flags()) and torch_bf16_support()[0]), reason="this processor has no native bfloat16"
)


# --- the refusal (pure: the flags text is given) -------------------------------------------------


def test_bf16_is_refused_without_native_bfloat16_and_the_message_says_what_to_use():
    problems = []
    assert resolve_precision("bf16", None, problems, cpuinfo=EPYC) == "fp32"
    (problem,) = problems
    assert "--precision bf16: this processor has no native bfloat16" in problem
    assert "avx512_bf16 nor amx_bf16" in problem and "it has avx2, fma" in problem
    assert "Use --precision fp32" in problem

    problems = []
    resolve_precision(None, "bf16", problems, cpuinfo=GRAVITON)  # from the YAML, no flags to read
    assert problems and problems[0].startswith("precision (YAML) bf16: this processor has no native bfloat16")


def test_bf16_is_accepted_with_avx512_bf16_or_amx_and_fp32_anywhere():
    problems = []
    assert resolve_precision("bf16", None, problems, cpuinfo=SAPPHIRE_RAPIDS) == "bf16"
    assert resolve_precision("bf16", None, problems, cpuinfo="flags : avx512f avx512_bf16\n") == "bf16"
    assert resolve_precision("fp32", "bf16", problems, cpuinfo=EPYC) == "fp32"  # the flag wins over the YAML
    assert resolve_precision(None, None, problems, cpuinfo=EPYC) == "fp32"  # the default
    assert problems == []
    resolve_precision(None, "fp16", problems, cpuinfo=SAPPHIRE_RAPIDS)
    assert problems == ["precision (YAML) 'fp16': use one of fp32, bf16"]


def test_parse_config_refuses_bf16_on_a_processor_without_it(tmp_path, monkeypatch):
    """Through the validation path every rank runs (a ConfigError: every rank exits 2), with the
    other problems of the command line reported at the same time."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(EPYC)
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    with pytest.raises(ConfigError) as caught:
        parse_config(["--precision", "bf16", "--seed", "-1"], check_run_dir=False)
    assert len(caught.value.problems) == 2
    assert any("no native bfloat16" in p for p in caught.value.problems)
    with pytest.raises(ConfigError, match="precision \\(YAML\\) bf16: this processor has no native bfloat16"):
        parse_config(["--hyperparams", "precision:bf16"], check_run_dir=False)
    assert parse_config([], check_run_dir=False).precision == "fp32"

    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    assert parse_config(["--hyperparams", "precision:bf16"], check_run_dir=False).precision == "bf16"


def test_a_run_may_resume_in_the_other_precision(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    run_dir = tmp_path / "run"
    started = parse_config(["--run-dir", str(run_dir)])
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started.to_dict()))
    resumed = parse_config(["--resume", "--run-dir", str(run_dir), "--precision", "bf16"])
    assert (started.precision, resumed.precision) == ("fp32", "bf16")


# --- the same learning: one update's gradient ------------------------------------------------------

CARTPOLE = "CartPole-v1:\n  n_envs: 4\n  n_steps: 64\n  n_minibatches: 1\n  n_epochs: 1\n  microbatch_size: 0\n"
# IMPALA through evo's microbatched train(): 1024 samples in pieces of 256. A rollout long enough
# for bigfish to pay rewards (8 with this seed): on an all-zero-reward batch of a fresh network the
# value targets are the network's own values, the loss is a difference of nearly equal numbers and
# its gradient mostly rounding, in either precision (cosine 0.88 between them on 64 such samples)
BIGFISH = "procgen:\n  n_envs: 4\n  n_steps: 256\n  n_minibatches: 1\n  n_epochs: 1\n  microbatch_size: 256\n"


def members(tmp_path, block: str):
    """A float32 and a bfloat16 member with the same weights."""
    path = tmp_path / "hp.yml"
    path.write_text(block)
    env = "bigfish" if block.startswith("procgen") else "CartPole-v1"
    built = {}
    for precision in ("fp32", "bf16"):
        config = parse_config(
            ["--env-id", env, "--hyperparams", str(path), "--precision", precision], check_run_dir=False
        )
        built[precision] = build_member(config, 0, config.agent.defaults, None)
    fp32, bf16 = built["fp32"], built["bf16"]
    bf16.load(fp32.pack().copy(), fp32.hparams)
    return fp32, bf16


def collect(member):
    """One rollout of ``member``, not trained on: its buffer as collected, the observation after
    it and whether that one starts an episode."""
    model, collected = member.model, {}
    train = model.train
    model.train = lambda: collected.setdefault("buffer", copy.deepcopy(model.rollout_buffer))
    member.train(model.n_steps * model.n_envs)
    model.train = train
    return collected["buffer"], model._last_obs, model._last_episode_starts


def relabel(model, experience) -> None:
    """Give ``model`` the rollout's observations, actions, rewards and episode starts, with the
    values, log-probabilities, returns and advantages its own forward gives them (what its own
    rollout of these steps would have stored)."""
    source, last_obs, last_starts = experience
    buffer = copy.deepcopy(source)
    policy = model.policy
    with torch.no_grad():
        observations = torch.as_tensor(buffer.observations.reshape(-1, *buffer.obs_shape))
        values, log_prob, _ = policy.evaluate_actions(observations, torch.as_tensor(buffer.actions.reshape(-1)))
        buffer.values[:] = values.numpy().reshape(buffer.values.shape)
        buffer.log_probs[:] = log_prob.numpy().reshape(buffer.log_probs.shape)
        last_values = policy.predict_values(policy.obs_to_tensor(last_obs)[0])
    buffer.compute_returns_and_advantage(last_values, last_starts)
    model.rollout_buffer = buffer


def first_gradient(model) -> np.ndarray:
    """The gradient of the first optimizer step of ``model.train()`` on its rollout buffer."""
    gradients = []
    step = model.policy.optimizer.step

    def recording_step(*args, **kwargs):
        gradients.append(torch.cat([p.grad.flatten() for p in model.policy.parameters()]).numpy().copy())
        return step(*args, **kwargs)

    model.policy.optimizer.step = recording_step
    model.train()
    model.policy.optimizer.step = step
    return gradients[0]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@needs_bf16
@pytest.mark.parametrize("block", [CARTPOLE, BIGFISH], ids=["cartpole-mlp", "bigfish-impala"])
def test_bf16_gives_float32_s_first_gradient(tmp_path, block):
    """Same weights, same batch (the float32 member's rollout, labelled by each member's own
    forward): cosine similarity >= 0.99 between the two first gradients, and they differ (the
    bfloat16 one really was computed in bfloat16)."""
    fp32, bf16 = members(tmp_path, block)
    experience = collect(fp32)
    relabel(fp32.model, experience)
    relabel(bf16.model, experience)
    reference, mixed = first_gradient(fp32.model), first_gradient(bf16.model)
    assert cosine(mixed, reference) >= 0.99
    assert not np.allclose(mixed, reference, rtol=1e-4, atol=0)
    # float32 master weights and Adam state: one flat float32 buffer, the same size in both
    assert bf16.pack().dtype == np.float32 and bf16.pack().size == fp32.pack().size
    assert {p.dtype for p in bf16.model.policy.parameters()} == {torch.float32}
    fp32.close()
    bf16.close()


@needs_bf16
def test_which_ops_run_in_bfloat16(tmp_path):
    """The convolutions and the extractor's layers in bfloat16; the heads, the values the rollout
    buffer stores and the log-probabilities of the ratio in float32."""
    fp32, bf16 = members(tmp_path, "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 1\n  n_epochs: 1\n")
    policy = bf16.model.policy
    seen = {}
    for name, module in policy.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.register_forward_hook(lambda m, i, out, name=name: seen.__setitem__(name, out.dtype))
    observations = torch.as_tensor(np.stack([policy.observation_space.sample() for _ in range(4)]))
    actions = torch.zeros(4, dtype=torch.long)
    with torch.no_grad():
        values, log_prob, entropy = policy.evaluate_actions(observations, actions)
        reference = fp32.model.policy.evaluate_actions(observations, actions)
    assert seen["features_extractor.cnn.0.conv"] == torch.bfloat16
    assert seen["features_extractor.linear.0"] == torch.bfloat16
    assert seen["action_net"] == seen["value_net"] == torch.float32
    assert values.dtype == log_prob.dtype == entropy.dtype == torch.float32
    assert torch.allclose(log_prob, reference[1], atol=0.05) and not torch.equal(log_prob, reference[1])

    bf16.train(64)  # a rollout in bfloat16: SB3's buffer holds float32 values and log-probabilities
    buffer = bf16.model.rollout_buffer
    assert buffer.values.dtype == buffer.log_probs.dtype == buffer.advantages.dtype == np.float32
    fp32.close()
    bf16.close()


# --- the same learning: whole runs ------------------------------------------------------------------


@pytest.mark.e2e
@needs_bf16
def test_cartpole_pbt_in_bf16_reaches_500(tmp_path):
    """CartPole's default PBT (12 generations of 4096 steps, 2 members on 2 ranks, selecting on 10
    evaluation episodes) in bfloat16 ends at 500, as the float32 run with this seed does (float32:
    500 from generation 9 on; bfloat16: from generation 10; about 95 s here)."""
    run_dir = tmp_path / "run"
    flags = ["--env-id", "CartPole-v1", "--eval-episodes", "10", "--select-on", "test", "--seed", "0"]
    result = mpiexec(
        2,
        ["pbt_rl_truct.py", *flags, "--precision", "bf16", "--tb-writer", "False", "--run-dir", str(run_dir)],
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["precision"] == "bf16"
    rows = read_rows(run_dir)
    last = max(int(row["generation"]) for row in rows)
    assert last == 12
    assert max(float(row["score_test"]) for row in rows if int(row["generation"]) == last) == 500.0


@pytest.mark.e2e
@needs_bf16
def test_a_float32_bigfish_run_resumes_in_bf16(tmp_path):
    """Checkpoints hold float32 weights and Adam state in either precision: a bigfish run trained
    in float32 continues in bfloat16 from its checkpoint, and its checkpoint is float32 again."""
    hyperparams = tmp_path / "tiny.yml"
    hyperparams.write_text("procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 1\n")
    run_dir = tmp_path / "run"
    common = ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--tb-writer", "False"]
    first = mpiexec(
        2,
        [
            *common,
            "--env-id",
            "bigfish",
            "--hyperparams",
            str(hyperparams),
            "--total-generations",
            "1",
            "--agent-training-steps",
            "64",
        ],
    )
    assert first.returncode == 0, first.stderr[-3000:]
    saved = ckpt.load_payload(ckpt.generation_dir(run_dir, 1) / ckpt.member_filename(0))
    second = mpiexec(2, [*common, "--resume", "--precision", "bf16", "--total-generations", "2"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stdout
    assert "--resume --precision bf16" in (run_dir / "command.txt").read_text()
    resumed = ckpt.load_payload(ckpt.generation_dir(run_dir, 2) / ckpt.member_filename(0))
    assert resumed["state"].dtype == saved["state"].dtype == torch.float32
    assert resumed["state"].shape == saved["state"].shape
    assert resumed["num_timesteps"] == 128 and not torch.equal(resumed["state"], saved["state"])


def read_rows(run_dir):
    import csv

    with open(run_dir / "population.csv") as handle:
        return list(csv.DictReader(handle))

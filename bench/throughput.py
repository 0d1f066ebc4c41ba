"""PPO throughput of one agent: evo's agent vs stock SB3, and evo in float32 vs bfloat16; Procgen, CartPole and
an Atari game at zoo's Atari settings (the atari extra: ``--cases pong-nature``).

    python bench/throughput.py [--repeats 3] [--iterations 2] [--json FILE] [--variants stock evo evo-bf16]

Each measurement runs in a fresh process (allocator settings cannot be undone inside one),
the variants alternating, and reports env steps per CPU second and per wall second of
PPO (rollout + update) after one warm-up iteration, and the peak RSS. Torch uses one thread,
as evo's ranks do. ``evo-bf16`` is evo's agent with ``--precision bf16`` (only where the
processor has native bfloat16); the processor's relevant flags are printed and recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402
from evo.config.precision import cpu_flags, native_bf16  # noqa: E402

# env, policy, n_envs, n_steps: small rollouts so that the benchmark runs in minutes
CASES = {
    "bigfish-impala": ("bigfish", "impala", 16, 128),
    "bigfish-nature": ("bigfish", "nature", 16, 128),  # 16 x 128 = 2048 = one paper-sized minibatch
    "cartpole-mlp": ("CartPole-v1", "mlp", 8, 256),
    # zoo's Atari PPO (its `atari` entry: 8 envs x 128 steps, 4 epochs of minibatches of 256, 4 stacked
    # frames, the Nature CNN), evo's Atari preprocessing against SB3's make_atari_env (the same wrappers)
    "pong-nature": ("ALE/Pong-v5", "nature", 8, 128),
}
ATARI_CASES = ("pong-nature",)


def build(case: str, variant: str):
    """A PPO model for ``case``: 'stock' = plain SB3 constructor, 'evo' = evo's agent, 'evo-bf16' =
    evo's agent in bfloat16."""
    import torch

    torch.set_num_threads(1)
    env_id, policy, n_envs, n_steps = CASES[case]
    from evo.config import parse_config

    hyperparams = Path(os.environ.get("TMPDIR", "/tmp")) / f"evo-bench-{os.getpid()}.yml"
    block = "atari" if case in ATARI_CASES else "procgen" if policy != "mlp" else env_id
    # one minibatch per epoch: for Procgen that is 2048 samples, the minibatch size of the
    # paper's config (64 envs x 256 steps / 8 minibatches), so activations are as large; Atari: zoo's 256
    minibatches = "batch_size: 256" if case in ATARI_CASES else "n_minibatches: 1"
    hyperparams.write_text(f"{block}:\n  policy: {policy}\n  n_envs: {n_envs}\n  n_steps: {n_steps}\n  {minibatches}\n")
    argv = ["--env-id", env_id, "--hyperparams", str(hyperparams)] + (["--no-cpu-tuning"] if variant == "stock" else [])
    argv += ["--precision", "bf16"] if variant == "evo-bf16" else []
    config = parse_config(argv, check_run_dir=False)
    hyperparams.unlink()
    if variant.startswith("evo"):
        from evo.runner.session import member_factory
        from evo.sb3.cputune import tune_allocator

        tune_allocator()
        return member_factory(config).make(0, config.agent.defaults, tensorboard=False).model, config
    from stable_baselines3 import PPO

    from evo.sb3.envs import make_env
    from evo.sb3.learner import policy_arguments

    agent, hp, settings = config.agent, config.agent.defaults, config.agent.settings
    name, policy_kwargs = policy_arguments(agent, channels_last=False)
    if case in ATARI_CASES:  # SB3's own Atari set-up, as zoo's `atari` entry asks it: the game's own sticky actions
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack

        env = VecFrameStack(make_atari_env(env_id, n_envs, seed=0, env_kwargs={"frameskip": 1}), agent.frame_stack)
        policy_kwargs = {}  # SB3's CnnPolicy: its NatureCNN
    else:
        env = make_env(env_id, n_envs, seed=0)
    model = PPO(
        name,
        env,
        n_steps=settings["n_steps"],
        batch_size=settings["batch_size"],
        n_epochs=settings["n_epochs"],
        max_grad_norm=settings["max_grad_norm"],
        policy_kwargs=policy_kwargs,
        seed=0,
        device="cpu",
        **hp,
    )
    return model, config


def layer_calls(policy) -> list[tuple]:
    """Each convolution and dense layer of the policy with the input shape (one observation) and
    output size it has when one observation goes through, in call order."""
    import torch
    from torch import nn

    calls = []
    hooks = [
        m.register_forward_hook(
            lambda module, inputs, output: calls.append((module, inputs[0].shape[1:], output.numel()))
        )
        for m in policy.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    with torch.no_grad():
        policy(policy.obs_to_tensor(policy.observation_space.sample()[None])[0])
    for hook in hooks:
        hook.remove()
    return calls


def forward_flops(policy) -> float:
    """Multiply-add FLOPs of one observation through the policy's convolutions and dense layers
    (the rest, ReLUs, pooling and adds, is a few percent)."""
    from torch import nn

    flops = 0.0
    for module, _, outputs in layer_calls(policy):
        if isinstance(module, nn.Conv2d):
            kernel = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            flops += 2 * outputs * kernel
        else:
            flops += 2 * module.in_features * outputs
    return flops


def gemm_gflops(dtype: str = "float32") -> float:
    """A single-thread matrix product: what this core sustains on dense maths in ``dtype``
    (float32: MKL's sgemm; bfloat16: oneDNN's bf16 matmul)."""
    import torch

    a, b = (torch.randn(2048, 2048).to(getattr(torch, dtype)) for _ in range(2))
    a @ b
    start = time.process_time()
    for _ in range(5):
        a @ b
    return 5 * 2 * 2048**3 / (time.process_time() - start) / 1e9


def conv_gflops(model) -> float:
    """The rate the network's own convolutions reach alone: each of the policy's Conv2d layers,
    forward and backward (weight gradient, and input gradient past the first layer), on one
    update microbatch of inputs in the variant's precision and memory layout, timed apart from
    everything else in the update. NaN for a network without convolutions."""
    import torch
    from torch import nn

    policy = model.policy
    convs = [(module, shape) for module, shape, _ in layer_calls(policy) if isinstance(module, nn.Conv2d)]
    if not convs:
        return float("nan")
    microbatch = getattr(model, "microbatch_size", 0)
    batch = microbatch if 0 < microbatch < model.batch_size else model.batch_size
    dtype = torch.bfloat16 if getattr(model, "precision", "fp32") == "bf16" else torch.float32
    channels_last = getattr(policy.features_extractor, "channels_last", False)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    flops, seconds = 0.0, 0.0
    for index, (conv, shape) in enumerate(convs):
        x = torch.randn(batch, *shape).to(dtype).contiguous(memory_format=layout)
        weight = conv.weight.detach().to(dtype).contiguous(memory_format=layout)
        needs = [index > 0, True, True]  # the observations need no gradient
        output, elapsed = _conv_forward_backward(conv, x, weight, conv.bias.detach().to(dtype), needs)
        seconds += elapsed
        macs = output.numel() * conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
        flops += 2 * macs * (1 + sum(needs[:2]))
    return flops / seconds / 1e9


def _conv_forward_backward(conv, x, weight, bias, needs: list[bool]):
    """One convolution's output, and the CPU seconds of its forward and backward (the mean of 3
    after a warm-up)."""
    import torch
    from torch.nn import functional

    output = functional.conv2d(x, weight, bias, conv.stride, conv.padding)
    grad = torch.randn_like(output)
    args = (grad, x, weight, [bias.numel()], conv.stride, conv.padding, conv.dilation, False, [0, 0], 1, needs)
    for repeat in range(4):
        if repeat == 1:
            start = time.process_time()
        functional.conv2d(x, weight, bias, conv.stride, conv.padding)
        torch.ops.aten.convolution_backward(*args)
    return output, (time.process_time() - start) / 3


def worker(case: str, variant: str, iterations: int) -> dict:
    model, config = build(case, variant)
    # per env step: one forward in the rollout, then per epoch a forward and a backward (~2x)
    flops_per_step = forward_flops(model.policy) * (1 + 3 * config.agent.settings["n_epochs"])
    rollout = config.agent.unit_steps
    model.learn(rollout, reset_num_timesteps=False)  # warm-up: first rollout and update
    cpu, wall = time.process_time(), time.perf_counter()
    model.learn(rollout * iterations, reset_num_timesteps=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = rollout * iterations
    return {
        "case": case,
        "variant": variant,
        "steps_per_cpu_s": steps / cpu,
        "steps_per_wall_s": steps / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "gflop_per_step": flops_per_step / 1e9,
        "gflops": steps * flops_per_step / cpu / 1e9,
        "sgemm_gflops": gemm_gflops("float32"),
        "bf16_gemm_gflops": gemm_gflops("bfloat16") if native_bf16(cpu_flags()) else float("nan"),
        "conv_gflops": conv_gflops(model),
    }


def measure(case: str, variant: str, iterations: int) -> dict:
    command = [sys.executable, __file__, "--worker", case, variant, "--iterations", str(iterations)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(output.strip().splitlines()[-1])


VARIANTS = ("stock", "evo", "evo-bf16")


def default_cases() -> list[str]:
    """Every case that runs here: the Atari ones where the atari extra is installed."""
    from evo.config.envnames import register_atari

    return [case for case in CASES if case not in ATARI_CASES or register_atari() is None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=1, help="PPO iterations measured after the warm-up")
    parser.add_argument("--cases", nargs="+", default=default_cases(), choices=list(CASES))
    parser.add_argument("--variants", nargs="+", default=None, choices=VARIANTS, help="default: all that run here")
    parser.add_argument("--json", help="write the raw records here")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.iterations)))
        return

    cpu = processor()
    variants = args.variants or [v for v in VARIANTS if v != "evo-bf16" or native_bf16(cpu_flags())]
    print(processor_line(cpu))
    records = []
    for repeat in range(args.repeats):
        for case in args.cases:
            order = variants if repeat % 2 == 0 else variants[::-1]
            for variant in order:
                record = {**measure(case, variant, args.iterations), "repeat": repeat, "cpu": cpu}
                records.append(record)
                print(f"  {case:16s} {variant:8s} {record['steps_per_cpu_s']:8.1f} env-steps/CPU-s", file=sys.stderr)

    def stats(case: str, variant: str) -> dict:
        mine = [r for r in records if r["case"] == case and r["variant"] == variant]
        return {k: median([r[k] for r in mine]) for k in mine[0] if isinstance(mine[0][k], float)}

    def pair_ratios(case: str, top: str, bottom: str) -> str:
        by_repeat = {(r["variant"], r["repeat"]): r["steps_per_cpu_s"] for r in records if r["case"] == case}
        return ", ".join(f"{by_repeat[top, k] / by_repeat[bottom, k]:.2f}" for k in range(args.repeats))

    print(f"\nPPO throughput, one agent, 1 torch thread, medians of {args.repeats} alternating runs\n")
    if "stock" in variants and "evo" in variants:
        rows = []
        for case in args.cases:
            stock, evo = stats(case, "stock"), stats(case, "evo")
            rows.append(
                [
                    case,
                    stock["steps_per_cpu_s"],
                    evo["steps_per_cpu_s"],
                    evo["steps_per_cpu_s"] / stock["steps_per_cpu_s"],
                    stock["steps_per_wall_s"],
                    evo["steps_per_wall_s"],
                    stock["peak_rss_mb"],
                    evo["peak_rss_mb"],
                ]
            )
        headers = ["case", "stock steps/CPU-s", "evo steps/CPU-s", "evo/stock", "stock steps/wall-s"]
        headers += ["evo steps/wall-s", "stock peak RSS MB", "evo peak RSS MB"]
        print(markdown_table(headers, rows) + "\n")
    if "evo" in variants and "evo-bf16" in variants:
        rows = []
        for case in args.cases:
            fp32, bf16 = stats(case, "evo"), stats(case, "evo-bf16")
            rows.append(
                [
                    case,
                    fp32["steps_per_cpu_s"],
                    bf16["steps_per_cpu_s"],
                    bf16["steps_per_cpu_s"] / fp32["steps_per_cpu_s"],
                    pair_ratios(case, "evo-bf16", "evo"),
                    fp32["peak_rss_mb"],
                    bf16["peak_rss_mb"],
                ]
            )
        headers = ["case", "evo fp32 steps/CPU-s", "evo bf16 steps/CPU-s", "bf16/fp32", "bf16/fp32 per pair"]
        headers += ["fp32 peak RSS MB", "bf16 peak RSS MB"]
        print(markdown_table(headers, rows) + "\n")

    print(
        "Compute: the network's multiply-add FLOPs per env step (a rollout forward, then forward and"
        "\nbackward per epoch), the rate each variant reached, a one-thread matrix product of the same"
        "\nprecision in the same processes (float32: sgemm; bfloat16: torch.matmul in bf16), and the"
        "\nthroughput if every FLOP ran at that rate (nothing else costing anything); then the rate of"
        "\nthe network's own convolutions timed alone (forward and backward, one update microbatch, the"
        "\nvariant's precision and layout) and the throughput if every FLOP ran at that rate\n"
    )
    ceilings = []
    baseline = "stock" if "stock" in variants else variants[0]
    for case in args.cases:
        reference = stats(case, baseline)["steps_per_cpu_s"]
        for precision, gemm_key, measured in (
            ("float32", "sgemm_gflops", [v for v in variants if v != "evo-bf16"]),
            ("bfloat16", "bf16_gemm_gflops", [v for v in variants if v == "evo-bf16"]),
        ):
            if not measured:
                continue
            gemm = median([r[gemm_key] for r in records if r["case"] == case])
            per_step = stats(case, measured[-1])["gflop_per_step"]
            reached = ", ".join(f"{v} {stats(case, v)['gflops']:.3g}" for v in measured)
            conv = stats(case, measured[-1])["conv_gflops"]
            row = [case, precision, per_step, reached, gemm, gemm / per_step, gemm / per_step / reference]
            if math.isnan(conv):  # no convolutions
                ceilings.append([*row, "", ""])
            else:
                ceilings.append([*row, f"{measured[-1]} {conv:.3g}", conv / per_step / reference])
    headers = ["case", "precision", "GFLOP per env step", "GFLOP/s reached", "matmul GFLOP/s"]
    headers += ["ceiling steps/CPU-s", f"ceiling / {baseline}", "convolutions alone GFLOP/s"]
    headers += [f"conv ceiling / {baseline}"]
    print(markdown_table(headers, ceilings))
    write_json(args.json, records)


if __name__ == "__main__":
    main()

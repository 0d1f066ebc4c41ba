"""DrAC's augmentations (evo/sb3/augment.py) and its regulariser (evo/sb3/ppo.py) against the PPO
update they are added to: the time of each augmentation on a minibatch of bigfish frames, and of
one forward and backward pass of evo's IMPALA policy on the same minibatch (what DrAC's augmented
pass adds to an update, at least); then one whole PPO update (``train()``: the minibatch's loss,
its gradient in microbatches of 256 as the procgen block sets, the optimizer step) with DrAC
(aug_coef 0.1, crop) against the same update without (aug_coef 0).

    python bench/augment.py [--batch 2048] [--repeats 5] [--json FILE]

2048 frames is a minibatch of the Procgen paper's settings (64 envs x 256 steps / 8 minibatches).
The frames are uint8, as SB3's rollout buffer holds them. Medians of ``--repeats``, one torch
thread (as a rank trains).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402


def timed(call, repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    from evo.config import parse_config
    from evo.runner.session import member_factory
    from evo.sb3.augment import AUGMENTATIONS

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        hp = Path(tmp) / "bigfish.yml"
        hp.write_text("procgen:\n  n_envs: 2\n  n_steps: 32\n")
        config = parse_config(
            ["--env-id", "bigfish", "--hyperparams", str(hp), "--tb-writer", "False"], check_run_dir=False
        )
        member = member_factory(config).make(0, tensorboard=False)
    policy = member.model.policy
    generator = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (args.batch, 3, 64, 64), dtype=torch.uint8, generator=generator)
    observations = frames  # as SB3's rollout buffer holds them: uint8, (N, C, H, W)
    actions = torch.randint(0, 15, (args.batch,), generator=generator)

    def update() -> None:
        policy.zero_grad()
        values, log_prob, entropy = policy.evaluate_actions(observations, actions)
        (values.mean() - log_prob.mean() - entropy.mean()).backward()

    update_s = timed(update, args.repeats)
    rows, records = [], {"update_s": update_s}
    for name, augmentation in AUGMENTATIONS.items():
        seconds = timed(lambda augmentation=augmentation: augmentation(observations, generator), args.repeats)
        records[name] = seconds
        rows.append([name, seconds * 1e3, seconds / update_s])
    member.close()
    drac = drac_updates(args.batch, args.repeats)
    cpu = processor()
    print(processor_line(cpu))
    print(f"\n{args.batch} frames of 64x64x3; the IMPALA policy's forward and backward pass: {update_s * 1e3:.0f} ms\n")
    print(markdown_table(["augmentation", "ms", "/ the pass"], rows))
    ppo_s, drac_s = drac["aug_coef 0"], drac["aug_coef 0.1, crop"]
    print(f"\none PPO update of one {args.batch}-frame minibatch (microbatches of 256):\n")
    table = [[name, seconds, seconds / ppo_s] for name, seconds in drac.items()]
    print(markdown_table(["update", "s", "/ PPO's"], table))
    print(f"\nDrAC adds {drac_s - ppo_s:.2f} s ({drac_s / ppo_s - 1:.0%}) to the update")
    write_json(args.json, {"processor": cpu, "args": vars(args), "seconds": records, "update_seconds": drac})


def drac_updates(batch: int, repeats: int) -> dict[str, float]:
    """The time of one PPO ``train()`` on a rollout of ``batch`` random bigfish frames (one
    minibatch, one epoch), without DrAC and with it (aug_coef 0.1, crop)."""
    import numpy as np

    from evo.config import parse_config
    from evo.runner.session import member_factory

    with tempfile.TemporaryDirectory() as tmp:
        hp = Path(tmp) / "bigfish.yml"
        hp.write_text(f"procgen:\n  n_envs: 2\n  n_steps: {batch // 2}\n  n_minibatches: 1\n  n_epochs: 1\n")
        config = parse_config(
            ["--env-id", "bigfish", "--conf-file", str(hp), "--tb-writer", "False"], check_run_dir=False
        )
        member = member_factory(config).make(0, tensorboard=False)
    model, rng = member.model, np.random.default_rng(0)
    buffer = model.rollout_buffer  # a rollout as collect_rollouts leaves it, of random frames
    buffer.reset()
    buffer.observations[:] = rng.integers(0, 256, buffer.observations.shape, dtype=np.uint8)
    buffer.actions[:] = rng.integers(0, 15, buffer.actions.shape)
    for name in ("values", "advantages", "returns"):
        getattr(buffer, name)[:] = rng.normal(size=buffer.values.shape)
    buffer.log_probs[:] = -np.log(15)
    buffer.pos, buffer.full = buffer.buffer_size, True
    seconds = {}
    for name, aug_coef in (("aug_coef 0", 0.0), ("aug_coef 0.1, crop", 0.1)):
        model.aug_coef, model.aug_type = aug_coef, "crop"
        seconds[name] = timed(model.train, repeats)
    member.close()
    return seconds


if __name__ == "__main__":
    main()

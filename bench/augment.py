"""DrAC's augmentations (evo/sb3/augment.py) against the PPO update they would be added to: the
time of each on a minibatch of bigfish frames, and of one forward and backward pass of evo's
IMPALA policy on the same minibatch (what DrAC's augmented pass adds to an update, at least).

    python bench/augment.py [--batch 2048] [--repeats 5] [--json FILE]

2048 frames is a minibatch of the Procgen paper's settings (64 envs x 256 steps / 8 minibatches).
Medians of ``--repeats``, one torch thread (as a rank trains).
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
    from evo.run import make_member
    from evo.sb3.augment import AUGMENTATIONS

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        hp = Path(tmp) / "bigfish.yml"
        hp.write_text("procgen:\n  n_envs: 2\n  n_steps: 32\n")
        config = parse_config(
            ["--env-id", "bigfish", "--hyperparams", str(hp), "--tb-writer", "False"], check_run_dir=False
        )
        member = make_member(config, 0, tensorboard=False)
    policy = member.model.policy
    generator = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (args.batch, 3, 64, 64), dtype=torch.uint8, generator=generator)
    observations = frames.float()  # as SB3's rollout buffer holds them
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
    cpu = processor()
    print(processor_line(cpu))
    print(f"\n{args.batch} frames of 64x64x3; the IMPALA policy's forward and backward pass: {update_s * 1e3:.0f} ms\n")
    print(markdown_table(["augmentation", "ms", "/ the pass"], rows))
    write_json(args.json, {"processor": cpu, "args": vars(args), "seconds": records})


if __name__ == "__main__":
    main()

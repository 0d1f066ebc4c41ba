"""The golden run's records (tests/data/golden, see its README) and how a run is compared with
them: shared by tests/e2e/test_golden.py (the run) and tests/unit/test_golden_records.py (the
comparison's own rules)."""

import csv
import json
import math
from pathlib import Path

from evo.config.precision import cpuinfo_field
from tests.support import ROOT, budget

GOLDEN = ROOT / "tests" / "data" / "golden"
COMMAND = ["pbt_rl_truct.py", "--env-id", "CartPole-v1", *budget(4, 4, 2048), "--seed", "3"]


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The vendor_id of /proc/cpuinfo's first processor ("GenuineIntel", "AuthenticAMD"), or ""
    (an ARM processor's cpuinfo has none)."""
    return cpuinfo_field("vendor_id", cpuinfo)


def recorded_vendors() -> list[str]:
    return sorted(path.name for path in GOLDEN.iterdir() if (path / "population.csv").is_file())


def golden_records(vendor: str) -> Path | None:
    """The records made on processors of ``vendor``, or None if there are none."""
    return GOLDEN / vendor if vendor in recorded_vendors() else None


# What every processor must reproduce, whatever its floating-point rounding: who trained where and
# for how long, and the initial hyperparameters (drawn by NumPy from the seed, before any float
# result of training can differ). Scores, and so donors and later hyperparameters, may differ.
PORTABLE_COLUMNS = ("generation", "member", "rank", "env_steps")


ROUNDED_COLUMNS = ("score", "score_train", "score_test", "score_train_stale", "donor")


def portable(rows: list[dict[str, str]]) -> list[tuple[str, ...]]:
    """Each row's portable values: its placement and env steps, and in generation 1 its hyperparameters."""
    names = [column for column in rows[0] if column not in PORTABLE_COLUMNS + ROUNDED_COLUMNS]
    return [
        tuple(row[c] for c in PORTABLE_COLUMNS) + (tuple(row[c] for c in names) if row["generation"] == "1" else ())
        for row in rows
    ]


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def same_value(expected: str, found: str) -> bool:
    """Equal as written, or as the floats the two reprs denote (NaN equal to NaN)."""
    if expected == found:
        return True
    try:
        a, b = float(expected), float(found)
    except ValueError:
        return False
    return a == b or (math.isnan(a) and math.isnan(b))


def lineage(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- the runs whose records and final weights the restructuring of the run wing kept (issue 37) ----------

STAGE_SPACE = """default:
  n_envs: 2
  n_steps: 64
  n_minibatches: 2
  n_epochs: 2
  search_space:
    learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}
    pi_layers: {low: 1, high: 3, type: int}
    pi_width: {choices: [16, 32, 64]}
    vf_layers: {low: 1, high: 3, type: int}
"""
"""The stage run's space: the learning rate and three architecture dimensions, tiny PPO settings."""

TINY_SAC = [
    *("--algo", "sac", "--env-id", "Pendulum-v1"),
    *("--hyperparams", "learning_starts:50", "batch_size:32", "buffer_size:4000", "gradient_steps:1"),
    "policy_kwargs:{net_arch: [64, 64]}",
    "search_space:{batch_size: {choices: [32, 64]}}",
]


RUNS = GOLDEN / "engine"


def machine_key(cpuinfo: str | None = None) -> str:
    """The processor's vendor, with ``-avx512`` where it has AVX-512: the runs' records are kept per key
    (a digest of the weights changes with any float rounded otherwise)."""
    from evo.config.precision import cpu_flags

    return cpu_vendor(cpuinfo) + ("-avx512" if "avx512f" in cpu_flags(cpuinfo) else "")


def runs_records(key: str) -> Path | None:
    """The golden runs' records made on a machine of ``key``, or None if there are none."""
    found = RUNS / key
    return found if key and (found / "cartpole" / "weights.json").is_file() else None


def golden_runs(directory: Path) -> dict[str, list[str]]:
    """Each golden run's command (``python`` + these, on 2 ranks); ``directory`` holds the files they need."""
    stage_file = directory / "stage.yml"
    stage_file.write_text(STAGE_SPACE)
    return {
        "cartpole": COMMAND,
        "pendulum-normalize": [
            *("pbt_rl_truct.py", "--env-id", "Pendulum-v1", "--eval-episodes", "1", "--seed", "5"),
            *("--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1", "normalize:true"),
            *budget(4, 3, 256),
        ],
        "sac": ["pbt_rl_wta.py", *TINY_SAC, *budget(4, 3, 200), "--seed", "3"],
        "stage": [
            *("pbt_rl_truct_collective.py", "--env-id", "CartPole-v1", "--hyperparams", str(stage_file)),
            *budget(4, 5, 256),
            *("--seed", "3", "--max-distillations", "1", "--stage-steps", "256", "--patience", "100"),
            *("--distillation-steps", "1024"),
        ],
    }


def weights_digest(run_dir: Path) -> dict[str, dict[str, str]]:
    """The sha256 of each member's flat buffers in the run's last checkpoint, by member: ``state`` (every
    network, every optimizer's state and the algorithm's own tensors) and ``normalization`` (its
    statistics, where it has them)."""
    import hashlib

    from evo.rundir.checkpoint import latest, load_payload

    checkpoint, _ = latest(run_dir)
    found = {}
    for member in sorted(int(m) for m in checkpoint.manifest["members"]):
        payload = load_payload(checkpoint.member_path(member))
        found[str(member)] = {
            name: hashlib.sha256(payload[name].numpy().tobytes()).hexdigest()
            for name in ("state", "normalization")
            if payload.get(name) is not None
        }
    return {"generation": checkpoint.generation, "members": found}


def record(out: Path) -> None:
    """Run every golden run and keep its population.csv, lineage.jsonl and weights digest in ``out``/<name>."""
    import shutil

    from tests.support import mpiexec

    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    for name, command in golden_runs(work).items():
        run_dir = work / name
        result = mpiexec(2, [*command, "--run-dir", str(run_dir)], timeout=600, env={"MKL_CBWR": "COMPATIBLE"})
        assert result.returncode == 0, result.stderr[-4000:]
        target = out / name
        target.mkdir(exist_ok=True)
        for file in ("population.csv", "lineage.jsonl"):
            shutil.copy(run_dir / file, target / file)
        (target / "weights.json").write_text(json.dumps(weights_digest(run_dir), indent=1, sort_keys=True) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    import sys

    record(Path(sys.argv[1]))

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

"""The golden run: a short CartPole PBT run gives the same records, value for value, as the
code before the restructuring (tests/data/golden, see its README). Values are compared, not
bytes: the CSV line endings are allowed to change. The records are kept per processor vendor:
MKL rounds differently on Intel and AMD processors even with MKL_CBWR=COMPATIBLE, and one
evaluation score of the run differs between the two."""

import csv
import json
import math
from pathlib import Path

import pytest

from evo.config.precision import cpuinfo_field

from .conftest import mpiexec

GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
COMMAND = [
    "pbt_rl_truct.py",
    "--env-id",
    "CartPole-v1",
    "--num-agents",
    "4",
    "--total-generations",
    "4",
    "--agent-training-steps",
    "2048",
    "--seed",
    "3",
]


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The vendor_id of /proc/cpuinfo's first processor ("GenuineIntel", "AuthenticAMD"), or ""."""
    return cpuinfo_field("vendor_id", cpuinfo)


def golden_records() -> Path:
    """The records made on this machine's processor vendor; fails, naming the vendor, if none are."""
    vendor = cpu_vendor()
    records = GOLDEN / vendor
    if not vendor or not (records / "population.csv").is_file():
        recorded = sorted(path.name for path in GOLDEN.iterdir() if path.is_dir())
        pytest.fail(
            f"no golden records for processor vendor {vendor!r} (recorded: {', '.join(recorded)}); "
            f"record them as tests/data/golden/README.md says, into tests/data/golden/{vendor or '<vendor>'}/"
        )
    return records


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


@pytest.mark.e2e
def test_golden_run_reproduces_the_recorded_population_and_lineage(tmp_path):
    run_dir = tmp_path / "run"
    golden = golden_records()
    result = mpiexec(2, [*COMMAND, "--run-dir", str(run_dir)], timeout=300, env={"MKL_CBWR": "COMPATIBLE"})
    assert result.returncode == 0, result.stderr[-4000:]

    expected, found = read_csv(golden / "population.csv"), read_csv(run_dir / "population.csv")
    assert len(found) == len(expected) == 16
    # the same columns, in the same order; columns added since come after them
    assert list(found[0])[: len(expected[0])] == list(expected[0])
    for row_expected, row_found in zip(expected, found, strict=True):
        differing = {
            column: (value, row_found[column])
            for column, value in row_expected.items()
            if not same_value(value, row_found[column])
        }
        assert not differing, (row_expected["generation"], row_expected["member"], differing)

    def lineage(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    assert lineage(run_dir / "lineage.jsonl") == lineage(golden / "lineage.jsonl")


def test_the_vendor_is_read_from_cpuinfo():
    assert cpu_vendor("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n") == "AuthenticAMD"
    assert cpu_vendor("processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nvendor_id\t: X\n") == "GenuineIntel"
    assert cpu_vendor("processor\t: 0\nFeatures\t: fp asimd\n") == ""

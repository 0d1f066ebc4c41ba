"""The golden run: a short CartPole PBT run gives the same records, value for value, as the
code before the restructuring (tests/data/golden, see its README). Values are compared, not
bytes: the CSV line endings are allowed to change. The records are kept per processor vendor:
MKL rounds differently on Intel and AMD processors even with MKL_CBWR=COMPATIBLE, and one
evaluation score of the run differs between the two. On a processor of another vendor (ARM, say)
the run is compared on what any processor must reproduce, and the full comparison is skipped
with the reason."""

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


@pytest.fixture(scope="module")
def golden_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("golden") / "run"
    result = mpiexec(2, [*COMMAND, "--run-dir", str(run_dir)], timeout=300, env={"MKL_CBWR": "COMPATIBLE"})
    assert result.returncode == 0, result.stderr[-4000:]
    return run_dir


@pytest.mark.e2e
def test_golden_run_reproduces_what_every_processor_must(golden_run):
    """On any processor, the vendors' records agree with each other and with this run on the
    portable part: placement, env steps and the initial hyperparameters."""
    found = portable(read_csv(golden_run / "population.csv"))
    for vendor in recorded_vendors():
        assert portable(read_csv(GOLDEN / vendor / "population.csv")) == found, vendor


@pytest.mark.e2e
def test_golden_run_reproduces_the_recorded_population_and_lineage(golden_run):
    vendor = cpu_vendor()
    golden = golden_records(vendor)
    if golden is None:
        pytest.skip(
            f"no golden records for processor vendor {vendor or '(none in /proc/cpuinfo)'!r} (recorded: "
            f"{', '.join(recorded_vendors())}): its floating-point rounding may differ, so only the portable part "
            "was compared; record them as tests/data/golden/README.md says"
        )
    expected, found = read_csv(golden / "population.csv"), read_csv(golden_run / "population.csv")
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
    assert lineage(golden_run / "lineage.jsonl") == lineage(golden / "lineage.jsonl")


def test_an_unknown_vendor_has_no_records_and_the_known_ones_do():
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n"
    assert golden_records(cpu_vendor(arm)) is None
    assert golden_records("HygonGenuine") is None
    assert golden_records("GenuineIntel") == GOLDEN / "GenuineIntel"
    assert golden_records("AuthenticAMD") == GOLDEN / "AuthenticAMD"


def test_the_portable_part_leaves_out_what_rounding_changes():
    rows = read_csv(GOLDEN / "AuthenticAMD" / "population.csv")
    intel = read_csv(GOLDEN / "GenuineIntel" / "population.csv")
    assert rows != intel and portable(rows) == portable(intel)  # the vendors differ in one score only
    changed = [dict(row) for row in rows]
    changed[0]["learning_rate"] = "0.5"  # an initial draw is portable: a change shows
    assert portable(changed) != portable(rows)
    changed = [dict(row) for row in rows]
    changed[-1]["env_steps"] = "1"
    assert portable(changed) != portable(rows)


def test_the_vendor_is_read_from_cpuinfo():
    assert cpu_vendor("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n") == "AuthenticAMD"
    assert cpu_vendor("processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nvendor_id\t: X\n") == "GenuineIntel"
    assert cpu_vendor("processor\t: 0\nFeatures\t: fp asimd\n") == ""

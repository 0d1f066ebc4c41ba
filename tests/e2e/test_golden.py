"""The golden run: a short CartPole PBT run gives the same records, value for value, as the
code before the restructuring (tests/data/golden, see its README). Values are compared, not
bytes: the CSV line endings are allowed to change. The records are kept per processor vendor:
MKL rounds differently on Intel and AMD processors even with MKL_CBWR=COMPATIBLE, and one
evaluation score of the run differs between the two. On a processor of another vendor (ARM, say)
the run is compared on what any processor must reproduce, and the full comparison is skipped
with the reason."""

from pathlib import Path

import pytest

from tests.golden import (
    COMMAND,
    GOLDEN,
    cpu_vendor,
    golden_records,
    lineage,
    portable,
    read_csv,
    recorded_vendors,
    same_value,
)
from tests.support import mpiexec


@pytest.fixture(scope="module")
def golden_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("golden") / "run"
    result = mpiexec(2, [*COMMAND, "--run-dir", str(run_dir)], timeout=300, env={"MKL_CBWR": "COMPATIBLE"})
    assert result.returncode == 0, result.stderr[-4000:]
    return run_dir


def test_golden_run_reproduces_what_every_processor_must(golden_run):
    """On any processor, the vendors' records agree with each other and with this run on the
    portable part: placement, env steps and the initial hyperparameters."""
    found = portable(read_csv(golden_run / "population.csv"))
    for vendor in recorded_vendors():
        assert portable(read_csv(GOLDEN / vendor / "population.csv")) == found, vendor


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

"""The golden runs (tests/data/golden, see its README). A short CartPole PBT run gives the same records,
value for value, as the code before the first restructuring; it and three more (Pendulum with
normalisation, SAC, a run with a BG-PBT stage) give byte for byte the records and the final weights of
the code before the run engine's restructuring, on a machine of the kind they were recorded on. Values are compared, not
bytes: the CSV line endings are allowed to change. The records are kept per processor vendor:
MKL rounds differently on Intel and AMD processors even with MKL_CBWR=COMPATIBLE, and one
evaluation score of the run differs between the two. On a processor of another vendor (ARM, say)
the run is compared on what any processor must reproduce, and the full comparison is skipped
with the reason."""

import json
from pathlib import Path

import pytest

from tests.golden import (
    COMMAND,
    GOLDEN,
    RUNS,
    cpu_vendor,
    golden_records,
    golden_runs,
    lineage,
    machine_key,
    portable,
    read_csv,
    recorded_vendors,
    runs_records,
    same_value,
    weights_digest,
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The three other golden runs, each on 2 ranks (the CartPole one is golden_run)."""
    work = tmp_path_factory.mktemp("golden-runs")
    found = {}
    for name, command in golden_runs(work).items():
        if name == "cartpole":
            continue
        run_dir = work / name
        result = mpiexec(2, [*command, "--run-dir", str(run_dir)], timeout=300, env={"MKL_CBWR": "COMPATIBLE"})
        assert result.returncode == 0, result.stderr[-4000:]
        found[name] = run_dir
    return found


@pytest.mark.parametrize("name", ["cartpole", "pendulum-normalize", "sac", "stage"])
def test_the_golden_runs_keep_their_records_and_weights_byte_for_byte(name, golden_run, runs):
    run_dir = golden_run if name == "cartpole" else runs[name]
    found = {file: (run_dir / file).read_bytes() for file in ("population.csv", "lineage.jsonl")}
    key = machine_key()
    records = runs_records(key)
    if records is None:
        for vendor_records in sorted(RUNS.iterdir()):  # what every processor must reproduce
            expected = read_csv(vendor_records / name / "population.csv")
            assert portable(read_csv(run_dir / "population.csv")) == portable(expected), vendor_records.name
        pytest.skip(
            f"no golden runs' records for a {key or 'vendor-less'} machine (recorded: "
            f"{', '.join(p.name for p in sorted(RUNS.iterdir()))}): compared what every processor must reproduce; "
            "record them as tests/data/golden/README.md says"
        )
    for file, data in found.items():
        assert data == (records / name / file).read_bytes(), f"{name}: {file} differs from {records / name / file}"
    expected = json.loads((records / name / "weights.json").read_text())
    assert weights_digest(run_dir) == expected, f"{name}: the final weights differ"

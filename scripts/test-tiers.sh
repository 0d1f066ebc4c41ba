#!/usr/bin/env bash
# `make test`: the five tiers in two phases, so that the tiers that mostly wait share the machine with one that
# computes on one core. Phase 1: the unit tier (one process: about one core) beside the SLURM and two-host tiers
# (a private SLURM's scheduling, requeue holds and grace times, and namespaces: mostly waiting) in a second
# pytest session. Phase 2: the MPI and end-to-end tiers (mpiexec jobs that take both cores), alone.
# Each session writes its slowest tests to test-durations-<phase>.txt; test-durations.txt gets them all.
# The last line is the whole suite's count. With arguments, one plain pytest session with them instead
# (make test PYTEST_ARGS='tests/e2e/test_golden.py').
#   scripts/test-tiers.sh PYTHON [PYTEST ARGS...]
set -uo pipefail
python=${1:?usage: scripts/test-tiers.sh PYTHON [PYTEST ARGS...]}
shift
cd "$(dirname "$0")/.."
if (($# > 0)); then
    exec "$python" -m pytest "$@"
fi
results=$(mktemp -d "${TMPDIR:-/tmp}/evo-test-tiers-XXXXXX")
trap 'rm -rf "$results"' EXIT
session() { # session NAME TIER-FOLDERS...: one pytest session over those folders
    local name=$1
    shift
    EVO_TEST_DURATIONS="test-durations-$name.txt" "$python" -m pytest --junitxml="$results/$name.xml" "$@"
}
started=$SECONDS
echo "== phase 1: tests/unit here, tests/slurm and tests/multinode beside it (their output follows when they end)"
session cluster tests/slurm tests/multinode >"$results/cluster.log" 2>&1 &
beside=$!
# one torch thread for the unit tier's own members (runs set theirs from --torch-threads): two threads would
# spin against the SLURM jobs' ranks on 2 cores
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} session unit tests/unit
unit=$?
wait "$beside"
cluster=$?
echo "== tests/slurm and tests/multinode (ran beside the unit tier), exit status $cluster:"
cat "$results/cluster.log"
echo "== phase 2: tests/mpi and tests/e2e ($((SECONDS - started)) s so far)"
session ranks tests/mpi tests/e2e
ranks=$?
cat test-durations-unit.txt test-durations-cluster.txt test-durations-ranks.txt >test-durations.txt 2>/dev/null
echo "== $((SECONDS - started)) s in all; exit statuses: unit $unit, slurm and multinode $cluster, mpi and e2e $ranks"
"$python" - "$results" <<'PY'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sorted(Path(sys.argv[1]).glob("*.xml")):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        tests, failed = int(suite.get("tests", 0)), int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts["passed"] += tests - failed - skipped
        counts["failed"] += failed
        counts["skipped"] += skipped
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
for status in "$unit" "$cluster" "$ranks"; do
    # pytest's 5 (no test collected: a tier with nothing to run for this user) is not a failure
    if [[ $status != 0 && $status != 5 ]]; then
        exit 1
    fi
done
exit 0

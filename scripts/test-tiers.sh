#!/usr/bin/env bash
# `make test`: the five tiers in three pytest sessions at once, so that the 2 cores stay busy to the end. One
# session runs the SLURM and two-host tiers (a private SLURM's scheduling, requeue holds and grace times, and
# namespaces: mostly waiting). Two sessions share the unit, MPI and end-to-end tiers (--share, tests/conftest.py):
# each collects them all, longest files first (tests/file-seconds.txt), and runs a file only if it claims it
# before the other, so they draw files from one queue, each file runs once with its module fixtures, and both
# end within a file of each other. Each session writes its durations to test-durations-<session>.txt;
# test-durations.txt gets them all. The last line is the whole suite's count. With arguments, one plain pytest
# session with them instead (make test PYTEST_ARGS='tests/e2e/test_golden.py').
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
echo "== tests/slurm and tests/multinode in one session, tests/unit, tests/mpi and tests/e2e shared by two beside it"
echo "   (the second session's output and the cluster's follow when they end)"
session cluster tests/slurm tests/multinode >"$results/cluster.log" 2>&1 &
cluster_pid=$!
mkdir "$results/claims"
# one torch thread for the members the unit tests train in process (runs set theirs from --torch-threads): two
# threads would spin against the other sessions' ranks on 2 cores
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
shared=(tests/unit tests/mpi tests/e2e --share "$results/claims")
session shared-2 "${shared[@]}" >"$results/shared-2.log" 2>&1 &
second_pid=$!
session shared-1 "${shared[@]}"
first=$?
wait "$second_pid"
second=$?
wait "$cluster_pid"
cluster=$?
echo "== the second shared session, exit status $second:"
cat "$results/shared-2.log"
echo "== tests/slurm and tests/multinode, exit status $cluster:"
cat "$results/cluster.log"
cat test-durations-shared-1.txt test-durations-shared-2.txt test-durations-cluster.txt >test-durations.txt 2>/dev/null
echo "== $((SECONDS - started)) s in all; exit statuses: shared $first and $second, slurm and multinode $cluster"
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
for status in "$first" "$second" "$cluster"; do
    # pytest's 5 (no test collected: a tier with nothing to run for this user) is not a failure
    if [[ $status != 0 && $status != 5 ]]; then
        exit 1
    fi
done
exit 0

#!/usr/bin/env bash
# `make test`: the five tiers in three pytest sessions at once, so that the 2 cores stay busy to the end. One
# session runs the SLURM and two-host tiers (a private SLURM's scheduling, requeue holds and grace times, and
# namespaces: mostly waiting). Two sessions (EVO_TEST_SESSIONS) share the unit, MPI and end-to-end tiers
# (--share, tests/conftest.py): each collects them all, longest files first (tests/file-seconds.txt), and runs a
# file only if it claims it before the other, so they draw files from one queue, each file runs once with its
# module fixtures, and they end within a file of each other. (Three sharing sessions were measured slower: 798 s
# against 707-726 s, their extra processes costing more CPU than the idle moments they filled.) Each session writes its durations to test-durations-<session>.txt;
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
# Python's compiled modules and pytest's rewritten test modules cached as usual (in __pycache__, which git
# ignores) even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on this project's hosts): every
# session would rewrite every test module's asserts again, about 8 s of CPU each, and every rank compile evo
unset PYTHONDONTWRITEBYTECODE
started=$SECONDS
sharing=${EVO_TEST_SESSIONS:-2}
echo "== tests/slurm and tests/multinode in one session, tests/unit, tests/mpi and tests/e2e shared by $sharing beside it"
echo "   (the other sessions' output follows when they end)"
session cluster tests/slurm tests/multinode >"$results/cluster.log" 2>&1 &
pids=($!)
mkdir "$results/claims"
# one torch thread for the members the unit tests train in process (runs set theirs from --torch-threads): two
# threads would spin against the other sessions' ranks on 2 cores
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
shared=(tests/unit tests/mpi tests/e2e --share "$results/claims")
for ((i = 2; i <= sharing; i++)); do
    session "shared-$i" "${shared[@]}" >"$results/shared-$i.log" 2>&1 &
    pids+=($!)
done
session shared-1 "${shared[@]}"
statuses=($?)
for pid in "${pids[@]}"; do
    wait "$pid"
    statuses+=($?)
done
for ((i = 2; i <= sharing; i++)); do
    echo "== shared session $i, exit status ${statuses[i]}:"
    cat "$results/shared-$i.log"
done
echo "== tests/slurm and tests/multinode, exit status ${statuses[1]}:"
cat "$results/cluster.log"
cat test-durations-shared-*.txt test-durations-cluster.txt >test-durations.txt 2>/dev/null
echo "== $((SECONDS - started)) s in all; exit statuses: shared ${statuses[0]} ${statuses[*]:2}, slurm and multinode ${statuses[1]}"
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
for status in "${statuses[@]}"; do
    # pytest's 5 (no test collected: a tier with nothing to run for this user) is not a failure
    if [[ $status != 0 && $status != 5 ]]; then
        exit 1
    fi
done
exit 0

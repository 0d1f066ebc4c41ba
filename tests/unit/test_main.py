"""The entry point's start-up (evo/main.py) on every bad input, with torch and SB3 unimportable: rank 0 refuses
it once, every rank exits 2, nothing is written. Both ranks' start-up run in one fresh Python process
(tests/startup_refusals.py: rank 1's communicator answers rank 0's broadcasts), so no MPI job is needed and a
module that imports torch on the way to a refusal fails here. Moved down from the e2e tier, where each case
was an ``mpiexec -n 2`` job of its own; what stays there (tests/e2e/test_resilience.py) is one refusal at each
step of start-up under a real mpiexec, on every real rank."""

import json
import os
import subprocess
import sys

from tests.support import ROOT


def test_every_bad_input_exits_2_once_and_touches_nothing(tmp_path):
    """Each bad input is refused by rank 0 once, every rank exits 2, nothing is written; and no rank
    imports torch or SB3 first (they are blocked here), so the answer comes at once on any number
    of ranks. The same block around a good input: the run needs torch, and fails without it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    command = ["tests/without.py", "torch,stable_baselines3", "tests/startup_refusals.py", str(tmp_path)]
    completed = subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert len(result["cases"]) == 26
    for case in result["cases"]:
        argv, message, stderr = case["argv"], case["message"], "".join(case["stderrs"])
        assert case["statuses"] == [2, 2], (argv, stderr[-2000:])  # rank 0 and rank 1
        assert stderr.count(message) == 1 and message in case["stderrs"][0], (argv, stderr)
        assert stderr.count("error:") == 1 and "Traceback" not in stderr, (argv, stderr)
        assert not case["never_created"], argv
        assert case["digest"] == result["before"], argv
    good = result["good"]
    assert good["status"] != 0 and "torch is blocked by tests/without.py" in good["stderr"], good["stderr"][-2000:]

"""bench/peers.py's process-tree measurement (bench/proctree.py) on a real tree of processes, in
a fresh Python: every process seen, memory and CPU summed, a daemon left behind reported and ended."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import ROOT

MB = 1_000_000

# A tree of real processes: two children that each hold 80 MB at the same time (each writes a
# marker once its bytes are in, and lets go half a second after both are), one that burns about
# 0.6 s of CPU, and a daemon (forked twice, so that its parent exits at once) that would sleep
# for a minute: it outlives the command and must be reported and ended.
TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time

    hold = (
        "import os, sys, time\\n"
        "x = b'1' * 80_000_000\\n"
        "open(sys.argv[1] + '.held-' + sys.argv[2], 'w').close()\\n"
        "while not all(os.path.exists(sys.argv[1] + '.held-' + k) for k in '01'): time.sleep(0.02)\\n"
        "time.sleep(0.5)\\n"
    )
    burn = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"
    daemon = (
        "import os, sys, time\\n"
        "if os.fork() == 0:\\n"
        "    open(sys.argv[1], 'w').write(str(os.getpid()))\\n"
        "    time.sleep(60)\\n"
    )
    children = [subprocess.Popen([sys.executable, "-c", hold, sys.argv[1], k]) for k in "01"]
    children.append(subprocess.Popen([sys.executable, "-c", burn]))
    subprocess.run([sys.executable, "-c", daemon, sys.argv[1]], check=True)
    for child in children:
        child.wait()
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    """
)


def measure_in_child(command: list[str], tmp_path: Path) -> dict:
    """bench.proctree.measure run in a fresh Python (it makes its process a subreaper, which
    pytest's own process should not become)."""
    code = (
        "import json, sys; from bench.proctree import measure; "
        f"print(json.dumps(measure({command!r}, interval=0.1, timeout=60).to_dict()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_measure_sees_every_process_of_the_tree_and_ends_what_is_left(tmp_path):
    daemon_pid_file = tmp_path / "daemon.pid"
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    usage = measure_in_child([sys.executable, str(script), str(daemon_pid_file)], tmp_path)

    assert usage["returncode"] == 0
    names = [peak["name"] for peak in usage["peaks"]]
    assert len(names) == usage["processes"] >= 5  # the script, 3 children, the daemon (its parent may be missed)
    holders = [peak for peak in usage["peaks"] if peak["peak_rss_kb"] * 1024 >= 80 * MB]
    assert len(holders) == 2
    assert usage["peak_rss_mb"] >= 160 + 3 * 5  # the two holders, and a few MB for every other python
    assert usage["peak_rss_mb"] == pytest.approx(sum(p["peak_rss_kb"] for p in usage["peaks"]) * 1024 / MB)
    assert usage["concurrent_rss_mb"] <= usage["peak_rss_mb"]
    assert 160 <= usage["concurrent_pss_mb"] <= usage["concurrent_rss_mb"]  # the holders' bytes are their own
    assert usage["cpu_s"] >= 0.6
    assert usage["cpu_reaped_s"] >= 0.6  # every process here is waited for
    assert 0.5 <= usage["wall_s"] < 60
    assert len(usage["left_behind"]) == 1  # the daemon
    daemon = int(daemon_pid_file.read_text())
    assert not Path(f"/proc/{daemon}").exists(), "the daemon outlived the measurement"


def test_measure_reports_a_failing_command(tmp_path):
    usage = measure_in_child([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path)
    assert usage["returncode"] == 3
    assert usage["processes"] <= 1
    assert usage["left_behind"] == []

"""Shared by the benchmark scripts: medians, markdown tables, JSON output, the processor."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from evo.config.precision import REPORTED_FLAGS, cpu_flags, cpuinfo_field


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: str | None, records: list[dict] | dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(records, indent=1) + "\n")


def processor() -> dict:
    """The processor's name and the flags that decide how fast the network runs."""
    name = cpuinfo_field("model name") or "unknown"
    flags = cpu_flags()
    return {"model": name, "flags": {flag: flag in flags for flag in REPORTED_FLAGS}}


def processor_line(cpu: dict) -> str:
    """``processor: NAME; avx2 yes, ...`` as the benchmarks print it."""
    return f"processor: {cpu['model']}; " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in cpu["flags"].items())


def results_under_mpiexec(script: str, ranks: int, args: Sequence[str]) -> list | dict:
    """Run ``script --worker ARGS`` on ``ranks`` ranks (this interpreter's mpiexec, as root too)
    and return what its rank 0 printed on its ``RESULTS <json>`` line."""
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.setdefault("OMPI_MCA_btl", "^ofi")  # no fabric here: libfabric only sleeps a second at exit
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    command = [mpiexec, "-n", str(ranks), "--oversubscribe", sys.executable, script, "--worker", *args]
    root = Path(__file__).resolve().parent.parent
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=root).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULTS "))
    return json.loads(line[len("RESULTS ") :])

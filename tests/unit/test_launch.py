"""The launcher's refusals (evo/launch.py's main) in this process: as root without Open MPI's two variables,
and more ranks than cores without --oversubscribe, each said with its fix and exit status 2 before any
mpiexec starts. (Its pure checks: tests/unit/rundir/test_checkpoint.py::test_launch_checks_root_and_cores;
what needs its processes, a refusal's noise, a stop passed on, a kill taking the job with it:
tests/e2e/test_resilience.py.) Moved down from the e2e tier, where each ran ``python -m evo.launch``."""

import os

import evo.launch
from evo.launch import ROOT_VARIABLES, available_cores


def test_launcher_names_the_root_variables(monkeypatch, capsys):
    """As root (made so here, whoever runs the tests: Open MPI's check applies to root only)."""
    for name in ROOT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert evo.launch.main(["-n", "2", "pbt_rl_truct.py"]) == 2
    assert "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in capsys.readouterr().err


def test_launcher_asks_for_oversubscribe(monkeypatch, capsys):
    for name in ROOT_VARIABLES:
        monkeypatch.setenv(name, "1")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert cores == available_cores()
    assert evo.launch.main(["-n", str(cores + 1), "pbt_rl_truct.py"]) == 2
    assert "add --oversubscribe" in capsys.readouterr().err

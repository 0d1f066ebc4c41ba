"""The launcher's refusals (evo/launch.py's main) in this process: as root without Open MPI's two variables,
and more ranks than cores without --oversubscribe, each said with its fix and exit status 2 before any
mpiexec starts. (Its pure checks: tests/unit/rundir/test_checkpoint.py::test_launch_checks_root_and_cores;
what needs its processes, a refusal's noise, a stop passed on, a kill taking the job with it:
tests/e2e/test_resilience.py.) Moved down from the e2e tier, where each ran ``python -m evo.launch``."""

import os
import sys

import pytest

import evo.launch
from evo.launch import NONZERO_BANNER, PMIX_ERROR, ROOT_VARIABLES, RULE, available_cores, run_quietly


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


BANNER = [RULE, f"prterun {NONZERO_BANNER},", "thus causing the job to be terminated.", RULE]
PMIX = f"[vm:05741] {PMIX_ERROR} in file pmix_server.c at line 3146"
OTHER = [RULE, "An Open MPI message of another kind", RULE]


@pytest.mark.parametrize(
    "lines",
    [
        ["evo: invalid configuration", *BANNER, PMIX],
        ["evo: invalid configuration", PMIX, *BANNER],
        # under load PMIx's line can come between the banner's opening rule and its first line (seen once, with
        # two make tests on 2 cores): the banner then read as another message and went through
        ["evo: invalid configuration", BANNER[0], PMIX, *BANNER[1:]],
    ],
    ids=["after", "before", "inside"],
)
def test_a_refusals_open_mpi_banner_and_pmix_line_are_left_out_wherever_they_fall(lines, capfd):
    """A job's stderr as mpiexec writes it (a process printing ``lines``): with evo's refusal (status 2) the
    banner and PMIx's line are left out, another message is not; with another failure (1) every line goes through."""
    for status in (2, 1):
        script = f"import sys; sys.stderr.write({chr(10).join([*lines, *OTHER])!r} + chr(10)); sys.exit({status})"
        assert run_quietly([sys.executable, "-c", script]) == status
        err = capfd.readouterr().err
        assert "evo: invalid configuration" in err and "An Open MPI message of another kind" in err
        if status == 2:
            assert NONZERO_BANNER not in err and PMIX_ERROR not in err, err
        else:
            assert NONZERO_BANNER in err and PMIX_ERROR in err

"""An explorer is one class and one registry line: a test-only explorer (tests/mirror_explorer.py),
registered here with its one line, explores an asynchronous run in one process
(tests/support.py:run_in_process), and the run's records show its changes applied. Moved down from the e2e
tier, where the module registering it ran under ``mpiexec -n 2``: what it checks is the registry's, the
explorer's and the records'. (The config offering it, checking it and its help:
tests/unit/config/test_capabilities.py.)"""

import pytest
import yaml

from evo.core.explorers import EXPLORERS
from evo.core.kinds import kind_from_spec
from tests.mirror_explorer import HOW, Mirror, mirrored
from tests.support import (
    PPO_SIX,
    TINY_DEFAULT,
    budget,
    read_lineage,
    read_population,
    run_in_process,
    write_hyperparams,
)

INTERVALS = 3


def test_a_registered_explorer_explores_an_asynchronous_run(tmp_path, monkeypatch):
    monkeypatch.setitem(EXPLORERS, "mirror", Mirror)  # the registry line
    run_dir = tmp_path / "run"
    # a half of 4 is 2 recipients at each ready point that sees them: an explore is all but certain
    flags = ["--asynchronous", "--explore", "mirror", "--truncation-fraction", "0.5", *budget(4, INTERVALS, 128)]
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    common = ["--hyperparams", str(hyperparams), "--run-dir", str(run_dir), "--seed", "5", "--tb-writer", "False"]
    assert run_in_process([*flags, *common]) == 0

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["explore"] == "mirror" and config["asynchronous"]
    space = {name: kind_from_spec(spec) for name, spec in config["agent"]["search_space"].items()}
    assert sorted(space) == sorted(PPO_SIX)
    rows = {(int(row["member"]), int(row["generation"])): row for row in read_population(run_dir)}
    assert sorted(rows) == [(member, interval) for member in range(4) for interval in range(1, INTERVALS + 1)]

    exploits = [entry for entry in read_lineage(run_dir) if "recipient" in entry]
    assert exploits, "no member explored"
    followed = 0
    for exploit in exploits:
        assert [change.split(" : ")[0] for change in exploit["changes"]] == list(space)
        assert all(f"({HOW})" in change for change in exploit["changes"]), exploit["changes"]
        donor = rows[(exploit["donor"], exploit["donor_interval"])]  # the values of the ready point it copied
        expected = {name: mirrored(kind, float(donor[name])) for name, kind in space.items()}
        assert exploit["new_hparams"] == pytest.approx(expected, rel=1e-6)
        after = rows.get((exploit["recipient"], exploit["generation"] + 1))
        if after is not None:  # the recipient trains its next interval with them
            assert {name: float(after[name]) for name in space} == pytest.approx(exploit["new_hparams"], rel=1e-6)
            followed += 1
    assert followed, "no recipient trained an interval after its explore"

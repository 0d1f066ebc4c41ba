"""evo-export refuses a run whose members use the IMPALA CNN (evo's own network class, which SB3 cannot load
without evo), pointing to evo-evaluate: exit 2, nothing written, on a real tiny Procgen run made in this process
(one member, one generation of 64 env steps: the refusal comes before any member is loaded). Exports that SB3
loads, played where evo is not installed: tests/e2e/test_export.py."""

from __future__ import annotations

from evo.tools import export as export_tool
from tests.support import run_in_process, tree_digest

TINY_BIGFISH = ["--env-id", "bigfish", "--hyperparams", "n_envs:2", "n_steps:32", "n_minibatches:2", "n_epochs:1"]
TINY_BIGFISH += ["--num-agents", "1", "--total-generations", "1", "--agent-training-steps", "64", "--strategy", "none"]


def test_export_refuses_an_impala_member_naming_evo_evaluate(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert run_in_process([*TINY_BIGFISH, "--run-dir", str(run_dir), "--tb-writer", "False"]) == 0
    before = tree_digest(run_dir)
    capsys.readouterr()
    assert export_tool.main([str(run_dir), "--out", str(tmp_path / "logs")]) == 2
    message = capsys.readouterr().err
    assert "IMPALA" in message and "evo-evaluate" in message and "Traceback" not in message
    assert not (tmp_path / "logs").exists()
    assert tree_digest(run_dir) == before

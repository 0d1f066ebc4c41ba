"""A run whose deterministic evaluation scores rank no one says so once, with the fix, in both modes (the
decision's cases are tests/unit/core/test_evaluation.py's). The env (tests/alternate_env.py) pays for
changing action: sampled actions earn, the most likely action repeated earns 0, as on MiniGrid."""

import pytest

from tests.in_process import logged
from tests.support import TINY_DEFAULT, budget

ENV = ["--env-id", "tests.alternate_env:Alternate-v0"]
FIX = "--eval-actions sampled scores the policy as it acts in training"


def run(tmp_path, name, *flags):
    """4 members, 2 generations of 128 env steps, selected on 2 evaluation episodes; the run's log."""
    hp = tmp_path / "alternate.yml"
    hp.write_text(TINY_DEFAULT)
    argv = [*ENV, "--hyperparams", str(hp), *budget(4, 2, 128), "--tb-writer", "False", "--progress-interval", "0"]
    argv += ["--seed", "3", "--eval-episodes", "2", "--select-on", "test", "--run-dir", str(tmp_path / name), *flags]
    status, log = logged(argv)
    assert status == 0
    return log


@pytest.mark.parametrize(
    "mode, where",
    [([], "generation 1: every member scored 0 "), (["--asynchronous"], "'s interval 1, every member's latest scores")],
    ids=["synchronous", "asynchronous"],
)
def test_equal_deterministic_scores_are_said_once_with_the_fix(tmp_path, mode, where):
    log = run(tmp_path, "argmax", *mode)
    said = [line for line in log.splitlines() if FIX in line]
    assert len(said) == 1 and where in said[0], log  # every generation scored 0: said at the first only
    assert "every member scored 0 on its evaluation episodes (deterministic actions" in said[0]


def test_sampled_evaluation_is_not_said(tmp_path):
    assert FIX not in run(tmp_path, "sampled", "--eval-actions", "sampled")

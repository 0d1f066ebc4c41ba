"""The tie rule in real runs: Acrobot-v1 members that have not learnt yet all score -500
(the episode's limit), so winner-takes-all sees a population tied to the last digit."""

import json

from tests.support import mpiexec, read_population

TINY_ACROBOT = ["--env-id", "Acrobot-v1", "--num-agents", "2", "--total-generations", "2"]
TINY_ACROBOT += ["--agent-training-steps", "128", "--eval-episodes", "1", "--select-on", "test"]
TINY_ACROBOT += ["--hyperparams", "n_envs:2", "n_steps:64", "n_minibatches:2", "n_epochs:1"]


def run(tmp_path, *flags):
    run_dir = tmp_path / ("run" + "".join(flags))
    result = mpiexec(2, ["pbt_rl_wta.py", *TINY_ACROBOT, *flags, "--run-dir", str(run_dir)], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    return read_population(run_dir), lineage, result.stdout + result.stderr


def test_tied_members_keep_their_weights_unless_told_to_copy(tmp_path):
    rows, lineage, log = run(tmp_path)
    first = [float(row["score"]) for row in rows if row["generation"] == "1"]
    assert first == [-500.0, -500.0]  # the premise: a tie
    kept = [e for e in lineage if e["generation"] == 1]
    assert [(e["recipient"], e["donor"]) for e in kept] == [(1, 1)]  # explores, copies nobody
    assert kept[0]["old_hparams"] != kept[0]["new_hparams"]
    first_rows = {row["member"]: row for row in rows if row["generation"] == "1"}
    assert first_rows["1"]["donor"] == ""  # population.csv agrees: member 1 copied nobody
    assert "INFO   member 1 (-500.00) keeps its weights: " in log
    assert "member 1 (-500.00) <- member 0 (-500.00)" not in log  # generation 1: nobody copied

    rows, lineage, log = run(tmp_path, "--ties", "copy")
    copied = [e for e in lineage if e["generation"] == 1]
    assert [(e["recipient"], e["donor"]) for e in copied] == [(1, 0)]  # the old rule: member 0, by index
    assert {row["member"]: row for row in rows if row["generation"] == "1"}["1"]["donor"] == "0"
    assert "INFO   member 1 (-500.00) <- member 0 (-500.00): " in log

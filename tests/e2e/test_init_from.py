"""``--init-from`` under mpiexec (what crosses the process boundary: each rank reads the source itself, and rank
0's refusal at start-up ends every rank). Two ranks start a population from an evo export's zip: at generation 0
every member, on either rank, plays as the zip loaded by SB3 alone (the same action probabilities), then the run
trains; a DQN agent's zip in a PPO run is refused with exit status 2 on every rank and nothing written. A run's
member (``RUN:MEMBER``, also into an asynchronous run), the other refusals (a CartPole agent in Pendulum ...), the
hyperparameters and the bit-for-bit state: tests/unit/runner/test_init_from.py, in process.
"""

import numpy as np
import torch
from stable_baselines3 import DQN, PPO

from evo.rundir.checkpoint import load_payload
from evo.tools import export as export_tool
from evo.tools.saved import load, open_run, population
from tests.support import budget, mpiexec, read_lineage, run_in_process, tree_digest, write_hyperparams


def test_a_population_starts_from_an_export_on_two_ranks_and_a_dqn_zip_is_refused(tmp_path):
    tiny = write_hyperparams(tmp_path)
    common = ["--env-id", "CartPole-v1", "--conf-file", str(tiny), "--tb-writer", "False"]
    assert run_in_process([*common, *budget(2, 1, 128), "--run-dir", str(tmp_path / "source")]) == 0
    assert export_tool.main([str(tmp_path / "source"), "--out", str(tmp_path / "export")]) == 0
    zip_path = tmp_path / "export" / "ppo" / "CartPole-v1_1" / "CartPole-v1.zip"

    run_dir = tmp_path / "run"
    args = ["pbt_rl_truct.py", *common, *budget(4, 1, 128), "--init-from", str(zip_path), "--keep-checkpoints", "5"]
    done = mpiexec(2, [*args, "--run-dir", str(run_dir)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--init-from: every new member starts from" in done.stderr + done.stdout
    run = open_run(run_dir)
    source = PPO.load(zip_path, device="cpu")
    observations = torch.as_tensor(np.random.default_rng(0).normal(size=(64, 4)), dtype=torch.float32)
    expected = source.policy.get_distribution(observations).distribution.probs
    for member_file in population(run, 0):  # generation 0: built on ranks 0 and 1, before any training
        member = load(run, member_file)
        try:
            assert torch.equal(member.model.policy.get_distribution(observations).distribution.probs, expected)
        finally:
            member.close()
        trained = next(m for m in population(run) if m.member == member_file.member)
        assert not np.array_equal(load_payload(trained.path)["state"], load_payload(member_file.path)["state"])
    assert read_lineage(run_dir)[0]["event"] == "init"

    DQN("MlpPolicy", "CartPole-v1", device="cpu").save(tmp_path / "dqn.zip")
    before = tree_digest(tmp_path)
    refused = mpiexec(2, [*args[:-4], "--init-from", str(tmp_path / "dqn.zip"), "--run-dir", str(tmp_path / "new")])
    assert refused.returncode == 2, refused.stderr[-3000:]
    said = "the source is a DQN agent (its policy is DQNPolicy); this run trains PPO"
    assert refused.stderr.count(said) == 1, refused.stderr[-3000:]
    assert not (tmp_path / "new").exists() and tree_digest(tmp_path) == before

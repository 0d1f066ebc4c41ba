"""experiments/posture.py on a real run: the look at a HalfCheetah run's members from its last
checkpoint (the on-its-back test itself is in tests/unit/experiments/test_posture.py)."""

import math

from experiments.posture import posture, run_config
from tests.support import mpiexec, need_mujoco


def test_posture_of_a_real_run_reads_every_member_of_its_last_checkpoint(tmp_path):
    need_mujoco()
    run_dir = tmp_path / "run"
    arguments = ["--env-id", "HalfCheetah-v5", "--num-agents", "2", "--total-generations", "1"]
    arguments += ["--agent-training-steps", "512", "--eval-episodes", "0", "--run-dir", str(run_dir)]
    result = mpiexec(1, ["pbt_rl_truct.py", *arguments], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    config = run_config(run_dir)
    assert (config.env_id, config.num_agents, config.world_size) == ("HalfCheetah-v5", 2, 1)
    rows = posture(run_dir, episodes=1)
    assert [row["member"] for row in rows] == [0, 1]
    for row in rows:
        assert row["checkpoint"] == "gen_000001"
        assert len(row["returns"]) == 1 and math.isfinite(row["returns"][0])
        assert 0.0 <= row["on_its_back"][0] <= 1.0

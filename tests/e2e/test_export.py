"""evo-export and evo-evaluate on real runs (PPO, SAC and TD3 on Pendulum-v1, SAC on HalfCheetah-v5 with
normalisation): the exported agent loads and plays in a virtualenv with SB3 and rl_zoo3 but no evo
(.venv-zoo, built by scripts/zoo-venv.sh), its per-episode returns equal evo-evaluate's of the same
weights on the same seed, rl_zoo3's enjoy plays it, and neither tool changes a file of the run.
Bad input exits with status 2 and a message naming the value and the fix."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from tests.e2e.runs import enjoy, tree_digest, zoo_venv_python
from tests.support import ROOT, mpi_env, mpiexec

PLAY = ROOT / "scripts" / "zoo_play.py"
SEED, EPISODES = 11, 2
OFF_POLICY = [
    *("--agent-training-steps", "200", "--hyperparams", "learning_starts:50", "batch_size:32", "buffer_size:2000"),
    *("gradient_steps:1", "policy_kwargs:{net_arch: [32, 32]}"),
]
RUNS = {
    "ppo": ["--env-id", "Pendulum-v1", "--agent-training-steps", "256"]
    + ["--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1", "normalize:true"],
    "sac": ["--algo", "sac", "--env-id", "Pendulum-v1", *OFF_POLICY],
    "td3": ["--algo", "td3", "--env-id", "Pendulum-v1", *OFF_POLICY],
    "sac-mujoco": ["--algo", "sac", "--env-id", "HalfCheetah-v5", "--env-kwargs", "max_episode_steps:100"]
    + [*OFF_POLICY, "normalize:true"],
}


@pytest.fixture(scope="module")
def zoo_python() -> Path:
    return zoo_venv_python()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Each run of RUNS, started on demand: 2 members on one rank, 2 generations, seed 5."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            if "mujoco" in name:
                pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install EXTRAS=mujoco")
            run_dir = tmp_path_factory.mktemp(name) / "run"
            flags = ["--num-agents", "2", "--total-generations", "2", "--run-dir", str(run_dir), "--seed", "5"]
            result = mpiexec(1, ["pbt_rl_truct.py", *RUNS[name], *flags])
            assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
            made[name] = run_dir
        return made[name]

    return get


def evaluated(run_dir: Path, tmp_path: Path, *flags: str) -> dict:
    """evo-evaluate's JSON for ``flags``, the run dir unchanged."""
    before = tree_digest(run_dir)
    out = tmp_path / "evaluation.json"
    assert evaluate_tool.main([str(run_dir), "--json", str(out), *flags]) == 0
    assert tree_digest(run_dir) == before
    return json.loads(out.read_text())


def exported(run_dir: Path, out: Path, *flags: str) -> Path:
    """evo-export's experiment folder, the run dir unchanged."""
    before, existing = tree_digest(run_dir), set(out.glob("*/*"))
    assert export_tool.main([str(run_dir), "--out", str(out), *flags]) == 0
    assert tree_digest(run_dir) == before
    (experiment,) = set(out.glob("*/*")) - existing
    return experiment


def played(zoo_python: Path, model: Path, algo: str, env_id: str, stats: Path | None, env_kwargs=None) -> dict:
    """scripts/zoo_play.py in the evo-less virtualenv, run from outside the repository."""
    command = [str(zoo_python), str(PLAY), str(model), algo, env_id, str(SEED), str(EPISODES)]
    command += [str(stats) if stats else "", json.dumps(env_kwargs or {})]
    result = subprocess.run(command, cwd=model.parent, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(RUNS))
def test_the_exported_agent_plays_without_evo_and_its_returns_match_evo_evaluate(name, runs, zoo_python, tmp_path):
    """The run's best member exported; in .venv-zoo stock SB3 loads it (SB3's policy class, torch's
    Adam) and its returns on one env of seed SEED equal evo-evaluate's of the same member to 1e-6."""
    run_dir = runs(name)
    algo = name.split("-")[0]
    env_id = RUNS[name][RUNS[name].index("--env-id") + 1]
    experiment = exported(run_dir, tmp_path / "logs")
    assert experiment == tmp_path / "logs" / algo / f"{env_id}_1"
    model, stats_dir = experiment / f"{env_id}.zip", experiment / env_id
    normalizes = "normalize:true" in RUNS[name]
    assert (stats_dir / "vecnormalize.pkl").is_file() == normalizes
    assert (experiment / "best_model.zip").is_file()
    config = yaml.load((stats_dir / "config.yml").read_text(), Loader=yaml.UnsafeLoader)  # zoo reads it so
    assert list(config) == sorted(config) and config["policy"] == "MlpPolicy"
    assert bool(config["normalize"]) == normalizes and "net_arch" in config["policy_kwargs"]

    env_kwargs = {"max_episode_steps": 100} if "mujoco" in name else {}
    if env_kwargs:
        assert config["env_kwargs"] == env_kwargs
    zoo = played(zoo_python, model, algo, env_id, stats_dir / "vecnormalize.pkl" if normalizes else None, env_kwargs)
    policy = {
        "ppo": "common.policies.ActorCriticPolicy",
        "sac": "sac.policies.SACPolicy",
        "td3": "td3.policies.TD3Policy",
    }
    assert zoo["classes"] == {"policy": f"stable_baselines3.{policy[algo]}", "optimizers": ["torch.optim.adam.Adam"]}

    evo = evaluated(run_dir, tmp_path, "--member", "best", "--episodes", str(EPISODES), "--seed", str(SEED))
    (member,) = evo["members"]
    assert len(member["returns"]) == EPISODES
    assert zoo["returns"] == pytest.approx(member["returns"], abs=1e-6, rel=0)


def test_rl_zoo_enjoy_plays_the_export_and_its_best_model(runs, zoo_python, tmp_path):
    """python -m rl_zoo3.enjoy (in .venv-zoo) on the exported PPO agent with normalisation, the
    exported member and best_model.zip (--load-best); a second export takes the next id."""
    run_dir = runs("ppo")
    out = tmp_path / "logs"
    exported(run_dir, out)
    exported(run_dir, out, "--member", "0", "--generation", "1")
    assert sorted(p.name for p in (out / "ppo").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]
    for extra in ([], ["--load-best"]):
        result = subprocess.run(
            [str(zoo_python), "-m", "rl_zoo3.enjoy", "--algo", "ppo", "--env", "Pendulum-v1", "-f", str(out)]
            + ["--exp-id", "2", "--no-render", "-n", "400", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        assert "Loading running average" in result.stdout
        assert result.stdout.count("Episode Reward:") == 2  # 400 steps: two 200-step episodes


@pytest.mark.parametrize("name", ["sac", "td3", "sac-mujoco"])
def test_rl_zoo_enjoy_plays_exported_off_policy_agents(name, runs, zoo_python, tmp_path):
    """python -m rl_zoo3.enjoy on exported SAC and TD3 agents, HalfCheetah's with its normalisation and
    its env_kwargs (100-step episodes) read back from the export's config.yml."""
    run_dir = runs(name)
    algo = name.split("-")[0]
    env_id = RUNS[name][RUNS[name].index("--env-id") + 1]
    out = tmp_path / "logs"
    exported(run_dir, out)
    printed = enjoy(zoo_python, algo, env_id, out, 200)
    assert ("Loading running average" in printed) == ("normalize:true" in RUNS[name])
    # 200 steps: one Pendulum episode, two of HalfCheetah's 100-step ones
    assert printed.count("Episode Reward:") == (2 if "mujoco" in name else 1)


def test_evaluate_plays_every_member_and_the_kept_best_on_the_same_fresh_episodes(runs, tmp_path, capsys):
    """Without --member: each member of the last checkpoint and the kept best, on the same episodes of
    the default seed (derived from the run's, not one any env of the run had); members holding the same
    weights get the same returns; the table has a row each."""
    from evo.core.streams import member_seed
    from evo.tools.saved import evaluation_seed

    run_dir = runs("ppo")
    record = evaluated(run_dir, tmp_path, "--episodes", "3")
    assert record["seed"] == evaluation_seed(5)
    used = {member_seed(5, m, s) for m in range(2) for s in range(6000)}
    assert record["seed"] not in used
    rows = record["members"]
    assert [row["label"] for row in rows][:2] == ["0", "1"] and rows[-1]["label"].startswith("best-ever")
    assert all(len(row["returns"]) == 3 and row["generation"] == 2 for row in rows)
    best = rows[-1]
    twin = rows[best["member"]]
    assert best["returns"] == twin["returns"]  # the kept best of the last generation is that member's file
    table = capsys.readouterr().out
    assert "mean (3)" in table and table.count("\n") >= len(rows) + 2


def test_export_best_ever_matches_its_evaluation(runs, zoo_python, tmp_path):
    """--member best-ever exports the kept best (best.pt); its returns in .venv-zoo equal evo-evaluate's."""
    run_dir = runs("sac")
    experiment = exported(run_dir, tmp_path / "logs", "--member", "best-ever")
    zoo = played(zoo_python, experiment / "Pendulum-v1.zip", "sac", "Pendulum-v1", None)
    evo = evaluated(run_dir, tmp_path, "--member", "best-ever", "--episodes", str(EPISODES), "--seed", str(SEED))
    assert zoo["returns"] == pytest.approx(evo["members"][0]["returns"], abs=1e-6, rel=0)


def bad(tool: str, run_dir: Path, *flags: str) -> str:
    """``python -m evo.tools.<tool> RUN FLAGS``: exit status 2, nothing in RUN changed; its message."""
    before = tree_digest(run_dir)
    result = subprocess.run(
        [sys.executable, "-m", f"evo.tools.{tool}", str(run_dir), *flags],
        cwd=ROOT,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert tree_digest(run_dir) == before
    return result.stderr


def test_bad_input_exits_2_naming_the_value_and_the_fix(runs, tmp_path):
    run_dir = runs("ppo")
    message = bad("export", run_dir, "--member", "7", "--out", str(tmp_path / "logs"))
    assert "--member 7: not a member" in message and "0, 1" in message
    message = bad("evaluate", run_dir, "--generation", "9")
    assert "--generation 9" in message and "kept: 1, 2" in message
    assert "inside the run directory" in bad("export", run_dir, "--out", str(run_dir / "logs"))
    assert not (tmp_path / "logs").exists()
    blocker = tmp_path / "a-file"  # where a folder is needed: fails for root too, unlike permission bits
    blocker.write_text("")
    message = bad("export", run_dir, "--out", str(blocker / "logs"))
    assert f"{blocker} is a file, not a folder" in message and "Traceback" not in message

    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(run_dir / "config.yaml", empty / "config.yaml")
    message = bad("evaluate", empty)
    assert "no complete checkpoint" in message and "give another run" in message
    assert "not an evo run directory" in bad("export", tmp_path)


def test_export_refuses_an_impala_member_naming_evo_evaluate(tmp_path):
    """A Procgen run with the IMPALA CNN (evo's own class): refused, pointing to evo-evaluate; one
    tiny generation of bigfish is enough, the refusal comes before any member is loaded."""
    run_dir = tmp_path / "run"
    hyperparams = ["--hyperparams", "n_envs:2", "n_steps:32", "n_minibatches:2", "n_epochs:1"]
    result = mpiexec(
        1,
        ["pbt_rl_truct.py", "--env-id", "bigfish", *hyperparams, "--num-agents", "1", "--total-generations", "1"]
        + ["--agent-training-steps", "64", "--run-dir", str(run_dir), "--strategy", "none"],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    message = bad("export", run_dir, "--out", str(tmp_path / "logs"))
    assert "IMPALA" in message and "evo-evaluate" in message
    assert not (tmp_path / "logs").exists()


PROBS = """
import json, sys
import numpy as np
from stable_baselines3 import PPO
model = PPO.load(sys.argv[1], device="cpu")
frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)
probs = model.policy.get_distribution(model.policy.obs_to_tensor(frames)[0]).distribution.probs
print(json.dumps({"policy": type(model.policy).__name__, "extractor": type(model.policy.features_extractor).__name__,
                  "probs": probs.detach().numpy().tolist()}))
"""


def test_a_naturecnn_procgen_member_exports_and_acts_as_in_evo(zoo_python, tmp_path):
    """A Procgen member with SB3's NatureCNN exports as SB3's own CnnPolicy: in .venv-zoo PPO.load opens
    it, and its action probabilities on fixed frames equal the evo member's (the same weights; evo's
    channels-last convolutions differ only in rounding)."""
    import numpy as np

    from evo.tools.saved import choose, load, open_run

    run_dir = tmp_path / "run"
    hyperparams = ["--hyperparams", "policy:nature", "n_envs:2", "n_steps:32", "n_minibatches:2", "n_epochs:1"]
    result = mpiexec(
        1,
        ["pbt_rl_truct.py", "--env-id", "bigfish", *hyperparams, "--num-agents", "1", "--total-generations", "1"]
        + ["--agent-training-steps", "64", "--run-dir", str(run_dir), "--strategy", "none"],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    experiment = exported(run_dir, tmp_path / "logs")
    theirs = subprocess.run(
        [str(zoo_python), "-c", PROBS, str(experiment / "bigfish.zip")], capture_output=True, text=True, timeout=300
    )
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    zoo = json.loads(theirs.stdout.strip().splitlines()[-1])
    assert (zoo["policy"], zoo["extractor"]) == ("ActorCriticCnnPolicy", "NatureCNN")
    run = open_run(run_dir)
    member = load(run, choose(run, "0"))
    try:
        policy = member.model.policy
        frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)
        ours = policy.get_distribution(policy.obs_to_tensor(frames)[0]).distribution.probs.detach().numpy()
    finally:
        member.close()
    assert np.asarray(zoo["probs"]) == pytest.approx(ours, abs=1e-5)

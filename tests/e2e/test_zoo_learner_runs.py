"""The learners of issue 39 (A2C, DQN, QR-DQN, DDPG, TQC, CrossQ) end to end, one parametrised body for all:
a PBT run (4 members, 2 generations of 200 env steps, tiny networks and batches) records each learner's
explored settings in its declaration order, exploits and explores them, checkpoints; ``--resume`` carries it on
to a third generation; the best member, exported, loads in the evo-less virtualenv (.venv-zoo: stock SB3 and
sb3-contrib), where its returns equal evo-evaluate's on the same episodes; rl_zoo3's ``enjoy`` plays an
off-policy learner of each family (DQN: discrete actions; TQC: continuous, sb3-contrib's).

What crosses a process boundary here is the evo-less virtualenv: ONE process there plays every learner's
export, and enjoy runs once per family. The runs, their resumes, the exports and evo-evaluate run in this
process (tests/support.py:run_in_process, the tools' main), since what they check is the session's, the
driver's and the records', not MPI's: each learner's state moved between two ranks is proven by
tests/mpi/ranks/test_exchange.py::test_each_learners_state_is_identical_after_transfer (both transports) and
test_migration.py's cases, a resume in a new ``mpiexec`` job by tests/e2e/test_resilience.py, and rl_zoo3's
enjoy of an on-policy export (PPO, with normalisation and ``--load-best``) by tests/e2e/test_export.py. What each
learner proves in-process (values reaching the update, bit-exact exploits and resumes):
tests/unit/sb3/test_zoo_learners.py and the learners' own files."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from evo.learners import learner_spec
from tests.e2e.runs import enjoy, zoo_venv_python
from tests.e2e.test_export import EPISODES, SEED, evaluated, exported, play_job, played_in_zoo
from tests.support import generations_recorded, read_lineage, read_population, run_in_process

MEMBERS, STEPS = 4, 200
OFF_POLICY = [
    *("learning_starts:50", "batch_size:32", "buffer_size:4000", "gradient_steps:1"),
    "search_space:{batch_size: {choices: [32, 64]}}",  # the built-in choices go up to 512
]
RUNS = {
    "a2c": ("CartPole-v1", ["n_envs:2", "n_steps:10"]),
    "dqn": ("CartPole-v1", [*OFF_POLICY, "train_freq:4", "exploration_fraction:0.5"]),
    "qrdqn": ("CartPole-v1", [*OFF_POLICY, "train_freq:4", "policy_kwargs:{net_arch: [32, 32], n_quantiles: 10}"]),
    "ddpg": ("Pendulum-v1", OFF_POLICY),
    "tqc": ("Pendulum-v1", [*OFF_POLICY, "policy_kwargs:{net_arch: [32, 32], n_quantiles: 5}"]),
    "crossq": ("Pendulum-v1", OFF_POLICY),
}
"""Each learner's env and tiny settings (32-unit networks unless its policy_kwargs say more)."""
ENJOYED = ["dqn", "tqc"]
"""The learner rl_zoo3's enjoy plays for each off-policy family (enjoy loads these with a dummy buffer)."""


def flags(algo: str, run_dir: Path) -> list[str]:
    env_id, hyperparams = RUNS[algo]
    if not any(value.startswith("policy_kwargs:") for value in hyperparams):
        hyperparams = [*hyperparams, "policy_kwargs:{net_arch: [32, 32]}"]
    return [
        *("--algo", algo, "--env-id", env_id, "--agent-training-steps", str(STEPS), "--hyperparams", *hyperparams),
        *("--num-agents", str(MEMBERS), "--run-dir", str(run_dir), "--seed", "3", "--tb-writer", "False"),
    ]


@contextmanager
def evo_log():
    """What evo logs (INFO and up) during the block, message by message."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger, handler = logging.getLogger("evo"), Keep(logging.INFO)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@dataclass
class Made:
    """A learner's run: its directory (resumed to generation 3), what it held and logged after generation 2,
    and what its resume logged."""

    run_dir: Path
    config: dict
    recorded: dict[int, list[int]]
    rows: list[dict]
    lineage: list[dict]
    log: str
    resumed_log: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each learner's run, made on demand in this process: 2 generations, then ``--resume`` to a third."""
    made: dict[str, Made] = {}

    def get(algo: str) -> Made:
        if algo not in made:
            run_dir = tmp_path_factory.mktemp(algo) / "run"
            with evo_log() as log:
                assert run_in_process([*flags(algo, run_dir), "--total-generations", "2"]) == 0
            config = yaml.safe_load((run_dir / "config.yaml").read_text())
            recorded, rows, lineage = generations_recorded(run_dir), read_population(run_dir), read_lineage(run_dir)
            with evo_log() as resumed_log:
                assert run_in_process([*flags(algo, run_dir), "--resume", "--total-generations", "3"]) == 0
            made[algo] = Made(run_dir, config, recorded, rows, lineage, "\n".join(log), "\n".join(resumed_log))
        return made[algo]

    return get


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Each learner's best member exported (evo-export's main, the run unchanged): the folder given as --out
    (enjoy's -f) and the experiment folder made in it."""
    made = {}
    for algo in RUNS:
        out = tmp_path_factory.mktemp(algo) / "logs"
        made[algo] = (out, exported(runs(algo).run_dir, out))
    return made


@pytest.fixture(scope="module")
def zoo_python() -> Path:
    return zoo_venv_python()


@pytest.fixture(scope="module")
def zoo(exports, zoo_python, tmp_path_factory) -> dict[str, dict]:
    """Every learner's export played by stock SB3 / sb3-contrib in ONE process of the evo-less virtualenv."""
    jobs = {algo: play_job(exports[algo][1] / f"{RUNS[algo][0]}.zip", algo, RUNS[algo][0], None) for algo in RUNS}
    return played_in_zoo(zoo_python, jobs, tmp_path_factory.mktemp("zoo"))


@pytest.mark.parametrize("algo", list(RUNS))
def test_a_pbt_run_records_exploits_and_explores_the_learner(algo, runs):
    """The records after 2 generations: the learner's explored settings, in its declaration order, for every
    (generation, member); the bottom member copies a top one each generation, and its values change."""
    spec = learner_spec(algo)
    made = runs(algo)
    assert "(perturb explore)" in made.log
    explored = list(made.config["agent"]["search_space"])
    assert made.config["agent"]["algo"] == algo and explored == list(spec.record_order(explored)) and explored
    assert list(made.rows[0])[6 : 6 + len(explored)] == explored
    assert made.recorded == {1: list(range(MEMBERS)), 2: list(range(MEMBERS))}
    assert [exploit["generation"] for exploit in made.lineage] == [1, 2]
    for exploit in made.lineage:
        assert list(exploit["new_hparams"]) == explored and exploit["new_hparams"] != exploit["old_hparams"]


@pytest.mark.parametrize("algo", list(RUNS))
def test_resume_carries_the_learner_on_to_a_third_generation(algo, runs):
    made = runs(algo)
    assert f"resumed from {made.run_dir / 'checkpoints' / 'gen_000002'} (generation 2)" in made.resumed_log
    assert generations_recorded(made.run_dir) == {g: list(range(MEMBERS)) for g in (1, 2, 3)}
    assert len(read_lineage(made.run_dir)) == 3


@pytest.mark.parametrize("algo", list(RUNS))
def test_the_exported_learner_plays_in_stock_sb3_as_evo_evaluate_does(algo, runs, exports, zoo, tmp_path):
    """The best member's export: stock SB3 / sb3-contrib loads it (their policy class, torch's optimizers) and
    plays it as evo-evaluate plays the member. The first of these exports every learner's best member and plays
    every export (one process of .venv-zoo for all six)."""
    env_id = RUNS[algo][0]
    out, experiment = exports[algo]
    assert experiment == out / algo / f"{env_id}_1"
    played = zoo[algo]
    assert played["classes"]["policy"].split(".")[0] in ("stable_baselines3", "sb3_contrib")
    assert all(name.startswith("torch.optim.") for name in played["classes"]["optimizers"])
    evo = evaluated(runs(algo).run_dir, tmp_path, "--member", "best", "--episodes", str(EPISODES), "--seed", str(SEED))
    (member,) = evo["members"]
    # the same weights, so the same returns up to float32 rounding: evo's member computes with its tensors where
    # they lie in its flat buffer, not aligned to 64 bytes, and MKL's one-row kernels round an unaligned operand
    # in another order than the stock model's fresh (aligned) tensors (CrossQ's actor sits 24 bytes off: its
    # one-observation actions differ in the last bit, its returns over 200 steps by about 1e-5)
    assert played["returns"] == pytest.approx(member["returns"], rel=1e-7, abs=1e-6)


@pytest.mark.parametrize("algo", ENJOYED)
def test_rl_zoo_enjoy_plays_an_off_policy_learner_of_each_family(algo, exports, zoo_python):
    out, _ = exports[algo]
    assert enjoy(zoo_python, algo, RUNS[algo][0], out, 200).count("Episode Reward:") >= 1

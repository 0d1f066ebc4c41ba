"""What the off-policy learners' whole-run tests share (tests/unit/runner/test_sac_runs.py and test_td3_runs.py
in process, tests/e2e/test_offpolicy_resume.py under mpiexec): a run on a tiny budget (100 env steps per member
per generation, episodes of 100 steps, learning from env step 50 with small networks and minibatches and one
gradient step per collection), and the checks every off-policy run's records, TensorBoard scalars and PB2
history pass."""

import math
from pathlib import Path

import pytest
import yaml

from tests.gated_env import gate_flags
from tests.in_process import logged, scalar_tags
from tests.support import generations_recorded, last_manifest, read_lineage, read_population

MEMBERS, STEPS = 4, 100
BATCH_SIZES = [32, 64]
SHORT_EPISODES = "max_episode_steps:100"
"""Episodes cut to 100 steps (Pendulum's are 200, HalfCheetah's 1000): longer ones would finish none in a
generation, and members with no score tie and keep their own weights."""


def tiny(algo: str, env_id: str = "Pendulum-v1", gate: tuple | None = None) -> list[str]:
    """The flags of ``algo`` on ``env_id`` with the tiny budget and settings; with ``gate`` (the step
    and folder of tests/gated_env.py's gate), on ``env_id`` behind the gate."""
    space = f"batch_size: {{choices: {BATCH_SIZES}}}"  # the built-in choices go up to 1024
    if gate is None:
        env = ["--env-id", env_id, "--env-kwargs", SHORT_EPISODES]
    else:  # the gated env's id gets the YAML's default block: add what Pendulum's adds to it
        env = [*gate_flags(env_id, *gate), SHORT_EPISODES]
        space += ", target_entropy: {low: -2.0, high: 0.0, scale: additive}" if algo == "sac" else ""
    return [
        *("--algo", algo, *env, "--agent-training-steps", str(STEPS)),
        *("--hyperparams", "learning_starts:50", "batch_size:32", "buffer_size:4000"),
        "gradient_steps:1",  # one update per collection (the YAML's -1: one per env step, 5x the time)
        "policy_kwargs:{net_arch: [64, 64]}",
        f"search_space:{{{space}}}",
    ]


GENERATION_STEPS = STEPS + 9
"""The most env steps a member trains in a generation: STEPS rounded up to whole collections of its
train_freq, at most 10 in the built-in spaces."""


def run(algo: str, run_dir, *extra, strategy="truncation", transport="p2p", env_id="Pendulum-v1", generations=2):
    """``algo`` on ``env_id`` in this process (tests/support.py:run_in_process; ``strategy`` and ``transport``:
    those of the script it stands for): MEMBERS members for ``generations`` generations, seed 3; it must
    succeed. Returns what the run logged."""
    argv = [
        *tiny(algo, env_id),
        *("--num-agents", str(MEMBERS), "--total-generations", str(generations)),
        *("--run-dir", str(run_dir), "--seed", "3", *extra),
    ]
    status, log = logged(argv, strategy, transport)
    assert status == 0, log[-3000:]
    return log


def planned(train_freq: int) -> int:
    """A generation's env steps with ``train_freq``: the budget rounded up to whole collections."""
    return math.ceil(STEPS / train_freq) * train_freq


def check_records(
    run_dir, algo, env_id, names, generations, exploits_per_generation, *, row_hparams, check_row, check_hparams
):
    """config.yaml, population.csv and lineage.jsonl of an off-policy run in one process: ``algo`` on
    ``env_id`` with the tiny settings, the learner's columns (``names``) in its declaration order, one row
    per (generation, member), each generation's env steps whole collections of the member's train_freq,
    and the exploits recorded under the learner's names, consistently with the rows (``row_hparams``: a
    row's values as the lineage records them). ``check_row`` checks each row's values as the learner
    writes them, ``check_hparams`` each exploit's old and new values. Returns (config, rows, rows by
    (generation, member), lineage)."""
    config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
    assert config["agent"]["algo"] == algo and config["env_id"] == env_id
    assert (config["agent"]["learning_starts"], config["agent"]["buffer_size"]) == (50, 4000)

    rows = read_population(run_dir)
    assert list(rows[0]) == [
        *("generation", "member", "rank", "env_steps", "score", "donor"),
        *names,
        *("score_train", "score_test", "score_train_stale"),
    ]
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in range(1, generations + 1)}
    by_key = {(int(r["generation"]), int(r["member"])): r for r in rows}
    for (generation, member), row in by_key.items():
        assert row["rank"] == "0"  # one process: every member on rank 0
        check_row(row)
        before = int(by_key[(generation - 1, member)]["env_steps"]) if generation > 1 else 0
        assert int(row["env_steps"]) - before == planned(int(row["train_freq"])), row
        assert math.isfinite(float(row["score"])), row

    lineage = read_lineage(run_dir)
    assert len(lineage) == generations * exploits_per_generation
    for exploit in lineage:
        generation, recipient, donor = exploit["generation"], exploit["recipient"], exploit["donor"]
        assert list(exploit["old_hparams"]) == names and list(exploit["new_hparams"]) == names
        assert [change.split(" : ")[0] for change in exploit["changes"]] == names
        for hparams in (exploit["old_hparams"], exploit["new_hparams"]):
            check_hparams(hparams)
        assert by_key[(generation, recipient)]["donor"] == str(donor)
        assert float(by_key[(generation, donor)]["score"]) >= float(by_key[(generation, recipient)]["score"])
        assert exploit["old_hparams"] == pytest.approx(row_hparams(by_key[(generation, recipient)]))
        assert exploit["new_hparams"] != exploit["old_hparams"]
        if generation < generations:  # the recipient trains the next generation with the new values
            assert row_hparams(by_key[(generation + 1, recipient)]) == pytest.approx(exploit["new_hparams"])
    exploited = {(e["generation"], e["recipient"]) for e in lineage}
    assert {key for key, row in by_key.items() if row["donor"] != ""} == exploited
    return config, rows, by_key, lineage


def check_batch_size_moves(lineage, names) -> None:
    """batch_size is an ordered choice: it moves to a neighbour, or is resampled."""
    for exploit in lineage:
        change = exploit["changes"][names.index("batch_size")]
        assert "index" in change or "resample" in change, change


def check_tensorboard(run_dir, names) -> list:
    """Each member's TensorBoard scalars: SB3's actor and critic losses and evo's score and values
    (``names``). Returns each member's accumulator."""
    accumulators = []
    for member in range(MEMBERS):
        accumulator, tags = scalar_tags(Path(run_dir) / "tb" / f"member_{member}")
        assert {"pbt/score", "train/critic_loss", "train/actor_loss"} <= tags, tags
        assert {f"hparams/{name}" for name in names} <= tags, tags
        accumulators.append(accumulator)
    return accumulators


def check_pb2(run_dir, rows, lineage, names, bandit, explorer="pb2") -> list:
    """PB2 (or ``explorer``: pb2-mix) over the learner's space (``names``): the values within it, a
    warm-up in generation 1, then the GP for the numbers and the bandit for the categories
    (``bandit``); its history checkpointed, each member starting generation 3 from its donor's score.
    Returns the GP's observations."""
    space = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())["agent"]["search_space"]
    for exploit in lineage:
        for name, value in exploit["new_hparams"].items():
            if space[name]["choices"]:
                assert value in space[name]["choices"], (name, value)
            else:
                assert space[name]["low"] <= value <= space[name]["high"], (name, value)
        if exploit["generation"] == 1:  # no measured starting scores yet: PB2 warms up with perturb/resample
            assert all(f"({explorer} warm-up: " in change for change in exploit["changes"]), exploit["changes"]
        else:  # the GP picks the numbers, the bandit the categories
            for name, change in zip(names, exploit["changes"], strict=True):
                marker = f"({explorer} bandit)" if name in bandit else "(pb2) "
                assert marker in change, change
    saved = last_manifest(run_dir)["explorer"]
    assert saved["name"] == explorer
    observations = saved["state"]["observations"]
    assert [t for t, _, _ in observations] == [2] * MEMBERS
    assert all(len(x) == len(names) for _, x, _ in observations)
    scores = {(int(r["generation"]), int(r["member"])): float(r["score"]) for r in rows}
    donors = {e["recipient"]: e["donor"] for e in lineage if e["generation"] == 2}
    for member in range(MEMBERS):  # the baseline each member starts generation 3 from: its donor's score
        assert saved["state"]["baselines"][str(member)] == pytest.approx(scores[(2, donors.get(member, member))])
    return observations

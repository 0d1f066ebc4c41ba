"""TD3 end to end, on a tiny budget: pbt_rl_truct.py --algo td3 under mpiexec, on Pendulum-v1 with the
perturb explorer and with PB2 (PB2-Mix: a bandit for the unordered noise_type), and on MuJoCo's
HalfCheetah-v5 with both (the mujoco extra). Each run's population.csv has TD3's columns in its
declaration order with noise_type written as a name, and its lineage records TD3's changes, a
noise_type switch as names.

Every run uses 200 env steps per member per generation, learning from env step 50 with small networks
and minibatches, so that a generation of 4 members on 2 ranks takes seconds. HalfCheetah's episodes are
cut to 100 steps (--env-kwargs max_episode_steps:100): its 1000-step episodes would finish none in a
generation, and members with no score tie and keep their own weights."""

import math
from pathlib import Path

import pytest
import yaml

from evo.rundir import checkpoint as ckpt
from tests.support import generations_recorded, last_manifest, mpiexec, read_lineage, read_population

TD3_NINE = [
    *("learning_rate", "gamma", "tau", "batch_size", "train_freq"),
    *("policy_delay", "target_policy_noise", "noise_type", "noise_std"),
]
"""What td3.yml's search space explores, in TD3's declaration order."""
WHOLE = ("batch_size", "train_freq", "policy_delay")
NOISE_TYPES = ("normal", "ornstein-uhlenbeck")
MEMBERS, STEPS, RANKS = 4, 200, 2
BATCH_SIZES = [32, 64]
ACTION_DIMS = {"Pendulum-v1": 1, "HalfCheetah-v5": 6}
SHORT_EPISODES = {"HalfCheetah-v5": ["--env-kwargs", "max_episode_steps:100"]}


def tiny_td3(env_id):
    return [
        *("--algo", "td3", "--env-id", env_id, "--agent-training-steps", str(STEPS)),
        *SHORT_EPISODES.get(env_id, []),
        *("--hyperparams", "learning_starts:50", "batch_size:32", "buffer_size:4000"),
        "policy_kwargs:{net_arch: [64, 64]}",
        f"search_space:{{batch_size: {{choices: {BATCH_SIZES}}}}}",  # the built-in choices go up to 1024
    ]


def td3_run(run_dir, env_id="Pendulum-v1", generations=2, *extra):
    result = mpiexec(
        RANKS,
        [
            "pbt_rl_truct.py",
            *tiny_td3(env_id),
            *("--num-agents", str(MEMBERS), "--total-generations", str(generations)),
            *("--run-dir", str(run_dir), "--seed", "3", *extra),
        ],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def planned(train_freq: int) -> int:
    """A generation's env steps with ``train_freq``: the budget rounded up to whole collections."""
    return math.ceil(STEPS / train_freq) * train_freq


def cell(name, text):
    """A population.csv cell as the value it records."""
    if name == "noise_type":
        return text
    return int(text) if name in WHOLE else float(text)


def row_hparams(row) -> dict:
    return {name: cell(name, row[name]) for name in TD3_NINE}


def noise_type_changes(lineage) -> list[tuple[dict, str, str, str]]:
    """Each exploit's noise_type change, as (exploit, old, how, new)."""
    found = []
    for exploit in lineage:
        (change,) = [c for c in exploit["changes"] if c.startswith("noise_type : ")]
        old, _, rest = change[len("noise_type : ") :].partition(" --- (")
        how, _, new = rest.partition(") --> ")
        found.append((exploit, old, how, new))
    return found


def check_records(run_dir, env_id, generations, exploits_per_generation):
    """config.yaml, population.csv, lineage.jsonl and the last checkpoint of a TD3 run: TD3's columns in
    declaration order, one row per (generation, member), noise_type a name everywhere, each generation's
    env steps whole collections of the member's train_freq, the exploits recorded under TD3's names
    consistently with the rows, and each member's noise state in its checkpoint. Returns (rows, lineage)."""
    config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
    assert config["agent"]["algo"] == "td3" and config["env_id"] == env_id
    assert (config["agent"]["learning_starts"], config["agent"]["buffer_size"]) == (50, 4000)
    space = config["agent"]["search_space"]
    assert set(space) == set(TD3_NINE)
    assert space["noise_type"]["kind"] == "categorical" and space["noise_type"]["choices"] == list(NOISE_TYPES)

    rows = read_population(run_dir)
    assert list(rows[0]) == [
        *("generation", "member", "rank", "env_steps", "score", "donor"),
        *TD3_NINE,
        *("score_train", "score_test", "score_train_stale"),
    ]
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in range(1, generations + 1)}
    by_key = {(int(r["generation"]), int(r["member"])): r for r in rows}
    for (generation, member), row in by_key.items():
        assert int(row["rank"]) == member // (MEMBERS // RANKS)
        assert row["noise_type"] in NOISE_TYPES, row  # a name, not an index
        assert all(row[name].isdigit() for name in WHOLE), row
        assert int(row["batch_size"]) in BATCH_SIZES and 1 <= int(row["train_freq"]) <= 10, row
        assert 1 <= int(row["policy_delay"]) <= 4, row
        assert 0.02 <= float(row["noise_std"]) <= 0.5 and 0.05 <= float(row["target_policy_noise"]) <= 0.5, row
        before = int(by_key[(generation - 1, member)]["env_steps"]) if generation > 1 else 0
        assert int(row["env_steps"]) - before == planned(int(row["train_freq"])), row
        assert math.isfinite(float(row["score"])), row
    assert {row["noise_type"] for row in rows} == set(NOISE_TYPES)  # both drawn or switched to (seed 3)

    lineage = read_lineage(run_dir)
    assert len(lineage) == generations * exploits_per_generation
    for exploit in lineage:
        generation, recipient, donor = exploit["generation"], exploit["recipient"], exploit["donor"]
        assert list(exploit["old_hparams"]) == TD3_NINE and list(exploit["new_hparams"]) == TD3_NINE
        assert [change.split(" : ")[0] for change in exploit["changes"]] == TD3_NINE
        for hparams in (exploit["old_hparams"], exploit["new_hparams"]):  # whole numbers whole, noise types names
            assert all(isinstance(hparams[name], int) for name in WHOLE), hparams
            assert hparams["noise_type"] in NOISE_TYPES and hparams["batch_size"] in BATCH_SIZES
        assert by_key[(generation, recipient)]["donor"] == str(donor)
        assert float(by_key[(generation, donor)]["score"]) >= float(by_key[(generation, recipient)]["score"])
        assert exploit["old_hparams"] == pytest.approx(row_hparams(by_key[(generation, recipient)]))
        assert exploit["new_hparams"] != exploit["old_hparams"]
        if generation < generations:  # the recipient trains the next generation with the new values
            assert row_hparams(by_key[(generation + 1, recipient)]) == pytest.approx(exploit["new_hparams"])
    for exploit, old, how, new in noise_type_changes(lineage):  # explored from the donor's noise, as names
        assert old == by_key[(exploit["generation"], exploit["donor"])]["noise_type"], exploit["changes"]
        assert new == exploit["new_hparams"]["noise_type"] and {old, new} <= set(NOISE_TYPES), (old, how, new)
        if how.endswith("switch"):
            assert new != old
    exploited = {(e["generation"], e["recipient"]) for e in lineage}
    assert {key for key, row in by_key.items() if row["donor"] != ""} == exploited

    # the last checkpoint: each member's Ornstein-Uhlenbeck noise state (one per env, the action's shape), none
    # with a normal noise
    for member in range(MEMBERS):
        payload = ckpt.load_payload(ckpt.generation_dir(run_dir, generations) / ckpt.member_filename(member))
        assert payload["algo"] == "td3" and list(payload["hparams"]) == TD3_NINE
        if payload["hparams"]["noise_type"] == "ornstein-uhlenbeck":
            assert [tuple(prev.shape) for prev in payload["noise"]] == [(ACTION_DIMS[env_id],)], member
        else:
            assert payload["noise"] == [], member
        assert payload["replay"]["position"] == payload["num_timesteps"]  # every transition, one env
    return rows, lineage


def scalar_tags(event_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(event_dir))
    accumulator.Reload()
    return accumulator, set(accumulator.Tags()["scalars"])


def check_pb2(run_dir, rows, lineage):
    """PB2-Mix over TD3's space: the values within it, a warm-up in generation 1, then the GP for the
    numbers and the bandit for the choices (batch_size, and noise_type: a name); its history checkpointed."""
    space = yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]["search_space"]
    for exploit in lineage:
        for name, value in exploit["new_hparams"].items():
            if space[name]["choices"]:
                assert value in space[name]["choices"], (name, value)
            else:
                assert space[name]["low"] <= value <= space[name]["high"], (name, value)
        if exploit["generation"] == 1:  # no measured starting scores yet: PB2 warms up with perturb/resample
            assert all("(pb2 warm-up: " in change for change in exploit["changes"]), exploit["changes"]
        else:  # the GP picks the numbers, the bandit the choices
            for name, change in zip(TD3_NINE, exploit["changes"], strict=True):
                marker = "(pb2-mix bandit)" if name in ("batch_size", "noise_type") else "(pb2) "
                assert marker in change, change
    later = [(old, how, new) for e, old, how, new in noise_type_changes(lineage) if e["generation"] > 1]
    assert later and all(how == "pb2-mix bandit" and new in NOISE_TYPES for _, how, new in later), later
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == "pb2"
    observations = explorer["state"]["observations"]
    assert [t for t, _, _ in observations] == [2] * MEMBERS
    assert all(len(x) == len(TD3_NINE) for _, x, _ in observations)
    # noise_type's coordinate is its choice's position among the two names
    assert all(x[TD3_NINE.index("noise_type")] in (0.0, 1.0) for _, x, _ in observations)
    scores = {(int(r["generation"]), int(r["member"])): float(r["score"]) for r in rows}
    donors = {e["recipient"]: e["donor"] for e in lineage if e["generation"] == 2}
    for member in range(MEMBERS):  # the baseline each member starts generation 3 from: its donor's score
        assert explorer["state"]["baselines"][str(member)] == pytest.approx(scores[(2, donors.get(member, member))])


# --- Pendulum-v1 -----------------------------------------------------------------------------------------------


def test_truncation_with_perturb_records_td3s_hyperparameters(tmp_path):
    run_dir = tmp_path / "run"
    result = td3_run(run_dir)
    assert "(perturb explore)" in result.stdout
    _, lineage = check_records(run_dir, "Pendulum-v1", 2, exploits_per_generation=1)
    changes = noise_type_changes(lineage)
    assert all(how in ("switch", "resample") for _, _, how, _ in changes), changes
    # with seed 3 a perturbation switches the noise type, written as names in the lineage and the log
    switched = [(old, new) for _, old, how, new in changes if how == "switch"]
    assert switched, changes
    for old, new in switched:
        assert f"noise_type : {old} --- (switch) --> {new}" in result.stdout
    for exploit in lineage:  # batch_size is an ordered choice: it moves to a neighbour, or is resampled
        change = exploit["changes"][TD3_NINE.index("batch_size")]
        assert "index" in change or "resample" in change, change
    # TensorBoard: SB3's TD3 metrics and evo's, noise_type as its choice's index
    for member in range(MEMBERS):
        accumulator, tags = scalar_tags(run_dir / "tb" / f"member_{member}")
        assert {"pbt/score", "train/critic_loss", "train/actor_loss"} <= tags, tags
        assert {f"hparams/{name}" for name in TD3_NINE} <= tags, tags
        assert {event.value for event in accumulator.Scalars("hparams/noise_type")} <= {0.0, 1.0}


def test_pb2_explores_td3s_space_with_a_bandit_for_the_noise_type(tmp_path):
    run_dir = tmp_path / "run"
    result = td3_run(run_dir, "Pendulum-v1", 2, "--explore", "pb2", "--tb-writer", "False")
    assert "(pb2 explore)" in result.stdout
    rows, lineage = check_records(run_dir, "Pendulum-v1", 2, exploits_per_generation=1)
    check_pb2(run_dir, rows, lineage)


# --- HalfCheetah-v5 (the mujoco extra) --------------------------------------------------------------------------


@pytest.mark.parametrize("explorer", ["perturb", "pb2"])
def test_halfcheetah_runs_with_pbt_and_pb2(tmp_path, explorer):
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install EXTRAS=mujoco")
    run_dir = tmp_path / "run"
    result = td3_run(run_dir, "HalfCheetah-v5", 2, "--explore", explorer, "--tb-writer", "False")
    assert f"HalfCheetah-v5: {MEMBERS} members on {RANKS} ranks" in result.stdout
    assert f"({explorer} explore)" in result.stdout
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["env_kwargs"] == {"max_episode_steps": 100}
    assert config["agent"]["noise_type"] == "normal" and config["agent"]["noise_std"] == 0.1  # zoo's MuJoCo block
    rows, lineage = check_records(run_dir, "HalfCheetah-v5", 2, exploits_per_generation=1)
    assert all(row["score_train_stale"] == "0" for row in rows)  # every member finished its 100-step episodes
    if explorer == "pb2":
        check_pb2(run_dir, rows, lineage)
    else:
        assert all(how in ("switch", "resample") for _, _, how, _ in noise_type_changes(lineage))

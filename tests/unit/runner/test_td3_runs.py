"""TD3 in whole runs in one process (tests/support.py:run_in_process), on a tiny budget: pbt_rl_truct.py's
rule with --algo td3 on Pendulum-v1 with the perturb explorer and with PB2-Mix (a bandit for the unordered
noise_type), and on MuJoCo's HalfCheetah-v5 with PB2-Mix (the mujoco extra). Each run's population.csv has
TD3's columns in its declaration order with noise_type written as a name, and its lineage records TD3's
changes, a noise_type switch as names; a run resumed from its first generation records and holds what the
uninterrupted run does (each member's noise state, replay buffer and networks in its checkpoint); plots,
replay and one TD3 agent trained on the replayed schedule. Moved down from the e2e tier: what they check
is the session's, the driver's and the records', not MPI's (an off-policy run stopped by a signal and
resumed in a new mpiexec job: tests/e2e/test_offpolicy_resume.py).

The tiny budget and settings of every run (HalfCheetah's episodes cut to 100 steps): tests/offpolicy_runs.py."""

import pytest
import yaml

from evo.rundir import checkpoint as ckpt
from tests import offpolicy_runs as offpolicy
from tests.golden import weights_digest
from tests.in_process import logged, plots
from tests.offpolicy_runs import BATCH_SIZES, MEMBERS
from tests.support import need_mujoco, read_population

TD3_NINE = [
    *("learning_rate", "gamma", "tau", "batch_size", "train_freq"),
    *("policy_delay", "target_policy_noise", "noise_type", "noise_std"),
]
"""What td3.yml's search space explores, in TD3's declaration order."""
WHOLE = ("batch_size", "train_freq", "policy_delay")
NOISE_TYPES = ("normal", "ornstein-uhlenbeck")
ACTION_DIMS = {"Pendulum-v1": 1, "HalfCheetah-v5": 6}


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


def check_row(row) -> None:
    assert row["noise_type"] in NOISE_TYPES, row  # a name, not an index
    assert all(row[name].isdigit() for name in WHOLE), row
    assert int(row["batch_size"]) in BATCH_SIZES and 1 <= int(row["train_freq"]) <= 10, row
    assert 1 <= int(row["policy_delay"]) <= 4, row
    assert 0.02 <= float(row["noise_std"]) <= 0.5 and 0.05 <= float(row["target_policy_noise"]) <= 0.5, row


def check_hparams(hparams) -> None:
    """Whole numbers whole, noise types names."""
    assert all(isinstance(hparams[name], int) for name in WHOLE), hparams
    assert hparams["noise_type"] in NOISE_TYPES and hparams["batch_size"] in BATCH_SIZES


def check_records(run_dir, env_id, generations, exploits_per_generation):
    """config.yaml, population.csv, lineage.jsonl (offpolicy_runs.check_records) and the last checkpoint of
    a TD3 run: TD3's columns in declaration order, noise_type a name everywhere, the noise_type changes
    explored from the donor's, and each member's noise state in its checkpoint. Returns (rows, lineage)."""
    config, rows, by_key, lineage = offpolicy.check_records(
        run_dir,
        "td3",
        env_id,
        TD3_NINE,
        generations,
        exploits_per_generation,
        row_hparams=row_hparams,
        check_row=check_row,
        check_hparams=check_hparams,
    )
    space = config["agent"]["search_space"]
    assert set(space) == set(TD3_NINE)
    assert space["noise_type"]["kind"] == "categorical" and space["noise_type"]["choices"] == list(NOISE_TYPES)
    assert {row["noise_type"] for row in rows} == set(NOISE_TYPES)  # both drawn or switched to (seed 3)
    for exploit, old, how, new in noise_type_changes(lineage):  # explored from the donor's noise, as names
        assert old == by_key[(exploit["generation"], exploit["donor"])]["noise_type"], exploit["changes"]
        assert new == exploit["new_hparams"]["noise_type"] and {old, new} <= set(NOISE_TYPES), (old, how, new)
        if how.endswith("switch"):
            assert new != old

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


def check_pb2_mix(run_dir, rows, lineage):
    """PB2-Mix over TD3's space (offpolicy_runs.check_pb2): the bandit for the categories, batch_size and
    noise_type (a name, its coordinate the choice's position among the two names)."""
    observations = offpolicy.check_pb2(
        run_dir, rows, lineage, TD3_NINE, bandit={"batch_size", "noise_type"}, explorer="pb2-mix"
    )
    later = [(old, how, new) for e, old, how, new in noise_type_changes(lineage) if e["generation"] > 1]
    assert later and all(how == "pb2-mix bandit" and new in NOISE_TYPES for _, how, new in later), later
    assert all(x[TD3_NINE.index("noise_type")] in (0.0, 1.0) for _, x, _ in observations)


# --- Pendulum-v1 -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def perturb_run(tmp_path_factory):
    """The TD3 run of pbt_rl_truct.py's rule, perturb explore, 4 members, 2 generations, TensorBoard on;
    returns (its run directory, what it logged)."""
    run_dir = tmp_path_factory.mktemp("td3") / "run"
    return run_dir, offpolicy.run("td3", run_dir)


def test_truncation_with_perturb_records_td3s_hyperparameters(perturb_run):
    run_dir, log = perturb_run
    assert "(perturb explore)" in log
    _, lineage = check_records(run_dir, "Pendulum-v1", 2, exploits_per_generation=1)
    changes = noise_type_changes(lineage)
    assert all(how in ("switch", "resample") for _, _, how, _ in changes), changes
    # with seed 3 a perturbation switches the noise type, written as names in the lineage and the log
    switched = [(old, new) for _, old, how, new in changes if how == "switch"]
    assert switched, changes
    for old, new in switched:
        assert f"noise_type : {old} --- (switch) --> {new}" in log
    offpolicy.check_batch_size_moves(lineage, TD3_NINE)
    # TensorBoard: SB3's TD3 metrics and evo's, noise_type as its choice's index
    for accumulator in offpolicy.check_tensorboard(run_dir, TD3_NINE):
        assert {event.value for event in accumulator.Scalars("hparams/noise_type")} <= {0.0, 1.0}


def test_a_run_resumed_after_its_first_generation_records_and_holds_what_the_uninterrupted_one_does(
    perturb_run, tmp_path
):
    """The same run ended after generation 1, then resumed to generation 2 from its checkpoint (each
    member's networks, optimizers, replay buffer, envs and exploration noise): the same rows, lineage and
    final weights as the uninterrupted run, byte for byte."""
    whole, _ = perturb_run
    part = tmp_path / "part"
    offpolicy.run("td3", part, generations=1)
    status, log = logged(["--run-dir", str(part), "--resume", "--total-generations", "2"])
    assert status == 0 and "resumed from" in log
    assert (part / "population.csv").read_bytes() == (whole / "population.csv").read_bytes()
    assert (part / "lineage.jsonl").read_bytes() == (whole / "lineage.jsonl").read_bytes()
    assert weights_digest(part) == weights_digest(whole)


def test_plot_replay_and_schedule_of_a_td3_run(perturb_run, tmp_path):
    """TD3's categorical noise type is drawn at its choices' positions, replayed by name, and one
    TD3 agent trains on the replayed schedule."""
    from evo.tools import replay as replay_tool

    run_dir, _ = perturb_run
    assert sorted(plots(run_dir, tmp_path / "plots")) == ["hparams", "lineage", "scores"]

    schedule = tmp_path / "schedule.yml"
    assert replay_tool.main([str(run_dir), "--out", str(schedule)]) == 0
    document = yaml.safe_load(schedule.read_text())
    assert document["algo"] == "td3" and document["env_id"] == "Pendulum-v1"
    for entry in document["schedule"]:
        assert entry["hparams"]["noise_type"] in ("normal", "ornstein-uhlenbeck")
        assert isinstance(entry["hparams"]["policy_delay"], int)

    one = tmp_path / "one"
    argv = [*offpolicy.tiny("td3"), "--num-agents", "1", "--total-generations", "2", "--schedule", str(schedule)]
    status, log = logged([*argv, "--run-dir", str(one), "--tb-writer", "False"])
    assert status == 0 and "following the schedule" in log
    rows = read_population(one)
    assert len(rows) == 2
    first = document["schedule"][0]["hparams"]
    assert rows[0]["noise_type"] == first["noise_type"] and int(rows[0]["policy_delay"]) == first["policy_delay"]


def test_pb2_mix_explores_td3s_space_with_a_bandit_for_the_noise_type(tmp_path):
    run_dir = tmp_path / "run"
    log = offpolicy.run("td3", run_dir, "--explore", "pb2-mix", "--tb-writer", "False")
    assert "(pb2-mix explore)" in log
    rows, lineage = check_records(run_dir, "Pendulum-v1", 2, exploits_per_generation=1)
    check_pb2_mix(run_dir, rows, lineage)


# --- HalfCheetah-v5 (the mujoco extra) --------------------------------------------------------------------------


def test_halfcheetah_runs_with_pb2_mix(tmp_path):
    """MuJoCo's HalfCheetah with zoo's MuJoCo block and PB2-Mix (the perturb explorer's noise_type moves are
    checked on Pendulum above)."""
    need_mujoco()
    run_dir = tmp_path / "run"
    log = offpolicy.run("td3", run_dir, "--explore", "pb2-mix", "--tb-writer", "False", env_id="HalfCheetah-v5")
    assert f"HalfCheetah-v5: {MEMBERS} members on 1 ranks" in log
    assert "(pb2-mix explore)" in log
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["env_kwargs"] == {"max_episode_steps": 100}
    assert config["agent"]["noise_type"] == "normal" and config["agent"]["noise_std"] == 0.1  # zoo's MuJoCo block
    rows, lineage = check_records(run_dir, "HalfCheetah-v5", 2, exploits_per_generation=1)
    assert all(row["score_train_stale"] == "0" for row in rows)  # every member finished its 100-step episodes
    check_pb2_mix(run_dir, rows, lineage)

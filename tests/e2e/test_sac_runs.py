"""SAC end to end, on a tiny budget: Pendulum-v1 members under mpiexec with the perturb explorer,
with PB2 and winner-takes-all; a run stopped by SIGUSR1 and resumed with its replay buffers (or
without them: --no-checkpoint-buffers); plots, a replayed schedule trained by one SAC agent, and
bad input refused before anything is written.

The tiny budget and settings of every run: tests/e2e/offpolicy.py."""

import signal
import subprocess

import pytest
import torch
import yaml

from evo.core.kinds import Additive, Choice, Horizon, Integer, LogFloat
from evo.core.schedule import hparams_at, load_schedule
from evo.learners import learner_spec
from evo.rundir import checkpoint as ckpt
from evo.rundir.history import ancestry, load_run
from tests.e2e import offpolicy
from tests.e2e.offpolicy import BATCH_SIZES, MEMBERS, RANKS
from tests.e2e.runs import line_of, plots, python, running, tree_digest, tunable, wait_for
from tests.gated_env import held
from tests.support import generations_recorded, mpiexec, read_lineage, read_population

SAC_SIX = ["learning_rate", "gamma", "tau", "batch_size", "train_freq", "target_entropy"]
"""What the built-in Pendulum-v1 search space of SAC explores, in SAC's declaration order."""
TINY_SAC = offpolicy.tiny("sac")


def sac_run(script, run_dir, *extra):
    return offpolicy.run("sac", run_dir, *extra, script=script)


def row_hparams(row) -> dict[str, float]:
    return {name: float(row[name]) for name in SAC_SIX}


def check_row(row) -> None:
    assert int(row["batch_size"]) in BATCH_SIZES and row["batch_size"].isdigit(), row
    assert row["train_freq"].isdigit() and 1 <= int(row["train_freq"]) <= 10, row
    assert -2.0 <= float(row["target_entropy"]) <= 0.0, row


def check_hparams(hparams) -> None:
    """Whole numbers stay whole in JSON."""
    assert isinstance(hparams["batch_size"], int) and isinstance(hparams["train_freq"], int)
    assert hparams["batch_size"] in BATCH_SIZES


def check_records(run_dir, generations, exploits_per_generation):
    """population.csv and lineage.jsonl of a SAC run (offpolicy.check_records): SAC's columns, each
    row's values and each exploit's as SAC writes them. Returns (rows, lineage)."""
    config, rows, _, lineage = offpolicy.check_records(
        run_dir,
        "sac",
        "Pendulum-v1",
        SAC_SIX,
        generations,
        exploits_per_generation,
        row_hparams=row_hparams,
        check_row=check_row,
        check_hparams=check_hparams,
    )
    assert list(config["agent"]["search_space"]) == SAC_SIX
    return rows, lineage


@pytest.fixture(scope="module")
def truct_run(tmp_path_factory):
    """The SAC run under pbt_rl_truct.py, perturb explore, 2 ranks x 2 members, 2 generations."""
    run_dir = tmp_path_factory.mktemp("sac") / "run"
    result = sac_run("pbt_rl_truct.py", run_dir)
    return run_dir, result


def test_truncation_with_perturb_records_sacs_hyperparameters(truct_run):
    run_dir, result = truct_run
    assert "(perturb explore)" in result.stdout
    _, lineage = check_records(run_dir, 2, exploits_per_generation=1)
    offpolicy.check_batch_size_moves(lineage, SAC_SIX)
    # TensorBoard: SB3's SAC metrics and evo's, per member
    for accumulator in offpolicy.check_tensorboard(run_dir, SAC_SIX):
        assert len(accumulator.Scalars("pbt/score")) == 2


def test_pb2_explores_sacs_space(tmp_path):
    run_dir = tmp_path / "run"
    result = sac_run("pbt_rl_truct.py", run_dir, "--explore", "pb2")
    assert "(pb2 explore)" in result.stdout
    rows, lineage = check_records(run_dir, 2, exploits_per_generation=1)
    offpolicy.check_pb2(run_dir, rows, lineage, SAC_SIX, bandit=set())  # batch_size's choices: on their index


def test_winner_takes_all_copies_the_best_into_every_other_member(tmp_path):
    run_dir = tmp_path / "run"
    sac_run("pbt_rl_wta.py", run_dir)
    rows, lineage = check_records(run_dir, 2, exploits_per_generation=MEMBERS - 1)
    for generation in (1, 2):
        now = {int(r["member"]): float(r["score"]) for r in rows if int(r["generation"]) == generation}
        best = max(now, key=lambda m: (now[m], -m))
        exploits = [e for e in lineage if e["generation"] == generation]
        assert {e["donor"] for e in exploits} == {best}
        assert sorted(e["recipient"] for e in exploits) == sorted(set(now) - {best})


def stop_in_generation_2(args, gate):
    """Run ``args`` on 2 ranks, each held in generation 2 at ``gate`` (tests/gated_env.py), and send
    mpiexec SIGUSR1 once both are. Returns (exit status, output)."""
    with running(RANKS, args, stderr=subprocess.STDOUT) as job:
        wait_for(lambda: len(held(gate, range(RANKS))) == RANKS or job.poll() is not None, 240, "the gate")
        job.send_signal(signal.SIGUSR1)
        output, _ = job.communicate(timeout=300)
    return job.returncode, output


def member_payloads(run_dir, generation):
    return {
        m: ckpt.load_payload(ckpt.generation_dir(run_dir, generation) / ckpt.member_filename(m)) for m in range(MEMBERS)
    }


@pytest.mark.parametrize("buffers", [True, False], ids=["with-buffers", "no-checkpoint-buffers"])
def test_stop_mid_generation_and_resume_with_the_replay_buffers(tmp_path, buffers):
    run_dir = tmp_path / "run"
    generations = 3
    gate = tmp_path / "gate"
    gate.mkdir()
    tiny = offpolicy.tiny("sac", gate=(offpolicy.GENERATION_STEPS + 1, gate))
    args = ["pbt_rl_truct.py", *tiny, "--num-agents", str(MEMBERS), "--total-generations", str(generations)]
    args += ["--tb-writer", "False", "--run-dir", str(run_dir), "--seed", "4"]
    if not buffers:
        args.append("--no-checkpoint-buffers")
    status, output = stop_in_generation_2(args, gate)
    assert status == 75, output[-4000:]
    assert "checkpoint of generation 1" in output, output[-4000:]
    assert generations_recorded(run_dir) == {1: list(range(MEMBERS))}  # generation 2 was cut short
    stopped_at = ckpt.latest(run_dir)[0].generation
    assert stopped_at == 1

    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    saved = member_payloads(run_dir, stopped_at)
    for member, payload in saved.items():
        assert payload["algo"] == "sac" and "replay" in payload
        assert payload["num_timesteps"] == int(rows[(stopped_at, member)]["env_steps"])
        if buffers:  # every transition the member collected (1 env, a buffer of 4000 not yet full)
            replay = payload["replay"]
            assert (replay["position"], replay["full"]) == (payload["num_timesteps"], False)
            assert {len(array) for array in replay["arrays"].values()} == {payload["num_timesteps"]}
        else:
            assert payload["replay"] is None

    resumed = mpiexec(RANKS, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"])
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-4000:]
    assert "resumed from" in resumed.stdout
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in range(1, generations + 1)}
    log = resumed.stdout + resumed.stderr
    final = member_payloads(run_dir, generations)
    if buffers:
        assert "replay buffer was left out" not in log
        for member, payload in final.items():
            # the buffer came back and grew: the transitions before the stop, then the resumed run's
            replay, before = payload["replay"], saved[member]["replay"]
            assert replay["position"] == payload["num_timesteps"]
            for name, array in before["arrays"].items():
                assert torch.equal(replay["arrays"][name][: len(array)], array), (member, name)
    else:
        for member, payload in final.items():
            assert f"member {member}: its replay buffer was left out of the checkpoint (--no-checkpoint-buffers)" in log
            assert payload["replay"] is None


def test_plot_of_a_sac_run(truct_run, tmp_path):
    import matplotlib.pyplot as plt

    from evo.tools.plot import plot_hparams

    run_dir, _ = truct_run
    plots(run_dir, tmp_path)
    history = load_run(run_dir)
    assert history.algo == "sac" and list(history.names) == SAC_SIX
    kinds = history.kinds()
    assert [type(kinds[name]) for name in SAC_SIX] == [LogFloat, Horizon, LogFloat, Choice, Integer, Additive]
    fig = plot_hparams(history)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    sac = learner_spec("sac").by_name
    assert [ax.get_title() for ax in panels] == [f"{sac[name].label or name} ({name})" for name in SAC_SIX]
    plt.close(fig)


def line_starts(history, owners):
    """{generation: the env steps the line's weights had trained when it began}: what each owner
    trained in the generations before (a member's own count can differ: each generation's budget is
    rounded up to whole collections of the member's own train_freq)."""
    starts, trained = {}, 0
    for generation in sorted(owners):
        starts[generation] = trained
        owner = owners[generation]
        before = history.row(generation - 1, owner).env_steps if generation > 1 else 0
        trained += history.row(generation, owner).env_steps - before
    return starts


def test_replayed_schedule_of_a_sac_run_trains_one_sac_agent(truct_run, tmp_path):
    """The replayed member is generation 1's recipient, whose line crosses an exploit: its weights
    were its donor's, trained with the donor's values (and train_freq) in generation 1."""
    run_dir, _ = truct_run
    history = load_run(run_dir)
    (member,) = [e["recipient"] for e in read_lineage(run_dir) if e["generation"] == 1]
    out = tmp_path / "schedule.yml"
    result = python("-m", "evo.tools.replay", str(run_dir), "--member", str(member), "--out", str(out))
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(out.read_text())
    assert (document["algo"], document["env_id"]) == ("sac", "Pendulum-v1")
    assert document["source"]["member"] == member
    assert "--algo sac --env-id Pendulum-v1" in out.read_text().splitlines()[1]  # the header's command
    schedule, env_id, algo = load_schedule(out, tunable("sac"))
    assert (env_id, algo) == ("Pendulum-v1", "sac")
    assert all(list(hparams) == SAC_SIX for _, hparams in schedule)
    owners = line_of(history, member)
    assert owners[1] == history.row(1, member).donor == ancestry(history)[2][member]
    starts = line_starts(history, owners)
    # each segment starts where the line's weights were when its generation began; the values in
    # effect in each generation are those its owner trained with
    for entry in document["schedule"]:
        assert entry["env_steps"] == starts[entry["from"]["generation"]], (entry, starts)
    for generation, owner in owners.items():
        assert hparams_at(schedule, starts[generation]) == history.row(generation, owner).hparams

    replay_dir = tmp_path / "replay"
    replayed = mpiexec(
        1,
        [
            "pbt_rl_truct.py",
            *TINY_SAC,
            *("--num-agents", "1", "--total-generations", "2", "--schedule", str(out)),
            *("--run-dir", str(replay_dir)),
        ],
    )
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-4000:]
    assert "following the schedule" in replayed.stdout
    config = yaml.safe_load((replay_dir / "config.yaml").read_text())
    assert config["agent"]["algo"] == "sac" and config["num_agents"] == 1
    rows = load_run(replay_dir)
    assert rows.members == [0] and rows.generations == [1, 2]
    for generation, owner in owners.items():  # one agent trains what the line trained, as long
        row = rows.row(generation, 0)
        assert row.donor is None
        assert row.hparams == pytest.approx(history.row(generation, owner).hparams)
        assert row.env_steps == starts[generation] + history.row(generation, owner).env_steps - (
            history.row(generation - 1, owner).env_steps if generation > 1 else 0
        )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--algo", "sac", "--env-id", "CartPole-v1"],
            "SAC acts in Box action spaces, and CartPole-v1 has a Discrete action space",
        ),
        (["--algo", "ppo", "--hyperparams", "tau:0.01"], "SAC (--algo sac), TD3 (--algo td3)"),
        (["--algo", "dqnn"], "--algo dqnn: no such learner; did you mean 'dqn'?"),
    ],
    ids=["sac-on-discrete-actions", "sac-setting-for-ppo", "unknown-algo"],
)
def test_bad_algo_input_exits_2_and_writes_nothing(tmp_path, argv, message):
    before = tree_digest(tmp_path)
    run_dir = tmp_path / "never-created"
    result = mpiexec(RANKS, ["pbt_rl_truct.py", *argv, "--run-dir", str(run_dir)], timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.count(message) == 1, result.stderr
    assert result.stderr.count("error:") == 1 and "Traceback" not in result.stderr, result.stderr
    assert not run_dir.exists() and tree_digest(tmp_path) == before

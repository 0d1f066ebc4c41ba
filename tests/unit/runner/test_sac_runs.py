"""SAC in whole runs in one process (tests/support.py:run_in_process), on a tiny budget: Pendulum-v1 members
with the perturb explorer, with PB2 and under winner-takes-all, their records and TensorBoard scalars; plots,
a replayed schedule trained by one SAC agent; a run resumed without its replay buffers
(--no-checkpoint-buffers); bad --algo input refused at start-up with exit 2, nothing written. Moved down
from the e2e tier: what they check is the session's, the driver's, the records' and the tools', not MPI's.
A SAC run stopped by a signal and resumed in a new mpiexec job with its replay buffers:
tests/e2e/test_offpolicy_resume.py.

The tiny budget and settings of every run: tests/offpolicy_runs.py."""

import pytest
import yaml
from mpi4py import MPI

from evo.core.kinds import Additive, Choice, Horizon, Integer, LogFloat
from evo.core.schedule import hparams_at, load_schedule
from evo.learners import learner_spec
from evo.rundir import checkpoint as ckpt
from evo.rundir.history import ancestry, load_run
from tests import offpolicy_runs as offpolicy
from tests.e2e.runs import line_of, tunable
from tests.in_process import logged, plots
from tests.offpolicy_runs import BATCH_SIZES, MEMBERS
from tests.support import generations_recorded, read_lineage, read_population, tree_digest

SAC_SIX = ["learning_rate", "gamma", "tau", "batch_size", "train_freq", "target_entropy"]
"""What the built-in Pendulum-v1 search space of SAC explores, in SAC's declaration order."""
TINY_SAC = offpolicy.tiny("sac")


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
    """population.csv and lineage.jsonl of a SAC run (offpolicy_runs.check_records): SAC's columns, each
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
    """The SAC run of pbt_rl_truct.py's rule, perturb explore, 4 members, 2 generations, TensorBoard on;
    returns (its run directory, what it logged)."""
    run_dir = tmp_path_factory.mktemp("sac") / "run"
    return run_dir, offpolicy.run("sac", run_dir)


def test_truncation_with_perturb_records_sacs_hyperparameters(truct_run):
    run_dir, log = truct_run
    assert "(perturb explore)" in log
    _, lineage = check_records(run_dir, 2, exploits_per_generation=1)
    offpolicy.check_batch_size_moves(lineage, SAC_SIX)
    # TensorBoard: SB3's SAC metrics and evo's, per member
    for accumulator in offpolicy.check_tensorboard(run_dir, SAC_SIX):
        assert len(accumulator.Scalars("pbt/score")) == 2


def test_pb2_explores_sacs_space(tmp_path):
    run_dir = tmp_path / "run"
    log = offpolicy.run("sac", run_dir, "--explore", "pb2", "--tb-writer", "False")
    assert "(pb2 explore)" in log
    rows, lineage = check_records(run_dir, 2, exploits_per_generation=1)
    offpolicy.check_pb2(run_dir, rows, lineage, SAC_SIX, bandit=set())  # batch_size's choices: on their index


def test_winner_takes_all_copies_the_best_into_every_other_member(tmp_path):
    run_dir = tmp_path / "run"
    offpolicy.run("sac", run_dir, "--tb-writer", "False", strategy="wta", transport="collective")
    rows, lineage = check_records(run_dir, 2, exploits_per_generation=MEMBERS - 1)
    for generation in (1, 2):
        now = {int(r["member"]): float(r["score"]) for r in rows if int(r["generation"]) == generation}
        best = max(now, key=lambda m: (now[m], -m))
        exploits = [e for e in lineage if e["generation"] == generation]
        assert {e["donor"] for e in exploits} == {best}
        assert sorted(e["recipient"] for e in exploits) == sorted(set(now) - {best})


def member_payloads(run_dir, generation):
    return {
        m: ckpt.load_payload(ckpt.generation_dir(run_dir, generation) / ckpt.member_filename(m)) for m in range(MEMBERS)
    }


def test_a_run_resumed_without_its_replay_buffers_says_so_and_goes_on_without_them(tmp_path):
    """--no-checkpoint-buffers: the checkpoint holds each member's counters but no replay buffer, and the
    resumed run says so per member and goes on (its checkpoints still without buffers). With the buffers,
    stopped by a signal and resumed in a new job: tests/e2e/test_offpolicy_resume.py."""
    run_dir = tmp_path / "run"
    offpolicy.run("sac", run_dir, "--tb-writer", "False", "--no-checkpoint-buffers", generations=1)
    assert generations_recorded(run_dir) == {1: list(range(MEMBERS))}
    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    for member, payload in member_payloads(run_dir, 1).items():
        assert payload["algo"] == "sac" and "replay" in payload and payload["replay"] is None
        assert payload["num_timesteps"] == int(rows[(1, member)]["env_steps"])

    status, log = logged(["--run-dir", str(run_dir), "--resume", "--total-generations", "2"])
    assert status == 0 and "resumed from" in log
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in (1, 2)}
    for member, payload in member_payloads(run_dir, 2).items():
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


def test_replayed_schedule_of_a_sac_run_trains_one_sac_agent(truct_run, tmp_path, capsys):
    """The replayed member is generation 1's recipient, whose line crosses an exploit: its weights
    were its donor's, trained with the donor's values (and train_freq) in generation 1."""
    from evo.tools import replay as replay_tool

    run_dir, _ = truct_run
    history = load_run(run_dir)
    (member,) = [e["recipient"] for e in read_lineage(run_dir) if e["generation"] == 1]
    out = tmp_path / "schedule.yml"
    assert replay_tool.main([str(run_dir), "--member", str(member), "--out", str(out)]) == 0
    assert f"schedule of member {member}" in capsys.readouterr().out
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
    argv = [*TINY_SAC, "--num-agents", "1", "--total-generations", "2", "--schedule", str(out)]
    status, log = logged([*argv, "--run-dir", str(replay_dir), "--tb-writer", "False"])
    assert status == 0 and "following the schedule" in log
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
def test_bad_algo_input_exits_2_and_writes_nothing(tmp_path, capsys, argv, message):
    """The entry point's start-up (evo.main.startup, as every rank runs it) on one rank: the refusal said
    once, exit status 2, nothing written. That every rank exits 2 on refused input and only rank 0 says why:
    tests/unit/test_main.py::test_every_bad_input_exits_2_once_and_touches_nothing (simulated ranks) and, under
    a real mpiexec, tests/e2e/test_resilience.py::test_bad_input_exits_2_on_every_rank_once_and_touches_nothing."""
    from evo.main import startup

    before = tree_digest(tmp_path)
    run_dir = tmp_path / "never-created"
    with pytest.raises(SystemExit) as exited:
        startup(MPI.COMM_SELF, [*argv, "--run-dir", str(run_dir)], "truncation", "p2p", "pbt_rl_truct.py")
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.count(message) == 1, stderr
    assert stderr.count("error:") == 1 and "Traceback" not in stderr, stderr
    assert not run_dir.exists() and tree_digest(tmp_path) == before

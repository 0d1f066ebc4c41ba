"""Looking at a run: plots from its records, TensorBoard's HPARAMS tab, and replaying the
best member's schedule on one agent. One real PBT run (2 ranks, 4 CartPole members) feeds
every test."""

import pytest
import yaml

from evo.core.schedule import hparams_at, load_schedule
from evo.rundir.history import ancestry, best_member, load_run
from tests.e2e.runs import line_of, plots, python, tunable
from tests.support import PPO_SIX, mpiexec, write_hyperparams

MEMBERS, GENERATIONS, STEPS = 4, 5, 512


def train_cartpole(ranks, hp, run_dir, *flags):
    """pbt_rl_truct.py on CartPole for GENERATIONS x STEPS with the tiny settings in ``hp``."""
    return mpiexec(
        ranks,
        [
            "pbt_rl_truct.py",
            "--env-id",
            "CartPole-v1",
            "--total-generations",
            str(GENERATIONS),
            "--agent-training-steps",
            str(STEPS),
            "--hyperparams",
            str(hp),
            "--run-dir",
            str(run_dir),
            *flags,
        ],
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("looking")
    hp = write_hyperparams(base)
    run_dir = base / "run"
    result = train_cartpole(2, hp, run_dir, "--num-agents", str(MEMBERS))
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, hp


def test_plot_writes_three_readable_pngs(run, tmp_path):
    run_dir, _ = run
    for name, path in plots(run_dir, tmp_path).items():
        assert 15_000 < path.stat().st_size < 1_500_000, (name, path.stat().st_size)


def test_every_panel_has_one_line_per_member(run):
    import matplotlib.pyplot as plt

    from evo.tools.plot import plot_hparams, plot_lineage, plot_scores

    history = load_run(run[0])
    member_gids = {f"member-{m}" for m in range(MEMBERS)}

    fig = plot_scores(history)
    (ax,) = fig.axes
    gids = [line.get_gid() for line in ax.get_lines()]
    assert sorted(g for g in gids if g in member_gids) == sorted(member_gids)
    assert {"best", "mean"} <= set(gids)
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    best_line = next(line for line in ax.get_lines() if line.get_gid() == "best")
    assert list(best_line.get_ydata()) == [
        max(history.row(g, m).score for m in range(MEMBERS)) for g in range(1, GENERATIONS + 1)
    ]
    plt.close(fig)

    fig = plot_hparams(history)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(PPO_SIX)
    for ax in panels:
        assert sum(line.get_gid() in member_gids for line in ax.get_lines()) == MEMBERS
        assert ax.get_xlabel() == "env steps per member"
    plt.close(fig)

    fig = plot_lineage(history)
    assert len(fig.axes[0].get_yticks()) == MEMBERS
    plt.close(fig)


def test_plot_of_a_missing_run_dir_says_what_to_give(tmp_path):
    result = python("-m", "evo.tools.plot", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "population.csv not found" in result.stderr and "run directory" in result.stderr


def test_tensorboard_hparams_tab_has_each_members_final_values(run):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    run_dir, _ = run
    history = load_run(run_dir)
    for member in range(MEMBERS):
        sessions, metrics = [], []
        for events in (run_dir / "tb" / f"member_{member}").glob("events.out.tfevents.*"):
            for event in EventFileLoader(str(events)).Load():
                for value in event.summary.value:
                    if value.metadata.plugin_data.plugin_name != "hparams":
                        continue
                    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    if data.HasField("session_start_info"):
                        sessions.append({k: v.number_value for k, v in data.session_start_info.hparams.items()})
                    if data.HasField("experiment"):
                        metrics += [info.name.tag for info in data.experiment.metric_infos]
        assert len(sessions) == 1 and metrics == ["pbt/score"]
        final = history.row(GENERATIONS, member)
        assert sessions[0] == pytest.approx({"member": member, **final.hparams})


def test_replay_writes_the_best_members_lineage_schedule(run, tmp_path):
    run_dir, _ = run
    out = tmp_path / "schedule.yml"
    result = python("-m", "evo.tools.replay", str(run_dir), "--member", "best", "--out", str(out))
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(out.read_text())
    history = load_run(run_dir)
    best = best_member(history)
    assert document["source"]["member"] == best and document["env_id"] == "CartPole-v1"
    schedule, env_id, algo = load_schedule(out, tunable("ppo"))
    assert (env_id, algo) == ("CartPole-v1", "ppo")
    # in every generation, the hyperparameters in effect are those the weights' owner trained with
    owners = line_of(history, best)
    for generation in range(GENERATIONS, 0, -1):
        start = (generation - 1) * STEPS
        assert hparams_at(schedule, start) == history.row(generation, owners[generation]).hparams
    assert owners[1] == ancestry(history)[GENERATIONS][best]  # the walk ends at the line's founder
    assert [entry["from"]["member"] for entry in document["schedule"]][-1] == best


def test_one_agent_follows_a_replayed_schedule(run, tmp_path):
    run_dir, hp = run
    schedule_file = tmp_path / "schedule.yml"
    assert python("-m", "evo.tools.replay", str(run_dir), "--out", str(schedule_file)).returncode == 0
    schedule, _, _ = load_schedule(schedule_file, tunable("ppo"))
    replay_dir = tmp_path / "replay"
    result = train_cartpole(1, hp, replay_dir, "--num-agents", "1", "--schedule", str(schedule_file))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "following the schedule" in result.stdout
    replayed = load_run(replay_dir)
    assert replayed.members == [0]
    for generation in range(1, GENERATIONS + 1):
        row = replayed.row(generation, 0)
        assert row.donor is None
        assert row.hparams == pytest.approx(hparams_at(schedule, (generation - 1) * STEPS))


def test_schedule_needs_one_agent_and_its_env(run, tmp_path):
    run_dir, hp = run
    schedule_file = tmp_path / "schedule.yml"
    assert python("-m", "evo.tools.replay", str(run_dir), "--out", str(schedule_file)).returncode == 0
    common = ["--schedule", str(schedule_file), "--hyperparams", str(hp), "--run-dir", str(tmp_path / "r")]
    result = mpiexec(2, ["pbt_rl_truct.py", "--env-id", "CartPole-v1", "--num-agents", "2", *common], timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("pass --num-agents 1") == 1
    result = mpiexec(1, ["pbt_rl_truct.py", "--env-id", "Acrobot-v1", "--num-agents", "1", *common], timeout=120)
    assert result.returncode == 2 and "was found on CartPole-v1, not Acrobot-v1" in result.stderr
    assert not (tmp_path / "r").exists()

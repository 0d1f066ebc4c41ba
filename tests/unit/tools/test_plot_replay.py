"""Looking at a run: plots from its records, TensorBoard's HPARAMS tab, and replaying a member's schedule on one
agent; a schedule refused for a population or another env. One real PBT run (4 CartPole members, 4 generations,
made in this process) feeds every test; the tools run by their main. Moved down from the e2e tier (the run was made
under ``mpiexec -n 2``, the tools as ``python -m``): nothing here crosses a process boundary. The tools as commands:
tests/unit/tools/test_moved_names.py (``python -m evo.plot``, ...), tests/e2e/test_package.py (the installed
wheel's), tests/e2e/test_stages.py (tests/e2e/runs.py's ``plots``)."""

import logging

import pytest
import yaml

from evo.config import ConfigError, parse_config
from evo.core.schedule import hparams_at, load_schedule
from evo.rundir.history import ancestry, best_member, load_run
from evo.tools import plot as plot_tool
from evo.tools import replay as replay_tool
from tests.support import PPO_SIX, read_lineage, run_in_process, write_hyperparams

MEMBERS, GENERATIONS, STEPS = 4, 4, 256
PNG = b"\x89PNG\r\n\x1a\n"


def train_cartpole(hp, run_dir, *flags) -> None:
    """A CartPole run for GENERATIONS x STEPS with the tiny settings in ``hp``, in this process."""
    argv = ["--env-id", "CartPole-v1", "--total-generations", str(GENERATIONS), "--agent-training-steps", str(STEPS)]
    assert run_in_process([*argv, "--hyperparams", str(hp), "--run-dir", str(run_dir), *flags]) == 0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("looking")
    hp = write_hyperparams(base)
    run_dir = base / "run"
    train_cartpole(hp, run_dir, "--num-agents", str(MEMBERS))
    return run_dir, hp


def tool(capsys, main, *argv) -> tuple[int, str, str]:
    """A tool's main in this process: its exit status, stdout and stderr."""
    capsys.readouterr()
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def tunable(algo: str) -> dict[str, tuple[type, bool]]:
    """What load_schedule needs of a learner: each tunable setting's type and whether it may be off."""
    from evo.learners import learner_spec

    return {s.name: (s.type, s.may_be_off) for s in learner_spec(algo).settings if s.tunable}


def line_of(history, member) -> dict[int, int]:
    """Who trained ``member``'s weights in each generation ({generation: member}), walking back through its
    exploits."""
    owners, followed = {}, member
    for generation in reversed(history.generations):
        owners[generation] = followed
        if generation > 1 and history.row(generation - 1, followed).donor is not None:
            followed = history.row(generation - 1, followed).donor
    return owners


def test_plot_writes_three_readable_pngs(run, tmp_path, capsys):
    """Also: a link planted at a plot's name (the run directory's plots/, by default) is replaced, never
    written through."""
    run_dir, _ = run
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    out_dir = tmp_path / "plots"
    out_dir.mkdir()
    (out_dir / "lineage.png").symlink_to(victim)
    status, out, err = tool(capsys, plot_tool.main, run_dir, "--out", out_dir)
    assert status == 0, err
    assert victim.read_bytes() == b"precious" and not (out_dir / "lineage.png").is_symlink()
    for name in ("scores", "hparams", "lineage"):
        path = out_dir / f"{name}.png"
        assert str(path) in out.split()
        assert path.read_bytes()[:8] == PNG
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


def test_plot_of_a_missing_run_dir_says_what_to_give(tmp_path, capsys):
    status, _, err = tool(capsys, plot_tool.main, tmp_path / "nope")
    assert status == 2
    assert "population.csv not found" in err and "run directory" in err


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


def test_replay_writes_the_best_members_lineage_schedule(run, tmp_path, capsys):
    """The best member's schedule, and that of the recipient of the last generation's but one exploit (whose line
    crosses an exploit whatever the scores on this host): in every generation, the values its weights' owner
    trained with."""
    run_dir, _ = run
    history = load_run(run_dir)
    best = best_member(history)
    lineage = read_lineage(run_dir)
    copied = [e for e in lineage if e["generation"] == GENERATIONS - 1 and e["donor"] != e["recipient"]]
    assert copied, f"no member copied another's weights after generation {GENERATIONS - 1}: {lineage}"
    for member, asked in [(best, "best"), (copied[-1]["recipient"], str(copied[-1]["recipient"]))]:
        out = tmp_path / f"schedule-{asked}.yml"
        status, _, err = tool(capsys, replay_tool.main, run_dir, "--member", asked, "--out", out)
        assert status == 0, err
        document = yaml.safe_load(out.read_text())
        assert document["source"]["member"] == member and document["env_id"] == "CartPole-v1"
        schedule, env_id, algo = load_schedule(out, tunable("ppo"))
        assert (env_id, algo) == ("CartPole-v1", "ppo")
        # in every generation, the hyperparameters in effect are those the weights' owner trained with
        owners = line_of(history, member)
        for generation in range(GENERATIONS, 0, -1):
            start = (generation - 1) * STEPS
            assert hparams_at(schedule, start) == history.row(generation, owners[generation]).hparams
        assert owners[1] == ancestry(history)[GENERATIONS][member]  # the walk ends at the line's founder
        assert [entry["from"]["member"] for entry in document["schedule"]][-1] == member
    last = copied[-1]
    assert line_of(history, last["recipient"])[last["generation"]] == last["donor"]  # the walk crossed it


def test_one_agent_follows_a_replayed_schedule(run, tmp_path, capsys, caplog):
    run_dir, hp = run
    schedule_file = tmp_path / "schedule.yml"
    assert tool(capsys, replay_tool.main, run_dir, "--out", schedule_file)[0] == 0
    schedule, _, _ = load_schedule(schedule_file, tunable("ppo"))
    replay_dir = tmp_path / "replay"
    with caplog.at_level(logging.INFO, logger="evo"):
        train_cartpole(hp, replay_dir, "--num-agents", "1", "--schedule", str(schedule_file), "--tb-writer", "False")
    assert "following the schedule" in caplog.text
    replayed = load_run(replay_dir)
    assert replayed.members == [0]
    for generation in range(1, GENERATIONS + 1):
        row = replayed.row(generation, 0)
        assert row.donor is None
        assert row.hparams == pytest.approx(hparams_at(schedule, (generation - 1) * STEPS))


def test_schedule_needs_one_agent_and_its_env(run, tmp_path, capsys):
    """Refused at start-up (exit 2 on every rank, as every refusal: tests/e2e/test_resilience.py), saying why."""
    run_dir, hp = run
    schedule_file = tmp_path / "schedule.yml"
    assert tool(capsys, replay_tool.main, run_dir, "--out", schedule_file)[0] == 0
    common = ["--schedule", str(schedule_file), "--hyperparams", str(hp), "--run-dir", str(tmp_path / "r")]
    with pytest.raises(ConfigError) as refused:
        parse_config(["--env-id", "CartPole-v1", "--num-agents", "2", *common], world_size=2)
    assert str(refused.value).count("pass --num-agents 1") == 1
    with pytest.raises(ConfigError) as refused:
        parse_config(["--env-id", "Acrobot-v1", "--num-agents", "1", *common], world_size=1)
    assert "was found on CartPole-v1, not Acrobot-v1" in str(refused.value)
    assert not (tmp_path / "r").exists()

"""evo/tools/replay.py on a hand-written run of an off-policy learner, whose members train different
env steps per generation: each generation's budget is rounded up to whole collections of the
member's own train_freq (200 steps are 200 with train_freq 10, 207 with 9). The schedule of a
member's line must switch when the line's weights had trained that long, which is where a
single agent replaying it ends each generation."""

import yaml

from evo.core.kinds import Integer, LogFloat
from evo.tools.replay import write_schedule

HEADER = (
    "generation,member,rank,env_steps,score,donor,learning_rate,train_freq,score_train,score_test,score_train_stale"
)


def schedule_of(tmp_path, member, rows) -> dict:
    """The schedule evo.tools.replay writes for ``member`` of a SAC run recorded as ``rows``
    (generation, member, env_steps, score, donor, learning_rate, train_freq)."""
    run_dir = tmp_path / "run"
    sac_run(run_dir, rows)
    _, document = write_schedule(run_dir, member=member, out=tmp_path / "schedule.yml")
    return document


def sac_run(run_dir, rows):
    run_dir.mkdir()
    space = {"learning_rate": LogFloat(1e-5, 2e-3).spec(), "train_freq": Integer(1, 10).spec()}
    config = {
        "env_id": "Pendulum-v1",
        "run_id": "hand-written",
        "agent_training_steps": 200,
        "agent": {"algo": "sac", "search_space": space},
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    lines = [HEADER] + [
        f"{g},{m},{m},{steps},{score},{donor},{lr},{tf},{score},nan,0" for g, m, steps, score, donor, lr, tf in rows
    ]
    (run_dir / "population.csv").write_text("\n".join(lines) + "\n")


def test_each_segment_starts_at_the_env_steps_the_lines_weights_had_trained(tmp_path):
    # generation 1: member 0 (train_freq 10) trains 200 env steps, member 1 (train_freq 9) 207 and
    # then copies member 0; in generation 2 member 1 trains member 0's weights with its new values
    document = schedule_of(
        tmp_path,
        1,
        [
            (1, 0, 200, -100.0, "", 1e-3, 10),
            (1, 1, 207, -500.0, 0, 1e-4, 9),
            (2, 0, 400, -90.0, "", 1e-3, 10),
            (2, 1, 407, -80.0, "", 8e-4, 8),
        ],
    )
    segments = [(entry["env_steps"], entry["from"], entry["hparams"]) for entry in document["schedule"]]
    assert segments == [
        (0, {"member": 0, "generation": 1}, {"learning_rate": 1e-3, "train_freq": 10}),
        # member 0's weights had trained 200 env steps when member 1 took them (not member 1's own 207)
        (200, {"member": 1, "generation": 2}, {"learning_rate": 8e-4, "train_freq": 8}),
    ]


def test_a_line_through_several_owners_adds_up_the_steps_each_trained(tmp_path):
    # member 1 copies member 0 after generation 1, member 0 copies member 1 after generation 2:
    # member 0's line is member 0 (200 steps), member 1 (203: train_freq 7), then member 0 again
    document = schedule_of(
        tmp_path,
        0,
        [
            (1, 0, 200, -100.0, "", 1e-3, 10),
            (1, 1, 207, -500.0, 0, 1e-4, 9),
            (2, 0, 400, -400.0, 1, 1e-3, 10),
            (2, 1, 410, -80.0, "", 8e-4, 7),
            (3, 0, 600, -70.0, "", 5e-4, 10),
            (3, 1, 613, -90.0, "", 8e-4, 7),
        ],
    )
    assert [(entry["env_steps"], entry["from"]["member"]) for entry in document["schedule"]] == [
        (0, 0),
        (200, 1),
        (403, 0),
    ]

"""Reading a run back (pure): ancestry, the best member, and the schedule walk."""

import math
from pathlib import Path

import pytest

from evo.config import ConfigError, parse_config
from evo.core.schedule import hparams_at, load_schedule
from evo.learners import learner_spec
from evo.rundir.history import Row, RunDirError, RunHistory, ancestry, best_member, copies_by_generation, schedule_of
from tests.support import PPO_SIX

TUNABLE = {s.name: (s.type, s.may_be_off) for s in learner_spec("ppo").settings if s.tunable}
"""PPO's tunable settings as --schedule reads a file against them (evo.config.checks.schedule)."""


def hp(lr):
    return {name: (lr if name == "learning_rate" else 0.5) for name in PPO_SIX}


def history(table):
    """table: {generation: [(score, donor, lr) per member]}, 100 env steps per generation."""
    rows = [
        Row(g, m, 100 * g, score, donor, hp(lr))
        for g, members in table.items()
        for m, (score, donor, lr) in enumerate(members)
    ]
    return RunHistory(Path("run"), {"env_id": "CartPole-v1"}, rows, [])


# member 2 copies 0 after gen 1; member 1 copies 2 after gen 2: 1's line is 0's line
RUN_TABLE = {
    1: [(10, None, 1.0), (5, None, 2.0), (1, 0, 3.0)],
    2: [(11, None, 1.0), (4, 2, 2.0), (20, None, 1.5)],
    3: [(12, None, 1.0), (30, None, 1.8), (21, None, 1.5)],
}
RUN = history(RUN_TABLE)


def test_ancestry_follows_copies_to_the_founder():
    assert copies_by_generation(RUN) == {1: {2: 0}, 2: {1: 2}}
    assert ancestry(RUN) == {1: {0: 0, 1: 1, 2: 2}, 2: {0: 0, 1: 1, 2: 0}, 3: {0: 0, 1: 0, 2: 0}}


def test_schedule_walks_back_through_every_exploit():
    schedule = schedule_of(RUN, best_member(RUN))
    assert best_member(RUN) == 1
    # gen 3: member 1 (lr 1.8); gen 2: member 2, whose weights it took (1.5); gen 1: member 0 (1.0)
    assert [(e["env_steps"], e["member"], e["hparams"]["learning_rate"]) for e in schedule] == [
        (0, 0, 1.0),
        (100, 2, 1.5),
        (200, 1, 1.8),
    ]
    # a member that never copied keeps its own line; equal consecutive values merge
    assert [(e["env_steps"], e["member"]) for e in schedule_of(RUN, 0)] == [(0, 0)]
    with pytest.raises(RunDirError, match="member 7 is not in"):
        schedule_of(RUN, 7)


def restarted(table, restarts):
    """``history(table)`` with the lineage's restart lines: {(generation, member): donor}."""
    base = history(table)
    lines = [{"event": "restart", "generation": g, "member": m, "donor": d} for (g, m), d in restarts.items()]
    return RunHistory(base.run_dir, base.config, base.rows, lines)


def test_a_restarted_member_takes_its_donors_line_or_starts_one_with_fresh_weights():
    # member 2 failed in generation 2 and trained it again from member 0's weights of generation 2
    run = restarted(RUN_TABLE, {(2, 2): 0})
    assert ancestry(run) == {1: {0: 0, 1: 1, 2: 2}, 2: {0: 0, 1: 1, 2: 0}, 3: {0: 0, 1: 0, 2: 0}}
    run = restarted(RUN_TABLE, {(2, 2): 1})
    assert ancestry(run)[2] == {0: 0, 1: 1, 2: 1} and ancestry(run)[3] == {0: 0, 1: 1, 2: 1}
    # with fresh weights member 2 founds a line of its own again
    run = restarted(RUN_TABLE, {(2, 2): None})
    assert ancestry(run)[2] == {0: 0, 1: 1, 2: 2} and ancestry(run)[3][1] == 2


def test_the_schedule_of_a_restarted_line_takes_the_donors_generation_then_the_redone_one():
    run = restarted(RUN_TABLE, {(2, 2): 0})
    # member 1's weights of gen 3 are member 2's of gen 2 (restarted from member 0's of gen 2,
    # then trained again), so: gen 1 member 0, gen 2 member 0 then member 2's redo, gen 3 member 1
    assert [(e["env_steps"], e["member"], e["hparams"]["learning_rate"]) for e in schedule_of(run, 1)] == [
        (0, 0, 1.0),
        (200, 2, 1.5),
        (300, 1, 1.8),
    ]
    run = restarted(RUN_TABLE, {(2, 2): None})
    assert [(e["env_steps"], e["member"]) for e in schedule_of(run, 1)] == [(0, 2), (100, 1)]


def test_best_member_ranks_nan_last_and_ties_by_id():
    tied = history({1: [(math.nan, None, 1.0), (3, None, 1.0), (3, None, 1.0)]})
    assert best_member(tied) == 1


def test_hparams_at_picks_the_last_entry_started(tmp_path):
    schedule = [(0, hp(1.0)), (150, hp(2.0))]
    assert hparams_at(schedule, 0) == hp(1.0)
    assert hparams_at(schedule, 149) == hp(1.0)
    assert hparams_at(schedule, 150) == hp(2.0)
    with pytest.raises(ValueError, match="no such file"):
        load_schedule(tmp_path / "none.yml", TUNABLE)


def test_a_schedule_must_give_every_explored_hyperparameter(tmp_path):
    """A member replaying it carries the schedule's hyperparameters, and the run's records have a
    column for every explored one (the search space's): a schedule without ent_coef is refused."""
    bad = tmp_path / "s.yml"
    bad.write_text("schedule:\n- env_steps: 10\n  hparams: {learning_rate: 1}\n")
    with pytest.raises(ConfigError, match="missing ent_coef"):
        parse_config(["--num-agents", "1", "--schedule", str(bad)], world_size=1, check_run_dir=False)


def test_an_asynchronous_copy_takes_the_donors_own_interval():
    """Member 1 copies member 0's interval 3 at its own ready point 1 (member 0 ran ahead); member 2
    restarted in its interval 2 from member 1's interval 2, and has one row fewer (the run stopped)."""
    rows = [
        Row(1, 0, 100, 10, None, hp(1.0)),
        Row(2, 0, 200, 11, None, hp(1.0)),
        Row(3, 0, 300, 12, None, hp(1.1)),
        Row(1, 1, 100, 1, 0, hp(2.0), donor_interval=3),
        Row(2, 1, 200, 13, None, hp(2.5)),
        Row(3, 1, 300, 14, None, hp(2.5)),
        Row(1, 2, 100, 5, None, hp(3.0)),
        Row(2, 2, 200, 6, None, hp(3.5)),
    ]
    restart = {"event": "restart", "generation": 2, "member": 2, "donor": 1, "donor_interval": 2}
    run = RunHistory(Path("run"), {"env_id": "CartPole-v1", "asynchronous": True}, rows, [restart])
    assert ancestry(run) == {1: {0: 0, 1: 1, 2: 2}, 2: {0: 0, 1: 0, 2: 0}, 3: {0: 0, 1: 0}}
    # member 2: its interval 2 from member 1's interval 2 (member 1's weights: member 0's 1..3, then its 2)
    assert [(e["env_steps"], e["member"], e["generation"]) for e in schedule_of(run, 2)] == [
        (0, 0, 1),
        (200, 0, 3),
        (300, 1, 2),
        (400, 2, 2),
    ]
    assert best_member(run) == 1 and [r.member for r in run.at(3)] == [0, 1, 2]
    assert run.last_generation(2) == 2


def staged_run() -> RunHistory:
    """2 members, 100 env steps a generation; a stage after generation 1 whose 3 students (ids 2-4,
    teacher 0) distil in generation 2 from the population's 100 steps to 150; students 4 and 2 survive
    into members 0 and 1, which train on in generation 3."""
    rows = [Row(1, 0, 100, 5.0, None, hp(1.0), stage=0), Row(1, 1, 100, 3.0, None, hp(1.0), stage=0)]
    rows += [Row(2, s, 150, float(s), None, hp(1.0), stage=1, teacher=0) for s in (2, 3, 4)]
    rows += [Row(3, 0, 250, 9.0, None, hp(1.0), stage=1), Row(3, 1, 250, 8.0, None, hp(1.0), stage=1)]
    lineage = [{"event": "student", "stage": 1, "generation": 1, "member": s, "teacher": 0} for s in (2, 3, 4)]
    lineage += [
        {"event": "survivor", "stage": 1, "generation": 2, "member": m, "student": s, "env_steps": 150}
        for m, s in ((0, 4), (1, 2))
    ]
    return RunHistory(Path("run"), {"env_id": "Pendulum-v1"}, rows, lineage)


def test_each_env_step_of_a_stage_is_counted_once():
    """A student starts from the population's steps; a member after the stage from its survivor's (the
    student's 50 steps are the student's rows', not the member's again)."""
    run = staged_run()
    trained = {(r.generation, r.member): r.env_steps - run.started_at(r) for r in run.rows}
    assert trained == {(1, 0): 100, (1, 1): 100, (2, 2): 50, (2, 3): 50, (2, 4): 50, (3, 0): 100, (3, 1): 100}
    assert sum(trained.values()) == 2 * 100 + 3 * 50 + 2 * 100

"""The session (evo/runner/session.py) without MPI jobs: what it makes of a config, on MPI.COMM_SELF."""

import logging

import numpy as np
import pytest
from mpi4py import MPI

from evo.config import parse_config
from evo.core.kinds import sample_hparams
from evo.core.streams import INIT_STREAM
from evo.runner.session import Placement, member_factory, open_session
from tests.support import write_hyperparams


@pytest.mark.parametrize("members, ranks", [(1, 1), (4, 1), (4, 2), (8, 4), (6, 3)])
def test_placement_is_contiguous_blocks_and_owner_inverts_it(members, ranks):
    placement = Placement(members, ranks)
    held = [list(placement.members_of(rank)) for rank in range(ranks)]
    assert [m for block in held for m in block] == list(range(members))
    assert all(placement.owner(m) == rank for rank, block in enumerate(held) for m in block)


def test_initial_hyperparameters_are_drawn_per_member_or_the_yamls(tmp_path):
    tiny = write_hyperparams(tmp_path)
    sampled = member_factory(parse_config(["--hyperparams", str(tiny), "--seed", "5"], check_run_dir=False))
    assert sampled.initial.of(0) != sampled.initial.of(1)
    first_of_1 = sampled.initial.of(1)
    sampled.initial.of(0), sampled.initial.of(2)  # other members' draws take nothing from member 1's stream
    again = member_factory(parse_config(["--hyperparams", str(tiny), "--seed", "5"], check_run_dir=False))
    assert sampled.initial.of(1) == first_of_1 == again.initial.of(1)  # its own stream: the same draw each time
    rng = np.random.default_rng([5, 1, INIT_STREAM])  # member 1's stream of the table
    assert sampled.initial.of(1) == sample_hparams(sampled.initial.space, rng)
    config = parse_config(["--hyperparams", str(tiny), "--initial-hparams", "defaults"], check_run_dir=False)
    defaults = member_factory(config).initial
    assert defaults.of(0) == defaults.of(3) == {name: config.agent.settings[name] for name in config.agent.search_space}


def test_a_session_without_records_writes_nothing_and_reads_the_config_once(tmp_path):
    tiny = write_hyperparams(tmp_path)
    argv = ["--hyperparams", str(tiny), "--run-dir", str(tmp_path / "run"), "--num-agents", "3"]
    config = parse_config([*argv, "--seed", "9", "--truncation-fraction", "0.5", "--checkpoint-every", "2"])
    session = open_session(config, MPI.COMM_SELF, records=False)
    try:
        assert not (tmp_path / "run").exists() and session.records is None
        assert session.placement == Placement(3, 1)
        assert (session.rules.seed, session.rules.truncation_fraction, session.rules.strategy) == (9, 0.5, "truncation")
        assert session.rules.space == config.agent.explored_space and session.names == config.explored_names
        assert (session.checkpoint_every, session.target.run_id, session.target.keep) == (2, config.run_id, 2)
        assert session.budget.total_generations == config.total_generations
        assert session.members.setup.agent is config.agent and session.stages is None
        assert not session.stop.requested and session.progress(0, 3) is not None  # rank 0 reports progress
    finally:
        session.close()


def test_a_learner_whose_evaluate_takes_no_step_callback_is_scored_as_before(tmp_path):
    """Learner.evaluate gained ``on_step`` (the watchdog's, issue 54 N3); a learner of one's own written to the
    interface before it is scored without it (its evaluation untimed), not failed with a TypeError."""
    from evo.core.result import Scores

    class Old:
        member_id, scores = 0, []

        def evaluate(self):
            return Scores(score=3.0)

    class New(Old):
        def evaluate(self, on_step=None):
            on_step()  # a step of its evaluation: the watchdog notes it
            return Scores(score=4.0)

    tiny = write_hyperparams(tmp_path)
    config = parse_config(["--hyperparams", str(tiny), "--run-dir", str(tmp_path / "run"), "--num-agents", "1"])
    session = open_session(config, MPI.COMM_SELF, records=False)
    try:
        old, new = Old(), New()
        assert session.score(old).score == 3.0 and old.scores == [3.0]
        assert session.score(new).score == 4.0
    finally:
        session.close()


def test_a_run_whose_members_never_pass_learning_starts_is_warned(tmp_path, caplog):
    """TD3's Pendulum settings start learning at env step 10,000: 200 env steps a member learn nothing."""
    argv = ["--algo", "td3", "--env-id", "Pendulum-v1", "--num-agents", "1", "--run-dir", str(tmp_path / "run")]
    short = parse_config([*argv, "--total-generations", "1", "--agent-training-steps", "200"])
    with caplog.at_level(logging.WARNING, logger="evo"):
        open_session(short, MPI.COMM_SELF, records=False).close()
    assert "each member trains 200 env steps in all and learning_starts is 10000" in caplog.text
    caplog.clear()
    enough = parse_config([*argv, "--total-generations", "2", "--agent-training-steps", "6000"])
    with caplog.at_level(logging.WARNING, logger="evo"):
        open_session(enough, MPI.COMM_SELF, records=False).close()
    assert "learning_starts" not in caplog.text


def test_a_full_disk_is_said_in_words_and_anything_else_with_its_traceback():
    import errno

    from evo.main import fatal_message

    full = OSError(errno.ENOSPC, "No space left on device", "/runs/x/checkpoints/gen_000003/member_1.pt")
    said = fatal_message(1, "vm", full)
    assert "Traceback" not in said and "[1@vm] evo: the disk is full (No space left on device writing" in said
    assert "last complete checkpoint stands" in said and "--resume" in said
    try:
        raise RuntimeError("boom")
    except RuntimeError as error:
        said = fatal_message(0, "vm", error)
    assert "unrecoverable error on rank 0" in said and "Traceback" in said and "RuntimeError: boom" in said

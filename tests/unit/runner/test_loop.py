"""The generation loop (evo.loop) in one process on MPI.COMM_SELF: the order of its steps,
resuming, stopping mid-generation, the toy, and two real PPO members through it."""

from dataclasses import replace

import numpy as np
import pytest
from mpi4py import MPI

from evo.core.explorers import make_explorer
from evo.core.plan import generation_rng, plan_generation
from evo.core.result import Scores, new_best
from evo.learners.interface import Exchangeable, buffers_for
from evo.mpi.exchange import StopNotifier
from evo.runner.loop import Hooks, LoopSettings, run_generations

SPACE_X = {}  # the fakes' plan explores nothing: recipients keep their donor's hyperparameters


class RecordingComm:
    """COMM_SELF, noting each gather (the loop's gather step) in the event list."""

    def __init__(self, events: list):
        self.events = events

    def gather(self, value, root=0):
        self.events.append(("gather",))
        return MPI.COMM_SELF.gather(value, root=root)

    def __getattr__(self, name):
        return getattr(MPI.COMM_SELF, name)


class FakeMember:
    """A member whose weights are a small buffer; notes exploit_state/load in the event list."""

    def __init__(self, member_id: int, events: list):
        self.member_id = member_id
        self.events = events
        self.buffer = np.zeros(3)
        self.hparams = {"x": float(member_id)}
        self.env_steps = 0

    def exploit_state(self):
        self.events.append(("exploit_state", self.member_id))
        return {"weights": self.buffer}

    def receive_buffers(self, layout):
        return buffers_for(layout, {"weights": self.buffer})

    def load(self, state, hparams):
        self.events.append(("load", self.member_id))
        if state["weights"] is not self.buffer:
            np.copyto(self.buffer, state["weights"])
        self.hparams = dict(hparams)

    def set_hparams(self, hparams):
        self.events.append(("set_hparams", self.member_id))
        self.hparams = dict(hparams)


class FakeStopper:
    def __init__(self, events: list):
        self.events = events

    def poll(self) -> bool:
        return False

    def agree(self) -> bool:
        self.events.append(("agree",))
        return False


def fake_run(events: list, stop_at: int | None = None, stop_flag: list | None = None, stop_scoring: bool = False):
    """Members 0 and 1 (member m gains m + 1 per generation, so member 1 is always best and
    member 0 copies it under winner-takes-all) and hooks that note every call. ``stop_at``: a stop
    arrives in member 0's training of that generation (``stop_scoring``: in its evaluation episodes,
    which it ends: its score hook returns None)."""
    members = {m: FakeMember(m, events) for m in (0, 1)}
    assert all(isinstance(member, Exchangeable) for member in members.values())
    explorer = make_explorer("perturb", SPACE_X)
    trained = {0: 0, 1: 0}

    def train(member, should_stop):
        events.append(("train", member.member_id))
        trained[member.member_id] += 1
        if stop_at is not None and member.member_id == 0 and trained[0] == stop_at and not stop_scoring:
            stop_flag.append(True)  # a signal arrives during member 0's training
            if should_stop():
                return
        member.buffer += member.member_id + 1
        member.env_steps += 10

    def score(member):
        events.append(("score", member.member_id))
        if stop_scoring and member.member_id == 0 and trained[0] == stop_at:
            stop_flag.append(True)  # a signal arrives during member 0's evaluation episodes, which end
            return None
        return Scores(float(member.buffer[0]))

    def plan(generation, population):
        events.append(("plan", tuple(result.member for result in population)))
        return plan_generation(generation, population, "wta", explorer, generation_rng(0, generation))

    hooks = Hooks(
        train=train,
        score=score,
        plan=plan,
        records=lambda report: events.append(("records", report.generation)) or {"state of": report.generation},
        snapshot=lambda generation, run_state: events.append(("snapshot", generation, run_state)) or generation,
        save=lambda generation: events.append(("save", generation)),
    )
    return members, hooks


def steps_of(generation: int) -> list[tuple]:
    return [
        ("train", 0),
        ("train", 1),
        ("agree",),
        ("score", 0),
        ("score", 1),
        ("agree",),
        ("gather",),
        ("plan", (0, 1)),
        ("exploit_state", 1),
        ("load", 0),
        ("records", generation),
        ("snapshot", generation, {"state of": generation}),
        ("save", generation),
    ]


def test_each_generation_runs_its_steps_in_order_and_a_recipient_is_replaced_after_scoring():
    events = []
    members, hooks = fake_run(events)
    outcome = run_generations(
        RecordingComm(events), members, lambda m: 0, hooks, LoopSettings(0, 3), stopper=FakeStopper(events)
    )
    assert events == [step for generation in (1, 2, 3) for step in steps_of(generation)]
    assert not outcome.stopped and outcome.completed == 3
    # generation 3: member 0 trained from member 1's weights of generation 2 (2 + 2 = 4) to 5 and
    # was scored on its own weights; only then did it copy member 1's (4 + 2 = 6)
    results = {result.member: result for result in outcome.last.results}
    assert results[0].score == 5.0 and results[1].score == 6.0
    assert np.array_equal(members[0].buffer, members[1].buffer) and members[0].buffer[0] == 6.0
    assert outcome.last.donors == {0: 1} and [r.member for r in outcome.last.population] == [0, 1]
    assert results[0].env_steps == 30 and results[0].rank == 0


def test_a_resumed_loop_continues_after_the_checkpoint_and_records_only_new_generations():
    events = []
    members, hooks = fake_run(events)
    outcome = run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(2, 5, checkpoint_every=2))
    assert [e[1] for e in events if e[0] == "records"] == [3, 4, 5]
    assert [e[1] for e in events if e[0] == "snapshot"] == [3, 4, 5]
    assert [e[1] for e in events if e[0] == "save"] == [4, 5]  # every 2nd, and the last
    assert sum(e == ("train", 0) for e in events) == 3
    assert outcome.completed == 5 and outcome.last.generation == 5


@pytest.mark.parametrize("every, saved, at_stop", [(2, [2, 3], [("save", 3)]), (1, [1, 2, 3], [])])
def test_a_stop_during_training_skips_the_rest_of_the_generation_and_writes_the_last_boundary(every, saved, at_stop):
    events, flag = [], []
    members, hooks = fake_run(events, stop_at=4, stop_flag=flag)
    stopper = StopNotifier(MPI.COMM_SELF, lambda: bool(flag))
    outcome = run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 6, "p2p", every), stopper)
    assert outcome.stopped and outcome.completed == 3 and outcome.last.generation == 3
    # generation 4: member 0's training was cut short, member 1 never started; nothing after
    after = events[events.index(("records", 3)) :]
    assert [e for e in after if e[0] in ("train", "score", "plan", "exploit_state", "load", "records")] == [
        ("records", 3),
        ("train", 0),
    ]
    # the boundary of generation 3 is on disk, written at the stop if checkpoint_every skipped it
    assert [e[1] for e in events if e[0] == "save"] == saved
    stop_training = len(events) - 1 - events[::-1].index(("train", 0))
    assert events[stop_training + 1 :] == at_stop


@pytest.mark.parametrize("every, saved", [(2, [2, 3]), (1, [1, 2, 3])])
def test_a_stop_during_scoring_drops_the_generation_and_writes_the_last_boundary(every, saved):
    """A stop request ends member 0's evaluation episodes in generation 4: member 1 is not scored, the ranks
    agree to stop, and nothing of generation 4 is gathered, planned, exchanged or recorded; its boundary is
    generation 3's (a resume trains and scores generation 4 again). Before, the generation went on."""
    events, flag = [], []
    members, hooks = fake_run(events, stop_at=4, stop_flag=flag, stop_scoring=True)
    stopper = StopNotifier(MPI.COMM_SELF, lambda: bool(flag))
    outcome = run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 6, "p2p", every), stopper)
    assert outcome.stopped and outcome.completed == 3 and outcome.last.generation == 3
    after = events[events.index(("records", 3)) :]
    assert [e for e in after if e[0] in ("train", "score", "plan", "exploit_state", "load", "records")] == [
        ("records", 3),
        ("train", 0),
        ("train", 1),
        ("score", 0),
    ]
    assert [e[1] for e in events if e[0] == "save"] == saved
    assert not [e for e in events if e[0] == "snapshot" and e[1] == 4]


def test_the_toy_reaches_the_optimum_on_comm_self():
    from evo.toy import ToySettings, run_variant

    settings = ToySettings(workers=2)
    pbt = run_variant(MPI.COMM_SELF, settings, exploit=True, explore=True, seed=0)
    neither = run_variant(MPI.COMM_SELF, settings, exploit=False, explore=False, seed=0)
    final = {
        name: max(points[-1][3] for points in result["trajectories"].values())
        for name, result in (("PBT", pbt), ("grid search", neither))
    }
    assert final["PBT"] >= 1.19
    assert final["grid search"] == pytest.approx(1.2 - 0.81, abs=1e-6)  # each worker zeroes one coordinate only
    assert pbt["lineage"] and all(entry["recipient"] != entry["donor"] for entry in pbt["lineage"])
    assert neither["lineage"] == []


def test_two_ppo_members_exchange_through_the_real_loop(tiny_hyperparams, tmp_path):
    transport = "p2p"
    from evo.config import parse_config
    from evo.runner.generation import generation_hooks
    from evo.runner.session import member_factory, open_session
    from evo.sb3.flat import pack

    config = parse_config(
        ["--hyperparams", str(tiny_hyperparams), "--num-agents", "2", "--agent-training-steps", "128"]
        + ["--run-dir", str(tmp_path / "run")],  # the members' TensorBoard files go there, not into runs/
        strategy="wta",
        transport=transport,
        world_size=1,
        check_run_dir=False,
    )
    members = member_factory(config).build(config.members_of(0), 0, None)
    explorer = make_explorer(
        config.explore, config.agent.search_space, config.perturb_factors, config.resample_probability
    )
    session = open_session(config, MPI.COMM_SELF, records=False)
    hooks = replace(
        generation_hooks(session, members, explorer),
        records=None,
        snapshot=None,
        save=None,
    )
    assert not np.array_equal(members[0].buffer, members[1].buffer)
    outcome = run_generations(MPI.COMM_SELF, members, config.owner, hooks, LoopSettings(0, 1, transport))

    ((recipient, donor),) = outcome.last.donors.items()
    assert np.array_equal(members[recipient].buffer, members[donor].buffer)
    model_state = np.empty_like(members[recipient].buffer)
    pack(members[recipient].model, model_state)  # the model's own tensors hold the donor's state
    assert np.array_equal(model_state, members[donor].buffer)
    (exploit,) = outcome.last.exploits
    assert members[recipient].hparams == exploit.new_hparams
    assert members[recipient].model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(
        exploit.new_hparams["learning_rate"]
    )
    for member in members.values():
        member.close()
    session.close()


# --- a failing member is restarted, not the job ------------------------------------------


class Boom(RuntimeError):
    pass


def failing_run(events: list, fails: dict, limit: int = 3, strategy: str = "wta"):
    """Members 0, 1, 2 as in fake_run (member m gains m + 1 a generation); ``fails`` maps
    (member, generation) to how many times its training raises there."""
    from evo.core.restart import failures_by_member, plan_restarts

    members = {m: FakeMember(m, events) for m in (0, 1, 2)}
    explorer = make_explorer("perturb", SPACE_X)
    counts = failures_by_member([])

    def train(member, should_stop):
        generation = trained[member.member_id] + 1  # a failed try does not count
        events.append(("train", member.member_id))
        key = (member.member_id, generation)
        if fails.get(key, 0) > 0:
            fails[key] -= 1
            member.env_steps += 3  # part of the generation, then the env raises
            raise Boom(f"member {member.member_id} broke")
        member.buffer += member.member_id + 1
        member.env_steps += 10
        trained[member.member_id] += 1

    def score(member):
        events.append(("score", member.member_id))
        return Scores(float(member.buffer[0]))

    def plan(generation, population):
        events.append(("plan", tuple(result.member for result in population)))
        return plan_generation(generation, population, strategy, explorer, generation_rng(0, generation))

    def restart(generation, failures, scored, recipients, round_):
        events.append(("restart", tuple(f.member for f in failures), round_))
        rng = np.random.default_rng(round_)
        planned = plan_restarts(generation, failures, scored, counts, limit, SPACE_X, rng, strategy, 0.25, recipients)
        for r in planned:
            counts[r.member] = r.failures
        return planned

    def rebuild(member, restart, env_steps):
        events.append(("rebuild", member.member_id, restart.donor))
        fresh = FakeMember(member.member_id, events)
        fresh.env_steps = env_steps
        fresh.hparams = dict(restart.new_hparams)
        return fresh

    trained = {0: 0, 1: 0, 2: 0}
    hooks = Hooks(
        train=train,
        score=score,
        plan=plan,
        records=lambda report: events.append(("records", report.generation)),
        restart=restart,
        rebuild=rebuild,
        restarted=lambda member, r: events.append(("restarted", member.member_id)),
    )
    return members, hooks


def test_a_member_that_raises_is_rebuilt_from_a_top_member_and_trains_its_generation_again():
    events = []
    members, hooks = failing_run(events, {(2, 2): 1})
    original = members[2]
    outcome = run_generations(
        RecordingComm(events), members, lambda m: 0, hooks, LoopSettings(0, 3, max_member_failures=3)
    )
    assert not outcome.stopped and outcome.completed == 3
    second = events[events.index(("records", 1)) + 1 : events.index(("records", 2)) + 1]
    assert second == [
        ("train", 0),
        ("train", 1),
        ("train", 2),  # raises
        ("score", 0),
        ("score", 1),
        ("gather",),  # the results
        ("gather",),  # the failures
        ("plan", (0, 1)),  # selection among the members that did not fail: 0 copies 1
        ("restart", (2,), 0),
        ("rebuild", 2, 1),  # from member 1, the best that keeps its weights
        ("exploit_state", 1),
        ("load", 0),
        ("load", 2),
        ("restarted", 2),
        ("train", 2),  # generation 2 again
        ("score", 2),
        ("gather",),  # the redone results
        ("gather",),  # their failures: none
        ("records", 2),
    ]
    assert members[2] is not original
    report = outcome.last
    assert [r.member for r in report.population] == [0, 1, 2] and report.restarts == ()
    # the restarted member kept its own counter (where generation 2 began), trained 2 and 3 once each
    assert members[2].env_steps == 30 and members[0].env_steps == 30
    # generation 1 ended with everyone copying member 2 (3); member 1 then had 3 + 2 = 5 after
    # generation 2, and member 2 trained generation 2 again (+3) and 3 (+3) from those weights
    assert members[2].buffer[0] == 5 + 3 + 3


def test_the_report_holds_the_generations_restarts_and_the_redone_result_once():
    events = []
    members, hooks = failing_run(events, {(2, 1): 1})
    reports = []
    hooks = replace(hooks, records=lambda report: reports.append(report))
    run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 1, max_member_failures=3))
    (report,) = reports
    (restart,) = report.restarts
    assert (restart.member, restart.donor, restart.failures) == (2, 1, 1)
    assert restart.error == "Boom: member 2 broke"
    assert sorted(r.member for r in report.results) == [0, 1, 2]
    assert [r.member for r in report.population] == [0, 1, 2]
    assert report.donors == {0: 1}  # the restart's copy is not an exploit of the generation


def test_a_member_failing_again_restarts_again_and_past_the_limit_ends_the_job():
    from evo.core.restart import TooManyFailures

    events = []
    members, hooks = failing_run(events, {(2, 1): 2}, limit=2)  # fails, and fails again in its second try
    reports = []
    hooks = replace(hooks, records=lambda report: reports.append(report))
    run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 1, max_member_failures=2))
    assert [(r.member, r.failures) for r in reports[0].restarts] == [(2, 1), (2, 2)]
    assert [e for e in events if e[0] == "restart"] == [("restart", (2,), 0), ("restart", (2,), 1)]

    events = []
    members, hooks = failing_run(events, {(2, 1): 3}, limit=2)
    with pytest.raises(TooManyFailures, match=r"member 2 \(3 failures, the last: Boom: member 2 broke\)"):
        run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 1, max_member_failures=2))


def test_without_restarts_the_exception_ends_the_job_as_before():
    events = []
    members, hooks = failing_run(events, {(1, 1): 1})
    with pytest.raises(Boom):
        run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 2))  # max_member_failures=0


def test_without_pbt_a_failed_member_restarts_with_fresh_weights():
    events = []
    members, hooks = failing_run(events, {(0, 2): 1}, limit=1, strategy="none")
    run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 2, max_member_failures=1))
    assert ("rebuild", 0, None) in events and ("exploit_state", 1) not in events
    assert members[0].buffer[0] == 1.0  # fresh (0), then generation 2 again (+1)


def test_a_member_that_fails_to_be_scored_is_restarted_too():
    events = []
    members, hooks = failing_run(events, {})
    raised = []

    def score(member):
        if member.member_id == 1 and not raised:
            raised.append(True)
            raise Boom("the evaluation env broke")
        return Scores(float(member.buffer[0]))

    reports = []
    hooks = replace(hooks, score=score, records=lambda report: reports.append(report))
    run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 1, max_member_failures=1))
    (restart,) = reports[0].restarts
    assert restart.member == 1 and restart.error == "Boom: the evaluation env broke" and restart.donor == 2
    assert sorted(r.member for r in reports[0].population) == [0, 1, 2]


# --- the best member of the run is kept as it was scored -------------------------------------


def test_the_best_is_captured_as_scored_before_any_exploit_and_kept_until_beaten():
    """Member 0 scores best in generation 1 (5), then falls back (-5) and copies member 1, whose
    score only equals it: the kept best stays member 0's weights of generation 1, captured between
    the gather and the exchange, although member 0's own weights have changed twice since."""
    events = []
    members, hooks = fake_run(events)
    gains = {0: [5.0, -10.0, 0.0], 1: [1.0, 0.0, 0.0]}
    trained = {0: 0, 1: 0}

    def train(member, should_stop):
        events.append(("train", member.member_id))
        member.buffer[0] += gains[member.member_id][trained[member.member_id]]
        trained[member.member_id] += 1
        member.buffer[1] = 10 * trained[member.member_id] + member.member_id  # who trained these weights, when

    kept = {}

    def best(generation, population):
        events.append(("best", generation))
        return new_best(population, kept["result"].score if kept else None)

    def keep_best(generation, result, member):
        events.append(("keep_best", result.member))
        kept.update(generation=generation, result=result, weights=member.buffer.copy())

    hooks = replace(hooks, train=train, best=best, keep_best=keep_best)
    outcome = run_generations(RecordingComm(events), members, lambda m: 0, hooks, LoopSettings(0, 3))
    assert kept["generation"] == 1 and kept["result"].member == 0 and kept["result"].score == 5.0
    assert list(kept["weights"]) == [5.0, 10.0, 0.0]  # member 0 trained them in generation 1
    assert list(members[0].buffer) != list(kept["weights"])  # it copied member 1 in generation 2
    assert [r.score for r in outcome.last.population] == [5.0, 5.0]  # a tie does not beat the kept best
    first = events[: events.index(("records", 1))]
    assert first[first.index(("gather",)) :][:5] == [
        ("gather",),
        ("best", 1),
        ("keep_best", 0),
        ("plan", (0, 1)),
        ("exploit_state", 0),
    ]
    assert [e for e in events if e[0] == "keep_best"] == [("keep_best", 0)]
    assert [e[1] for e in events if e[0] == "best"] == [1, 2, 3]


def test_a_restarted_member_that_scores_best_is_kept_once_scored():
    """Member 2 fails in generation 1 and is restarted; trained again it scores best of all: it is
    kept when its redone result is gathered (the first results' best came before)."""
    events = []
    members, hooks = failing_run(events, {(2, 1): 1})
    kept = []

    def best(generation, population):
        return new_best(population, kept[-1][1].score if kept else None)

    hooks = replace(hooks, best=best, keep_best=lambda g, result, member: kept.append((g, result)))
    run_generations(MPI.COMM_SELF, members, lambda m: 0, hooks, LoopSettings(0, 1, max_member_failures=3))
    assert [(g, result.member) for g, result in kept] == [(1, 1), (1, 2)]

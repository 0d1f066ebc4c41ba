"""The final pick (``--final-eval EPISODES --final-top K``, evo/runner/final.py) in whole runs in one process
(tests/support.py:run_in_process), synchronous and asynchronous: a population whose selection best is not
its fresh best (the fresh returns made up) has its fresh best exported as ``best``; the fresh episodes are
evo-evaluate's, their env steps counted; a stop during the final pick ends the run with status 75 and the
resume plays only the candidates without a result. Its decisions alone: tests/unit/core/test_final.py; its
refusals: tests/unit/config/test_final_config.py. The ranks share the candidates only through rank 0's
gather and broadcast, whose every-size behaviour evo.mpi.exchange's own tests prove."""

import json
import os
import signal

import pytest

import evo.runner.final as final
from evo.runner.stopping import EXIT_STOPPED, STOP_SIGNALS
from evo.tools import export
from evo.tools.evaluate import evaluate_members
from evo.tools.saved import choose, evaluation_seed, open_run, population
from tests.in_process import logged
from tests.support import TINY_DEFAULT, budget, read_population, write_hyperparams

MODES = pytest.mark.parametrize("mode", [[], ["--asynchronous"]], ids=["synchronous", "asynchronous"])
EPISODES = 3


def arguments(tmp_path, run_dir, mode) -> list[str]:
    tiny = write_hyperparams(tmp_path, TINY_DEFAULT)
    argv = [*budget(4, 2, 128), "--hyperparams", str(tiny), "--seed", "5", "--tb-writer", "False", *mode]
    argv += ["--exploit-test", "welch"]  # the final pick with the test on (tests/unit/runner/test_welch_runs.py)
    return [*argv, "--final-eval", str(EPISODES), "--final-top", "3", "--run-dir", str(run_dir)]


def played(monkeypatch, each=None) -> list[int]:
    """The members the final pick plays, in order, through the real play (``each(member, index)``, if given,
    is called first); returns the list it fills."""
    members, real = [], final.play

    def play(member, *args, **kwargs):
        members.append(member.member_id)
        if each is not None:
            each(member, len(members) - 1, kwargs)
        return real(member, *args, **kwargs)

    monkeypatch.setattr(final, "play", play)
    return members


@MODES
def test_the_fresh_best_not_the_selection_best_is_the_member_exported(tmp_path, monkeypatch, capsys, mode):
    """Made-up fresh returns, the reverse of the selection order (each candidate returns minus its selection
    score): the candidate with the lowest selection score is the final pick, final.json and the log say
    each one's scores and bias, and evo-export's default member is it."""

    def reversed_returns(member, env, episodes, *args, **kwargs):
        return [-member.scores[-1]] * episodes, {}

    monkeypatch.setattr(final, "play", reversed_returns)
    run_dir = tmp_path / "run"
    status, log = logged(arguments(tmp_path, run_dir, mode))
    assert status == 0, log[-3000:]
    record = json.loads((run_dir / "final.json").read_text())
    members = record["members"]
    scores = [entry["selection_score"] for entry in members]
    assert len(members) == 3 and scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    assert record["selection_pick"] == members[0]["member"]
    assert record["pick"]["member"] == members[-1]["member"]  # the lowest selection score, the best fresh mean
    for entry in members:
        assert entry["fresh_mean"] == -entry["selection_score"]
        assert entry["selection_bias"] == pytest.approx(2 * entry["selection_score"])
        assert f"  member {entry['member']}: selection {entry['selection_score']:.2f}" in log
    rows = {int(row["member"]): row for row in read_population(run_dir) if row["generation"] == "2"}
    for entry in members:  # the selection score is the last row's, and its file the last checkpoint's
        assert entry["selection_score"] == float(rows[entry["member"]]["score"])
    assert f"final pick: member {record['pick']['member']} " in log

    run = open_run(run_dir)
    assert choose(run).member == record["pick"]["member"]
    assert choose(run).label == f"best ({record['pick']['member']}: the final pick)"
    assert export.main([str(run_dir), "--out", str(tmp_path / "logs")]) == 0
    assert f"member best ({record['pick']['member']}: the final pick)" in capsys.readouterr().out


def stop_at_first_step(member, index, kwargs):
    """The second member the final pick plays: a real SIGUSR1 at its first env step."""
    if index != 1:
        return
    on_step = kwargs["on_step"]

    def first_step():
        os.kill(os.getpid(), signal.SIGUSR1)
        on_step()

    kwargs["on_step"] = first_step


@MODES
def test_a_stop_during_the_final_pick_and_the_resume_plays_only_the_rest(tmp_path, monkeypatch, mode):
    """SIGUSR1 at the first env step of the second candidate: its episodes end there, the third is never
    begun, the run exits 75 with its training complete and the first candidate's result on disk. The resume
    trains nothing and plays the second and third only; final.json's fresh returns are evo-evaluate's for each
    (the same fresh episodes), their env steps counted (CartPole: one per point of return)."""
    run_dir = tmp_path / "run"
    first = played(monkeypatch, stop_at_first_step)
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        status, log = logged(arguments(tmp_path, run_dir, mode))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert status == EXIT_STOPPED, log[-3000:]
    assert "during the final pick: training is complete; 1 of 3 members played" in log
    assert len(first) == 2 and not (run_dir / "final.json").exists()
    assert sorted(path.name for path in (run_dir / "final").iterdir()) == [f"member_{first[0]}.json"]
    rows = read_population(run_dir)
    assert len(rows) == 8

    resumed = played(monkeypatch)
    status, log = logged(["--run-dir", str(run_dir), "--resume"])
    assert status == 0, log[-3000:]
    assert read_population(run_dir) == rows  # nothing trained again
    record = json.loads((run_dir / "final.json").read_text())
    chosen = [entry["member"] for entry in record["members"]]
    assert chosen[0] == first[0] and resumed == chosen[1:] and first[1] == chosen[1]

    run = open_run(run_dir)
    files = {member_file.member: member_file for member_file in population(run)}
    fresh = evaluate_members(run, [files[m] for m in chosen], EPISODES, evaluation_seed(5))
    for entry, evaluation in zip(record["members"], fresh, strict=True):
        returns = json.loads((run_dir / "final" / f"member_{entry['member']}.json").read_text())["returns"]
        assert returns == evaluation.returns
        assert entry["env_steps_played"] == sum(returns)
    assert record["env_steps"] == sum(entry["env_steps_played"] for entry in record["members"])
    assert f"{record['env_steps']} env steps played" in log

"""The final pick across ranks (evo.runner.final.final_pick): rank 0's candidates spread over every rank,
each played once by rank j mod the ranks and gathered on rank 0; a stop on one rank ends the final pick on
every rank. What each rank does with a candidate (load, play, write) is stubbed: whole runs on one rank,
tests/unit/runner/test_final_runs.py."""

from types import SimpleNamespace

import evo.runner.final as final
from evo.core.final import Candidate, FinalSettings
from evo.mpi.exchange import StopNotifier

SETTINGS = FinalSettings(3, 8, 11, None, True, "return", 2)


def session_on(comm, tmp_path, requested):
    return SimpleNamespace(
        comm=comm,
        rank=comm.Get_rank(),
        final=SETTINGS,
        stopper=StopNotifier(comm, lambda: requested[0]),
        target=SimpleNamespace(run_dir=tmp_path),
    )


def stubbed(monkeypatch, comm, count, play):
    chosen = tuple(Candidate(member, 2, 256, float(100 - member)) for member in range(count))
    done = {0: {"member": 0, "env_steps_played": 0, "rank": None}}  # already played before a stop
    plan = final.Plan(chosen, {c.member: f"member_{c.member}.pt" for c in chosen}, done, ())
    monkeypatch.setattr(final, "plan", lambda session, settings: plan)
    monkeypatch.setattr(final, "play_candidate", play)
    reported = []
    monkeypatch.setattr(final, "report", lambda session, settings, decided, results: reported.append(results) or "")
    return reported


def test_every_candidate_is_played_once_by_its_rank_and_gathered_on_rank_0(comm, tmp_path, monkeypatch):
    size, rank = comm.Get_size(), comm.Get_rank()
    count = 2 * size + 2  # candidate 0 already played: the rest spread unevenly over the ranks

    def play(session, settings, candidate, path):
        assert path == f"member_{candidate.member}.pt"
        return {"member": candidate.member, "env_steps_played": 1, "rank": rank}

    reported = stubbed(monkeypatch, comm, count, play)
    outcome = final.final_pick(session_on(comm, tmp_path, [False]))
    assert not outcome.stopped
    if rank == 0:
        (results,) = reported
        assert sorted(results) == list(range(count))
        assert results[0]["rank"] is None  # not played again
        assert {member: r["rank"] for member, r in results.items() if member} == {
            member: (member - 1) % size for member in range(1, count)
        }
    else:
        assert not reported


def test_a_stop_on_one_rank_ends_the_final_pick_on_every_rank(comm, tmp_path, monkeypatch):
    size, rank = comm.Get_size(), comm.Get_rank()
    requested = [False]
    played = []

    def play(session, settings, candidate, path):
        if rank == size - 1:  # its first candidate's episodes are ended by the stop
            requested[0] = True
            return None
        played.append(candidate.member)
        return {"member": candidate.member, "env_steps_played": 1, "rank": rank}

    reported = stubbed(monkeypatch, comm, 3 * size + 1, play)
    outcome = final.final_pick(session_on(comm, tmp_path, requested))
    assert outcome.stopped and not reported
    if rank == size - 1:
        assert not played
    if rank == 0:
        assert "during the final pick" in outcome.line and "--resume plays the rest" in outcome.line

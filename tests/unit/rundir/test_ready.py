"""An asynchronous run's checkpoints (evo.rundir.ready) and records: each member's newest complete
checkpoint, and on --resume a population.csv and lineage with every (member, interval) those
checkpoints cover exactly once, whatever a kill left between a checkpoint and its row."""

import csv
import json

import pytest

from evo.core.asynchronous import Latest, ReadyExploit
from evo.core.kinds import LogFloat
from evo.core.plan import Exploit
from evo.core.result import MemberResult
from evo.rundir.checkpoint import dump_payload
from evo.rundir.ready import latest_ready, member_dir, write_ready_checkpoint
from evo.rundir.records import Continuation, RunRecords, ready_record, result_of_row

SPACE = {"lr": LogFloat(1e-3, 1.0)}
RUN_ID = "run-1"


def point(member: int, interval: int, wall: float) -> Latest:
    result = MemberResult(member, 0, 100 * interval, float(10 * member + interval), 1.5, float("nan"), {"lr": 0.01})
    return Latest(interval, result, wall)


def copy_of(recipient: Latest, donor: int, donor_interval: int) -> ReadyExploit:
    exploit = Exploit(recipient.interval, recipient.result.member, donor, 1.0, 2.0, {"lr": 0.01}, {"lr": 0.02}, ())
    return ReadyExploit(exploit, donor_interval, 100 * donor_interval)


def checkpoint(run_dir, ready: Latest, exploit=None, keep=2) -> dict:
    record = ready_record(ready, exploit, (), SPACE, ["lr"])
    data = dump_payload({"format": 2, "run_id": RUN_ID, "generation": ready.interval})
    write_ready_checkpoint(run_dir, RUN_ID, ready.result.member, ready.interval, data, record, keep)
    return record


def rows(run_dir):
    with (run_dir / "population.csv").open(newline="") as handle:
        return [(int(r["generation"]), int(r["member"])) for r in csv.DictReader(handle)]


def test_a_resume_keeps_exactly_the_ready_points_the_checkpoints_hold(tmp_path):
    run_dir = tmp_path / "run"
    records = RunRecords(run_dir, ["lr"], SPACE, tb_writer=False, new_run=({}, ""), asynchronous=True)
    written = []
    for ready, exploit in [
        (point(0, 1, 1.0), None),
        (point(1, 1, 1.5), None),
        (point(0, 2, 2.0), None),
        (point(1, 2, 2.5), "copy"),  # checkpointed, then the run was killed before rank 0 wrote its row
        (point(0, 3, 3.0), None),  # its row written, then its checkpoint damaged
    ]:
        exploit = copy_of(ready, 0, 2) if exploit else None
        record = checkpoint(run_dir, ready, exploit)
        written.append(record)
        if ready.interval == 2 and ready.result.member == 1:
            continue
        records.write_ready(record, [ready.result.score])
    assert rows(run_dir) == [(1, 0), (1, 1), (2, 0), (3, 0)]
    damaged = member_dir(run_dir, 0) / "interval_000003.pt"
    damaged.write_bytes(damaged.read_bytes()[:-5])
    assert not (member_dir(run_dir, 0) / "interval_000001.pt").exists()  # pruned to the 2 newest ...
    assert (member_dir(run_dir, 0) / "interval_000001.json").exists()  # ... the records stay

    found, skipped = latest_ready(run_dir, RUN_ID, 3)
    assert found.intervals == {0: 2, 1: 2}  # member 2 reached no ready point: it starts afresh
    assert len(skipped) == 1 and "interval_000003.pt" in skipped[0]
    assert json.dumps(found.last_record(1)) == json.dumps(written[3]) and found.last_record(2) is None
    resumed = RunRecords(
        run_dir,
        ["lr"],
        SPACE,
        tb_writer=False,
        continued=Continuation(2, ready_records=found.records),
        asynchronous=True,
    )
    assert rows(run_dir) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    assert lineage == resumed.lineage == written[3]["lineage"]
    assert (lineage[0]["recipient"], lineage[0]["donor"], lineage[0]["donor_interval"]) == (1, 0, 2)
    with (run_dir / "population.csv").open(newline="") as handle:
        copied = [r for r in csv.DictReader(handle) if r["donor"]]
    assert [(r["member"], r["donor"], r["donor_interval"], r["wall_s"]) for r in copied] == [("1", "0", "2", "2.500")]
    assert repr(result_of_row(written[3]["row"], SPACE)) == repr(point(1, 2, 2.5).result)


def test_a_checkpoint_of_another_run_is_passed_over(tmp_path):
    run_dir = tmp_path / "run"
    checkpoint(run_dir, point(0, 1, 1.0))
    found, skipped = latest_ready(run_dir, "another-run", 1)
    assert found.intervals == {} and "belongs to run 'run-1'" in skipped[0]


def test_the_kept_best_of_an_asynchronous_run_is_named_by_best_json_and_verified(tmp_path):
    """Two ranks may each write a new best at once: each under its own name; best.json names the one
    rank 0 settled, removing the file it replaced; a resume removes the files it does not name."""
    from evo.rundir import ready
    from evo.rundir.checkpoint import MEMBER_FORMAT, CheckpointError, dump_payload

    assert ready.read_best(tmp_path) is None and ready.best_path(tmp_path) is None

    def best_file(member, interval, score):
        data = dump_payload({"format": MEMBER_FORMAT, "run_id": "run-a", "member": member, "best": {"score": score}})
        entry = ready.write_best_file(tmp_path, member, interval, data)
        return {**entry, "member": member, "generation": interval, "score": score, "env_steps": 256 * interval}

    first, second = best_file(0, 1, 10.0), best_file(2, 1, 12.0)
    ready.write_best_record(tmp_path, first, None)
    ready.write_best_record(tmp_path, second, first)
    assert ready.read_best(tmp_path, "run-a") == second
    assert ready.best_path(tmp_path) == ready.best_dir(tmp_path) / "member_2_interval_000001.pt"
    assert sorted(p.name for p in ready.best_dir(tmp_path).iterdir()) == ["best.json", "member_2_interval_000001.pt"]
    stray = best_file(1, 2, 13.0)  # written by its worker, then a crash before best.json named it
    ready.remove_stray_best_files(tmp_path, ready.read_best(tmp_path))
    assert not (ready.best_dir(tmp_path) / stray["file"]).exists() and ready.best_path(tmp_path).exists()
    with pytest.raises(CheckpointError, match="belongs to another run"):
        ready.read_best(tmp_path, "run-b")
    ready.best_path(tmp_path).write_bytes(b"damaged")
    with pytest.raises(CheckpointError, match=r"7 bytes, best.json says \d+ \(truncated or damaged\)"):
        ready.read_best(tmp_path)


def test_a_lost_kept_best_leaves_every_member_checkpoint_and_says_which_file_and_why(tmp_path, caplog):
    """A damaged or missing best file, or an unreadable best.json: the members resume from their own
    checkpoints, the run keeps no best, and the warning names the file and why (not a skipped checkpoint)."""
    import logging

    from evo.rundir import ready
    from evo.rundir.checkpoint import MEMBER_FORMAT, CheckpointError, dump_payload

    run_dir = tmp_path / "run"
    checkpoint(run_dir, point(0, 1, 1.0))
    data = dump_payload({"format": MEMBER_FORMAT, "run_id": RUN_ID, "member": 0, "best": {"score": 11.0}})
    entry = {**ready.write_best_file(run_dir, 0, 1, data), "member": 0, "generation": 1, "score": 11.0, "env_steps": 9}
    ready.write_best_record(run_dir, entry, None)
    assert latest_ready(run_dir, RUN_ID, 1)[0].best == entry
    best_file = ready.best_dir(run_dir) / entry["file"]

    for damage, why in [
        (lambda: best_file.write_bytes(data[:-1] + bytes([data[-1] ^ 1])), "SHA-256 does not match best.json"),
        (lambda: best_file.write_bytes(data[:-3]), f"{len(data) - 3} bytes, best.json says {len(data)}"),
        (best_file.unlink, "missing"),
    ]:
        damage()
        with pytest.raises(CheckpointError, match=why):
            ready.read_best(run_dir, RUN_ID)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="evo.rundir.ready"):
            found, skipped = latest_ready(run_dir, RUN_ID, 1)
        assert found.intervals == {0: 1} and skipped == []
        assert found.best is None and found.best_lost.startswith(f"{best_file}: {why}")
        assert f"{best_file}: {why}" in caplog.text and "keeps no best" in caplog.text
    record = ready.best_dir(run_dir) / "best.json"
    for text in ("{half", '{"file": "x.pt"}\n', "7\n"):
        record.write_text(text)
        with pytest.raises(CheckpointError, match=f"{record}: "):
            ready.read_best(run_dir)
        found, skipped = latest_ready(run_dir, RUN_ID, 1)
        assert found.intervals == {0: 1} and found.best is None and str(record) in found.best_lost


@pytest.mark.parametrize(
    "key, value, why",
    [
        ("file", "/etc/passwd", "file is '/etc/passwd', not the name of a file beside it"),
        ("file", "../../config.yaml", "file is '../../config.yaml', not the name of a file beside it"),
        ("file", ["x.pt"], "file is ['x.pt'], not the name of a file beside it"),
        ("member", "x", "member is 'x', not a member id"),
        ("generation", None, "generation is None, not a generation (an interval)"),
        ("score", "high", "score is 'high', not a number"),
        ("bytes", "12", "bytes is '12', not a whole number"),
        ("env_steps", True, "env_steps is True, not a whole number"),
        ("member", "x" * 1000, "member is '" + "x" * 56 + "..., not a member id"),  # the token, cut
    ],
)
def test_a_path_or_garbage_in_best_json_is_a_lost_best_naming_the_value(tmp_path, key, value, why):
    """Issue 54 N11: a path in best.json (or a value of the wrong kind) ended the tools in a traceback
    (ValueError: Invalid name, int('x')); it is now a lost kept best, naming the record, the key and its
    value: the tools refuse --member best-ever with that (exit 2), a resume keeps no best. A path is never
    followed."""
    from evo.rundir import ready
    from evo.rundir.checkpoint import MEMBER_FORMAT, CheckpointError, dump_payload

    run_dir = tmp_path / "run"
    checkpoint(run_dir, point(0, 1, 1.0))
    data = dump_payload({"format": MEMBER_FORMAT, "run_id": RUN_ID, "member": 0, "best": {"score": 11.0}})
    entry = {**ready.write_best_file(run_dir, 0, 1, data), "member": 0, "generation": 1, "score": 11.0, "env_steps": 9}
    ready.write_best_record(run_dir, {**entry, key: value}, None)
    record = ready.best_dir(run_dir) / "best.json"
    with pytest.raises(CheckpointError) as caught:
        ready.read_best(run_dir, RUN_ID)
    assert str(caught.value) == f"{record}: unreadable ({why}; damaged or edited)"
    found, skipped = latest_ready(run_dir, RUN_ID, 1)
    assert found.intervals == {0: 1} and skipped == [] and found.best is None and found.best_lost == str(caught.value)


def test_a_path_in_a_member_checkpoints_record_passes_the_checkpoint_over(tmp_path):
    """interval_*.json names its member file: a path there (or a record that is not a mapping) is a damaged
    checkpoint, passed over with the reason, not a traceback at --resume."""
    run_dir = tmp_path / "run"
    checkpoint(run_dir, point(0, 1, 1.0))
    checkpoint(run_dir, point(0, 2, 2.0))
    newest = member_dir(run_dir, 0) / "interval_000002.json"
    for text, why in [
        (json.dumps({**json.loads(newest.read_text()), "file": "/etc/passwd"}), "file is '/etc/passwd'"),
        ("[1, 2]", "a list, not a record"),
    ]:
        newest.write_text(text)
        found, skipped = latest_ready(run_dir, RUN_ID, 1)
        assert found.intervals == {0: 1} and len(skipped) == 1 and f"{newest}: unreadable ({why}" in skipped[0]

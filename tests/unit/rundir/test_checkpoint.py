"""Checkpoints without MPI: a member survives a save/load bit-exactly; damaged checkpoints
are refused by name and the previous one is used; the launcher's start-up checks."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.launch import launch_problems
from evo.rundir import checkpoint as ckpt
from evo.rundir.checkpoint import member_payload
from evo.sb3.flat import state_tensors
from evo.sb3.rng import rng_state, set_rng_state
from tests.support import member_of, write_hyperparams


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    hp = write_hyperparams(tmp_path_factory.mktemp("hp"))
    return parse_config(["--hyperparams", str(hp)], check_run_dir=False)


def test_member_round_trips_bit_exactly(config, tmp_path):
    member = member_of(config, 3, dict(config.agent.defaults, learning_rate=7e-4, gamma=0.97))
    member.train(512)
    member.scores += [12.5, float("nan")]
    path = tmp_path / "member_3.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(member_payload(member, "run-a", 5, rng_state())))

    payload = ckpt.load_payload(path)  # weights_only=True
    assert (payload["format"], payload["algo"], payload["run_id"], payload["generation"]) == (2, "ppo", "run-a", 5)
    assert payload["format"] == ckpt.MEMBER_FORMAT
    assert "replay" not in payload  # PPO has no replay buffer
    fresh = member_of(config, 3, config.agent.defaults)
    assert fresh.restore(payload) is None  # nothing to note: its envs continue the checkpoint's
    for saved, restored in zip(state_tensors(member.model), state_tensors(fresh.model), strict=True):
        assert torch.equal(saved, restored)
    assert fresh.hparams == member.hparams
    assert fresh.effective_hparams() == member.effective_hparams()
    assert fresh.model.policy.optimizer.param_groups[0]["lr"] == 7e-4
    assert fresh.env_steps == member.env_steps == 512
    assert fresh.model._n_updates == member.model._n_updates > 0
    assert [e["r"] for e in fresh.model.ep_info_buffer] == [e["r"] for e in member.model.ep_info_buffer]
    assert fresh.training_score() == member.training_score()
    assert fresh.scores[0] == 12.5 and np.isnan(fresh.scores[1])
    fresh.train(128)  # and it trains on from there
    assert fresh.env_steps == 640


def test_rng_state_round_trips():
    state = rng_state()
    first = (torch.rand(3), np.random.rand(3))
    set_rng_state(state)
    second = (torch.rand(3), np.random.rand(3))
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def fake_checkpoint(run_dir, generation, run_id="run-a", members=2, member_format=ckpt.MEMBER_FORMAT):
    directory = ckpt.generation_dir(run_dir, generation)
    directory.mkdir(parents=True)
    entries = {}
    for member in range(members):
        payload = {"format": member_format, "member": member, "state": torch.arange(1000.0) + generation}
        data = ckpt.dump_payload(payload)
        ckpt.atomic_write(directory / ckpt.member_filename(member), data)
        entries[str(member)] = {"file": ckpt.member_filename(member), "bytes": len(data), "sha256": ckpt.sha256(data)}
    ckpt.write_manifest(directory, {"format": 1, "run_id": run_id, "generation": generation, "members": entries})
    return directory


def test_member_files_of_format_1_still_load_and_other_formats_are_refused(tmp_path):
    """Member files written before the learners (format 1: a PPO member under the same keys) still
    load; a file of a format this version does not know is refused by name."""
    old = fake_checkpoint(tmp_path, 1, member_format=1)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1 and skipped == []
    assert ckpt.load_payload(old / "member_0.pt")["format"] == 1
    future = fake_checkpoint(tmp_path, 2, member_format=3)
    with pytest.raises(ckpt.CheckpointError, match="not an evo member checkpoint of format 1 or 2"):
        ckpt.load_payload(future / "member_0.pt")
    assert ckpt.latest(tmp_path, "run-a")[0].generation == 1


def test_truncated_file_is_named_and_the_previous_checkpoint_used(tmp_path):
    fake_checkpoint(tmp_path, 1)
    newest = fake_checkpoint(tmp_path, 2)
    damaged = newest / "member_1.pt"
    os.truncate(damaged, damaged.stat().st_size // 2)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1
    assert str(damaged) in skipped[0] and "truncated" in skipped[0]


def test_incomplete_and_foreign_checkpoints_are_skipped(tmp_path):
    fake_checkpoint(tmp_path, 1)
    fake_checkpoint(tmp_path, 2, run_id="another-run")
    partial = ckpt.generation_dir(tmp_path, 3)
    partial.mkdir()
    (partial / "member_0.pt").write_bytes(b"half a file")
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1
    assert "incomplete (no manifest.json" in skipped[0]
    assert "belongs to run 'another-run'" in skipped[1]


def test_corrupted_bytes_with_the_right_size_are_caught(tmp_path):
    directory = fake_checkpoint(tmp_path, 1)
    path = directory / "member_0.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match="SHA-256 does not match"):
        ckpt.verify(directory)


def test_a_file_that_is_not_a_checkpoint_is_refused_without_running_it(tmp_path):
    import pickle

    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(os.getcwd))  # a callable: weights_only refuses it
    with pytest.raises(ckpt.CheckpointError, match="cannot be loaded"):
        ckpt.load_payload(path)


def test_prune_keeps_the_newest_complete(tmp_path):
    for generation in range(5):
        fake_checkpoint(tmp_path, generation)
    ckpt.prune(tmp_path, keep=2, newest=4)
    assert [p.name for p in ckpt.candidates(tmp_path)] == ["gen_000004", "gen_000003"]


def test_atomic_write_leaves_old_content_or_new(tmp_path):
    path = tmp_path / "f"
    ckpt.atomic_write(path, b"old")
    ckpt.atomic_write(path, b"new")
    assert path.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_launch_checks_root_and_cores():
    ok_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert launch_problems(2, False, ok_env, 0, 2, True) == []
    (root,) = launch_problems(2, False, {}, 0, 2, True)
    assert "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in root
    assert launch_problems(2, False, {}, 1000, 2, True) == []  # not root
    (cores,) = launch_problems(4, False, ok_env, 0, 2, True)
    assert "add --oversubscribe" in cores and "--num-agents 4" in cores
    assert launch_problems(4, True, ok_env, 0, 2, True) == []
    assert launch_problems(4, False, {**ok_env, "SLURM_JOB_ID": "7"}, 0, 2, True) == []


def test_a_restored_member_continues_its_episodes_in_progress_bit_exactly(tmp_path):
    """The training envs travel in the checkpoint as plain data (loaded with weights_only=True):
    a resumed member continues the episodes in progress instead of restarting every env at
    once, and trains on exactly as the uninterrupted member does."""
    hp = tmp_path / "long.yml"
    hp.write_text("CartPole-v1:\n  n_envs: 8\n  n_steps: 32\n  n_minibatches: 4\n  n_epochs: 2\n")
    config = parse_config(["--hyperparams", str(hp)], check_run_dir=False)
    member = member_of(config, 0, config.agent.defaults)
    member.train(300)
    path = tmp_path / "member_0.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(member_payload(member, "run-a", 1, rng_state())))
    payload = ckpt.load_payload(path)  # weights_only=True
    assert payload["envs"] is not None

    resumed = member_of(config, 0, config.agent.defaults, env_seed=12345)  # fresh envs, as on --resume
    assert resumed.restore(payload) is None
    in_progress = [env.unwrapped.state for env in member.model.env.envs]
    assert all(np.array_equal(a, b.unwrapped.state) for a, b in zip(in_progress, resumed.model.env.envs, strict=True))
    rng = rng_state()
    set_rng_state(rng)
    member.train(1024)
    set_rng_state(rng)
    resumed.train(1024)
    assert [e["r"] for e in resumed.model.ep_info_buffer] == [e["r"] for e in member.model.ep_info_buffer]
    for a, b in zip(state_tensors(member.model), state_tensors(resumed.model), strict=True):
        assert torch.equal(a, b)


def test_envs_that_are_not_plain_data_are_left_out_of_the_checkpoint():
    from evo.sb3 import envstate

    config = parse_config(["--env-id", "bigfish", "--num-envs", "2"], check_run_dir=False)
    member = member_of(config, 0, config.agent.defaults)
    assert envstate.capture(member.model) is None  # Procgen's games live in C++: fresh episodes on resume
    member.close()
    with pytest.raises(envstate.Unsupported):
        envstate.to_plain(object())


def with_best(directory, member=1, generation=1, score=7.5):
    """``directory``'s checkpoint given a kept best (a member file with its ``best`` key) in its manifest."""
    record = {"member": member, "generation": generation, "score": score, "env_steps": 256}
    data = ckpt.dump_payload({"format": ckpt.MEMBER_FORMAT, "member": member, "state": torch.ones(10), "best": record})
    manifest = json.loads((directory / ckpt.MANIFEST).read_text())
    manifest["best"] = {**ckpt.write_best(directory, data), **record}
    ckpt.write_manifest(directory, manifest)
    return record


def test_a_checkpoints_best_is_listed_verified_and_absent_from_older_checkpoints(tmp_path):
    old = ckpt.verify(fake_checkpoint(tmp_path, 1))
    assert old.best is None and old.best_path() is None  # a checkpoint from before the best was kept
    directory = fake_checkpoint(tmp_path, 2)
    record = with_best(directory)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 2 and skipped == [] and found.best_lost is None
    assert found.best_path() == directory / "best.pt"
    assert {key: found.best[key] for key in ckpt.BEST_KEYS} == record
    assert ckpt.load_payload(found.best_path())["best"] == record


def flip_a_byte(path):
    """Damage ``path`` in place (the same inode: every hard link to it sees the damage), its size kept."""
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


def test_a_damaged_or_missing_kept_best_is_no_kept_best_and_the_checkpoint_stays(tmp_path, caplog):
    """The kept best is one file that later checkpoints share (a hard link): damaged, it would void every
    checkpoint if it counted as one of the checkpoint's files. It does not: the checkpoint is complete
    (its members are), it keeps no best, and why is said, naming the file."""
    fake_checkpoint(tmp_path, 1)
    with_best(ckpt.generation_dir(tmp_path, 1))
    second = fake_checkpoint(tmp_path, 2)
    ckpt.carry_best(ckpt.generation_dir(tmp_path, 1) / "best.pt", second)
    manifest = json.loads((second / ckpt.MANIFEST).read_text())
    manifest["best"] = json.loads((ckpt.generation_dir(tmp_path, 1) / ckpt.MANIFEST).read_text())["best"]
    ckpt.write_manifest(second, manifest)
    assert ckpt.latest(tmp_path, "run-a")[0].best is not None

    flip_a_byte(second / "best.pt")  # both checkpoints' best.pt: one file
    for generation in (1, 2):
        checkpoint = ckpt.verify(ckpt.generation_dir(tmp_path, generation), "run-a")
        assert checkpoint.best is None and checkpoint.best_path() is None
        assert checkpoint.best_lost.startswith(f"{checkpoint.directory / 'best.pt'}: SHA-256 does not match")
    with caplog.at_level(logging.WARNING, logger="evo.rundir.checkpoint"):
        found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 2 and skipped == [] and found.best is None
    assert f"{second / 'best.pt'}: SHA-256 does not match the manifest" in caplog.text
    assert "without its kept best" in caplog.text

    (second / "best.pt").unlink()
    found, _ = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 2 and found.best_lost.startswith(f"{second / 'best.pt'}: missing")


def test_a_kept_best_that_does_not_load_is_no_kept_best(tmp_path):
    directory = fake_checkpoint(tmp_path, 1)
    data = b"not a torch file"
    manifest = json.loads((directory / ckpt.MANIFEST).read_text())
    manifest["best"] = {**ckpt.write_best(directory, data), "member": 0, "generation": 1, "score": 1.0, "env_steps": 8}
    ckpt.write_manifest(directory, manifest)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1 and skipped == [] and found.best is None
    assert found.best_lost.startswith(f"{directory / 'best.pt'}: cannot be loaded")


def test_a_carried_best_is_the_same_file_and_outlives_the_pruned_checkpoint(tmp_path):
    first = fake_checkpoint(tmp_path, 1)
    with_best(first)
    second = ckpt.generation_dir(tmp_path, 2)
    second.mkdir()
    ckpt.carry_best(first / "best.pt", second)
    assert (second / "best.pt").read_bytes() == (first / "best.pt").read_bytes()
    assert (second / "best.pt").stat().st_ino == (first / "best.pt").stat().st_ino  # a hard link: no copy
    shutil.rmtree(first)
    assert ckpt.load_payload(second / "best.pt")["best"]["member"] == 1


def test_a_failed_write_leaves_no_temporary_behind(tmp_path, monkeypatch):
    """A full disk (the write or the fsync fails): the old content stays and the temporary is removed."""
    path = tmp_path / "f"
    ckpt.atomic_write(path, b"old")

    def full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        ckpt.atomic_write(path, b"new")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f"]


KILLED_MID_WRITE = """
import os, sys
from pathlib import Path
from evo.rundir import checkpoint
os.replace = lambda *args: os._exit(9)  # killed between the write and the rename
checkpoint.atomic_write(Path(sys.argv[1]), b"half")
"""


def test_stray_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    """A kill mid-write leaves ``.<name>.tmp-<host>-<pid>-<token>``; at the next start it is removed, wherever
    it is in the run directory, unless its process still runs on this host (a job writing now) or it was
    written on another host (whose processes this host cannot see); so are the names of an evo before the
    token. Nothing else is touched."""
    import socket
    import subprocess
    import sys

    from tests.support import ROOT

    directory = ckpt.generation_dir(tmp_path, 3)
    directory.mkdir(parents=True)
    for target in (tmp_path / "population.csv", directory / "member_0.pt"):
        killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(target)], cwd=ROOT, timeout=120)
        assert killed.returncode == 9
    dead = list(tmp_path.rglob(".*.tmp-*"))
    assert sorted(p.name.split(".tmp-")[0] for p in dead) == [".member_0.pt", ".population.csv"]
    dead_pid = dead[0].name.rsplit("-", 2)[1]
    host = socket.gethostname()
    kept = [
        directory / f".best.pt.tmp-{host}-{os.getpid()}-0123456789abcdef",  # this process: alive
        directory / f".best.pt.tmp-{host}-{os.getpid()}",  # this process, as an evo before the token named it
        directory / f".member_1.pt.tmp-another-host-{dead_pid}-0123456789abcdef",  # another host's: unknowable
        directory / f".member_1.pt.tmp-another-host-{dead_pid}",
        directory / "member_1.pt.tmp-123",  # not a name atomic_write makes
        tmp_path / ".notes.tmp-abc",
    ]
    legacy = [
        tmp_path / f".lineage.jsonl.tmp-{dead_pid}",  # an evo before the host was in the name
        tmp_path / f".front.json.tmp-{host}-{dead_pid}",  # and before the token
    ]
    for path in [*kept, *legacy]:
        path.write_bytes(b"x")

    removed = ckpt.remove_stray_temporaries(tmp_path)
    assert sorted(removed) == sorted([*dead, *legacy])
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == sorted(kept)
    assert ckpt.remove_stray_temporaries(tmp_path) == []
    assert ckpt.remove_stray_temporaries(tmp_path / "absent") == []


def plant_links(folder, name, victim):
    """Symbolic links to ``victim`` at every name a writer of ``folder / name`` could have been known to
    use: its temporary as evo named it before (``.<name>.tmp-<host>-<pid>``, the PID published in
    lock.json) and before that (``.<name>.tmp-<pid>``), and the name itself."""
    host = ckpt._host()
    for planted in (f".{name}.tmp-{host}-{os.getpid()}", f".{name}.tmp-{os.getpid()}", name):
        (folder / planted).symlink_to(victim)


def test_a_link_planted_where_a_write_goes_is_never_written_through(tmp_path, monkeypatch):
    """Whoever may write the run directory plants symbolic links to a file of their choosing where a
    manifest, a kept best and a record are written: the writes land in the run directory, the file
    pointed to is untouched; a link at the temporary's exact name (were it known) fails the write."""
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_bytes(b"precious")
    first = fake_checkpoint(tmp_path, 1)
    with_best(first)
    second = ckpt.generation_dir(tmp_path, 2)
    second.mkdir()
    plant_links(second, ckpt.MANIFEST, victim)
    plant_links(second, ckpt.BEST, victim)

    ckpt.write_manifest(second, {"format": 1, "run_id": "run-a", "generation": 2, "members": {}})
    ckpt.carry_best(first / ckpt.BEST, second)
    monkeypatch.setattr(os, "link", lambda *args: (_ for _ in ()).throw(OSError(1, "no hard links here")))
    third = ckpt.generation_dir(tmp_path, 3)
    third.mkdir()
    plant_links(third, ckpt.BEST, victim)
    ckpt.carry_best(first / ckpt.BEST, third)  # the copy where hard links fail
    assert victim.read_bytes() == b"precious"
    assert json.loads((second / ckpt.MANIFEST).read_text())["generation"] == 2
    for directory in (second, third):
        assert not (directory / ckpt.BEST).is_symlink()
        assert (directory / ckpt.BEST).read_bytes() == (first / ckpt.BEST).read_bytes()

    monkeypatch.setattr(ckpt.secrets, "token_hex", lambda size: "0123456789abcdef")  # the name, foreseen
    exact = ckpt.temporary_path(tmp_path / "front.json")
    exact.symlink_to(victim)
    with pytest.raises(FileExistsError):
        ckpt.atomic_write(tmp_path / "front.json", b"{}")
    assert victim.read_bytes() == b"precious" and exact.is_symlink() and not (tmp_path / "front.json").exists()


def test_carrying_a_kept_best_that_is_gone_loses_the_best_not_the_run(tmp_path, caplog):
    """best.pt removed from outside while the run goes on: the next checkpoint is written without it
    (no exception ends the run), with a warning, and it counts as complete with its kept best lost."""
    first = fake_checkpoint(tmp_path, 1)
    with_best(first)
    entry = json.loads((first / ckpt.MANIFEST).read_text())["best"]
    (first / "best.pt").unlink()
    second = fake_checkpoint(tmp_path, 2)
    with caplog.at_level(logging.WARNING, logger="evo.rundir.checkpoint"):
        ckpt.carry_best(first / "best.pt", second)
    assert f"the kept best {first / 'best.pt'} is gone" in caplog.text
    assert sorted(p.name for p in second.iterdir()) == ["manifest.json", "member_0.pt", "member_1.pt"]
    manifest = json.loads((second / ckpt.MANIFEST).read_text())
    ckpt.write_manifest(second, {**manifest, "best": entry})
    found, _ = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 2 and found.best is None and found.best_lost.startswith(f"{second / 'best.pt'}: missing")


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda m: m["members"]["1"].update(file="/dev/zero"), "file is '/dev/zero', not the name of a file beside it"),
        (lambda m: m["members"]["1"].update(file="../gen_000001/member_1.pt"), "file is '../gen_000001/member_1.pt'"),
        (lambda m: m["members"]["1"].update(bytes="12"), "member 1: bytes is '12', not a whole number"),
        (lambda m: m["members"].update(x=m["members"].pop("1")), "member 'x' is not a member id"),
        (lambda m: m.update(members=[1, 2]), "members is [1, 2], not a mapping of member ids to files"),
        (lambda m: m.update(generation="2"), "generation is '2', not a whole number"),
    ],
)
def test_a_path_or_garbage_in_a_manifest_passes_the_checkpoint_over(tmp_path, edit, why):
    """Issue 54 N11 (as best.json): a manifest naming a path was followed (/dev/zero: hashed for ever), a value of
    another kind was a traceback; now the checkpoint is damaged, named with the value, and the previous one used."""
    fake_checkpoint(tmp_path, 1)
    directory = fake_checkpoint(tmp_path, 2)
    manifest = json.loads((directory / ckpt.MANIFEST).read_text())
    edit(manifest)
    ckpt.write_manifest(directory, manifest)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1 and len(skipped) == 1, skipped
    assert skipped[0].startswith(f"{directory / ckpt.MANIFEST}: unreadable (") and why in skipped[0]


@pytest.mark.parametrize(
    "key, value, why",
    [
        ("file", "/etc/passwd", "file is '/etc/passwd', not the name of a file beside it"),
        ("member", "x", "member is 'x', not a member id"),
        ("score", "high", "score is 'high', not a number"),
    ],
)
def test_a_path_or_garbage_in_a_manifests_kept_best_is_a_lost_best(tmp_path, key, value, why):
    """The kept best's entry of a manifest, as best.json's: the checkpoint stands, its kept best is lost, and
    why names the value (the tools then refuse --member best-ever with it, exit 2, as a damaged best)."""
    directory = fake_checkpoint(tmp_path, 1)
    with_best(directory)
    manifest = json.loads((directory / ckpt.MANIFEST).read_text())
    manifest["best"][key] = value
    ckpt.write_manifest(directory, manifest)
    found, skipped = ckpt.latest(tmp_path, "run-a")
    assert found.generation == 1 and skipped == [] and found.best is None
    assert why in found.best_lost and "damaged or edited" in found.best_lost

"""The run directory's CSV files (evo.rundir.records), without MPI or training."""

import csv
import errno

import pytest

from evo.config import parse_config
from evo.core.plan import Exploit
from evo.core.result import MemberResult
from evo.rundir.records import Continuation, RankTiming, RunRecords
from evo.runner.session import open_records
from tests.support import PPO_SIX

HPARAMS = {name: 0.5 for name in PPO_SIX}


def write(records: RunRecords, generation: int) -> None:
    population = [MemberResult(m, 0, 100 * generation, 10.0 * generation + m, hparams=HPARAMS) for m in (0, 1)]
    exploit = Exploit(generation, 0, 1, population[0].score, population[1].score, HPARAMS, HPARAMS)
    records.write_generation(generation, population, [exploit])
    records.write_timing(generation, 1.0, 200, [RankTiming(200, 0.5, 0.1, 0.2, 0.2)])


def generations_in(path) -> list[int]:
    with path.open(newline="") as handle:
        return [int(row["generation"]) for row in csv.DictReader(handle)]


def test_csv_files_end_lines_with_newline_only_through_any_number_of_resumes(tmp_path):
    config = parse_config(["--run-dir", str(tmp_path / "run"), "--tb-writer", "False"], world_size=1)
    records = open_records(config)
    for generation in (1, 2, 3):
        write(records, generation)
    for resume_at, last in ((2, 4), (3, 5)):  # a checkpoint of `resume_at`; later rows are dropped
        records = open_records(config, continued=Continuation(resume_at, records.lineage[:resume_at]))
        for generation in range(resume_at + 1, last + 1):
            write(records, generation)

    for name in ("population.csv", "generations.csv"):
        data = (config.run_dir / name).read_bytes()
        assert b"\r" not in data, name
        assert data.endswith(b"\n") and not data.endswith(b"\n\n")
    assert generations_in(config.run_dir / "population.csv") == [g for g in range(1, 6) for _ in (0, 1)]
    assert generations_in(config.run_dir / "generations.csv") == [1, 2, 3, 4, 5]
    assert len((config.run_dir / "lineage.jsonl").read_text().splitlines()) == 5


def test_records_are_never_written_through_a_link(tmp_path):
    """Whoever may write the run directory links its records to a file of their choosing: the records a
    new run writes replace the links (never written through), and appending to a record that became a
    link is refused (ELOOP). The file pointed to is untouched throughout."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    run_dir = tmp_path / "run"
    config = parse_config(["--run-dir", str(run_dir), "--tb-writer", "False"], world_size=1)
    run_dir.mkdir()  # as the run's lock makes it, before the records
    names = ("command.txt", "versions.json", "population.csv", "lineage.jsonl")
    for name in names:
        (run_dir / name).symlink_to(victim)
    records = open_records(config)
    assert victim.read_bytes() == b"precious"
    assert not any((run_dir / name).is_symlink() for name in names)
    assert (run_dir / "population.csv").read_text().startswith("generation,")

    for name in ("population.csv", "lineage.jsonl", "generations.csv"):
        (run_dir / name).unlink(missing_ok=True)
        (run_dir / name).symlink_to(victim)
        with pytest.raises(OSError) as refused:
            write(records, 1)
        assert refused.value.errno == errno.ELOOP, name
        (run_dir / name).unlink()
    with pytest.raises(OSError) as refused:  # a resume appends its command line
        (run_dir / "command.txt").unlink()
        (run_dir / "command.txt").symlink_to(victim)
        open_records(config, continued=Continuation(0, []))
    assert refused.value.errno == errno.ELOOP
    assert victim.read_bytes() == b"precious"

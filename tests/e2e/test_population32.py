"""A population of 32 on 32 ranks (mpiexec -n 32 --oversubscribe): the run completes and its
records are right, generation by generation.

On 2 cores the job is oversubscribed 16x; nearly all of its time is 32 processes importing
torch and SB3 (the generations take seconds). Two generations are the smallest budget that still
proves every point: each generation's exploits (its recipients holding their donors' weights at its
checkpoint), env steps growing by a generation's budget, and a manifest's lineage holding the
generations before it.
"""

import csv
import hashlib
import json

import pytest
import torch

from evo.core.selection import ranking
from evo.core.streams import tie_priorities
from evo.rundir.checkpoint import file_sha256, load_payload
from tests.support import mpiexec, read_lineage, read_population, write_hyperparams

RANKS = 32
GENERATIONS = 2
SEED = 1
RECIPIENTS = 8  # truncation's default fraction 0.25 of 32
# the job took ~90 s (3 generations) on an idle 2-core machine, 14.5 minutes with the cores busy elsewhere
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
TINY = "CartPole-v1:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 1\n  n_epochs: 1\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("population32")
    hyperparams = write_hyperparams(tmp, TINY)
    run_dir = tmp / "run"
    arguments = [
        *("pbt_rl_truct.py", "--env-id", "CartPole-v1", "--hyperparams", str(hyperparams)),
        *("--agent-training-steps", "64", "--total-generations", str(GENERATIONS), "--seed", str(SEED)),
        *("--keep-checkpoints", str(GENERATIONS + 1), "--tb-writer", "False", "--progress-interval", "0"),
        *("--run-dir", str(run_dir)),
    ]
    result = mpiexec(RANKS, arguments, timeout=1700)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return run_dir


def member_file(run_dir, generation, member):
    return load_payload(run_dir / "checkpoints" / f"gen_{generation:06d}" / f"member_{member}.pt")


def digest(payload) -> str:
    return hashlib.sha256(payload["state"].numpy().tobytes()).hexdigest()


def test_every_member_of_every_generation_is_recorded_once(run_dir):
    """The first test of the module pays for its one 32-rank run (about 40 s on 2 cores: 32 processes
    importing torch and SB3), which every test here reads."""
    rows = read_population(run_dir)
    keys = [(int(row["generation"]), int(row["member"])) for row in rows]
    assert sorted(keys) == [(g, m) for g in range(1, GENERATIONS + 1) for m in range(RANKS)]
    for row in rows:
        assert int(row["rank"]) == int(row["member"])  # one member per rank
        assert int(row["env_steps"]) == 64 * int(row["generation"])
    with (run_dir / "generations.csv").open() as handle:
        assert [int(row["generation"]) for row in csv.DictReader(handle)] == list(range(1, GENERATIONS + 1))


def test_exploits_follow_truncation_and_recipients_hold_their_donors_weights(run_dir):
    rows = read_population(run_dir)
    lineage = read_lineage(run_dir)
    for generation in range(1, GENERATIONS + 1):
        now = sorted((r for r in rows if int(r["generation"]) == generation), key=lambda r: int(r["member"]))
        draw = tie_priorities((SEED, generation), range(RANKS))  # ties as the run breaks them: its draw
        scores = [float(r["score"]) for r in now]
        order = [int(m) for m in ranking(scores, [draw[m] for m in range(RANKS)])]  # best first, NaN last
        top, bottom = set(order[:RECIPIENTS]), set(order[-RECIPIENTS:])
        exploits = [e for e in lineage if e["generation"] == generation]
        donors = {e["recipient"]: e["donor"] for e in exploits}
        assert len(exploits) == RECIPIENTS and set(donors) == bottom  # the bottom 25 %, each once
        assert set(donors.values()) <= top  # donors from the top 25 %
        assert {int(r["member"]): r["donor"] for r in now} == {m: str(donors.get(m, "")) for m in range(RANKS)}

        # the checkpoint at the boundary: each recipient holds its donor's weights and Adam state
        # bit for bit, and its new hyperparameters; every other member still has weights of its own
        payloads = {m: member_file(run_dir, generation, m) for m in range(RANKS)}
        for exploit in exploits:
            recipient, donor = exploit["recipient"], exploit["donor"]
            assert torch.equal(payloads[recipient]["state"], payloads[donor]["state"])
            assert payloads[recipient]["hparams"] == pytest.approx(exploit["new_hparams"])
        kept = [digest(payloads[m]) for m in range(RANKS) if m not in donors]
        assert len(set(kept)) == RANKS - RECIPIENTS


def test_every_checkpoint_has_a_manifest_that_matches_its_files(run_dir):
    lineage = (run_dir / "lineage.jsonl").read_text().splitlines()
    for generation in range(GENERATIONS + 1):
        directory = run_dir / "checkpoints" / f"gen_{generation:06d}"
        manifest = json.loads((directory / "manifest.json").read_text())
        assert manifest["generation"] == generation and manifest["world_size"] == RANKS
        assert sorted(int(m) for m in manifest["members"]) == list(range(RANKS))
        for entry in manifest["members"].values():
            assert file_sha256(directory / entry["file"]) == entry["sha256"]
        assert len(manifest["lineage"]) == RECIPIENTS * generation
        assert [json.dumps(e, sort_keys=True) for e in manifest["lineage"]] == [
            json.dumps(json.loads(line), sort_keys=True) for line in lineage[: RECIPIENTS * generation]
        ]

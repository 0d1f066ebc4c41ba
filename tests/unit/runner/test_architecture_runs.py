"""The networks' architecture in the search space, in whole PPO runs in one process
(tests/support.py:run_in_process): members of different sizes, every recipient taking its donor's
architecture with its weights (under winner-takes-all's collective transport, point-to-point and
asynchronous runs), the records and TensorBoard carrying it, checkpoints that resume and that evo-evaluate
and evo-export load at each member's own size. Moved down from the e2e tier: what they check is the
session's, the driver's, the records' and the tools'. Members of different sizes crossing ranks:
tests/mpi/ranks/test_architectures.py (asynchronous) and tests/mpi/ranks/test_stages.py (a stage's survivors,
both synchronous transports)."""

import json

import pytest
import torch
from stable_baselines3 import PPO

from evo.rundir.checkpoint import load_payload
from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from evo.tools.saved import BEST_EVER
from tests.in_process import logged, scalar_tags
from tests.support import budget, read_lineage, read_population, write_hyperparams

ARCHITECTURE = ("pi_layers", "pi_width", "vf_layers")
SPACE = """Pendulum-v1:
  n_envs: 2
  n_steps: 64
  n_minibatches: 2
  n_epochs: 2
  search_space:
    learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}
    pi_layers: {low: 1, high: 3, type: int}
    pi_width: {choices: [16, 32, 64]}
    vf_layers: {low: 1, high: 3, type: int}
"""


def shape(row) -> tuple[int, ...]:
    return tuple(int(float(row[name])) for name in ARCHITECTURE)


def run(tmp_path, rule, generations, *extra, run_dir=None):
    """4 members of 256 env steps on Pendulum with the architecture in the space, seed 3, under ``rule``
    (the script's selection rule and transport) in this process. Returns the run directory."""
    run_dir = run_dir or tmp_path / "run"
    flags = [*budget(4, generations, 256), "--hyperparams", str(write_hyperparams(tmp_path, SPACE))]
    status, log = logged(["--env-id", "Pendulum-v1", *flags, "--run-dir", str(run_dir), "--seed", "3", *extra], *rule)
    assert status == 0, log[-3000:]
    return run_dir


WTA, TRUCT = ("wta", "collective"), ("truncation", "p2p")


def assert_architecture_goes_with_the_weights(run_dir, generation_key="generation"):
    """Each member starts from its own draw, and each recipient trains on with its donor's architecture.
    Returns the number of copies that changed a recipient's architecture."""
    rows = {(int(r[generation_key]), int(r["member"])): r for r in read_population(run_dir)}
    assert len({shape(rows[(1, m)]) for m in range(4)}) > 1, "the members start with different architectures"
    changed = 0
    for exploit in read_lineage(run_dir):
        if "recipient" not in exploit or exploit["donor"] == exploit["recipient"]:
            continue
        donor = rows[(exploit.get("donor_interval", exploit["generation"]), exploit["donor"])]
        new = tuple(int(exploit["new_hparams"][name]) for name in ARCHITECTURE)
        assert new == shape(donor), exploit
        assert exploit["new_hparams"]["learning_rate"] is not None
        after = rows.get((exploit["generation"] + 1, exploit["recipient"]))
        if after is not None:
            assert shape(after) == new
        changed += shape(rows[(exploit["generation"], exploit["recipient"])]) != new
    return changed


def assert_checkpoint_sizes(run_dir) -> dict[int, tuple[int, ...]]:
    """Each member's checkpoint holds a state of its own architecture's size (another architecture,
    another size). Returns each member's architecture."""
    [last] = sorted((run_dir / "checkpoints").glob("gen_*"))[-1:]
    shapes, sizes = {}, {}
    for path in sorted(last.glob("member_*.pt")):
        payload = load_payload(path)
        shapes[payload["member"]] = tuple(int(payload["hparams"][n]) for n in ARCHITECTURE)
        sizes.setdefault(shapes[payload["member"]], set()).add(payload["state"].numel())
    assert sorted(shapes) == [0, 1, 2, 3]
    assert all(len(found) == 1 for found in sizes.values())
    assert len({size for found in sizes.values() for size in found}) == len(sizes)
    return shapes


def hidden_sizes(module) -> list[int]:
    return [layer.out_features for layer in module if isinstance(layer, torch.nn.Linear)]


def test_recipients_take_their_donors_architecture_and_the_run_resumes(tmp_path, capsys):
    run_dir = run(tmp_path, WTA, 2)  # winner takes all (collective): three copies a generation
    assert assert_architecture_goes_with_the_weights(run_dir) >= 1, "a copy changed an architecture"
    header = read_population(run_dir)[0]
    assert set(ARCHITECTURE) <= set(header)
    accumulator, tags = scalar_tags(run_dir / "tb" / "member_0")
    assert {f"hparams/{name}" for name in ARCHITECTURE} <= tags

    run(tmp_path, WTA, 3, "--resume", run_dir=run_dir)
    assert {int(r["generation"]) for r in read_population(run_dir)} == {1, 2, 3}
    assert_architecture_goes_with_the_weights(run_dir)
    shapes = assert_checkpoint_sizes(run_dir)

    out = tmp_path / "evaluation.json"
    assert evaluate_tool.main([str(run_dir), "--episodes", "2", "--json", str(out)]) == 0
    members = json.loads(out.read_text())["members"]  # each built at its own size, and the kept best
    assert sorted(m["member"] for m in members if not m["label"].startswith(BEST_EVER)) == [0, 1, 2, 3]
    assert any(m["label"].startswith(BEST_EVER) for m in members)
    # the exported member is a stock SB3 model of its own architecture
    for member in range(4):
        folder = tmp_path / f"exported-{member}"
        assert export_tool.main([str(run_dir), "--member", str(member), "--out", str(folder)]) == 0
        [zipped] = folder.glob("ppo/Pendulum-v1_1/Pendulum-v1.zip")
        policy = PPO.load(zipped, device="cpu").policy
        layers, width, value_layers = shapes[member]
        assert hidden_sizes(policy.mlp_extractor.policy_net) == [width] * layers
        assert hidden_sizes(policy.mlp_extractor.value_net) == [64] * value_layers


@pytest.mark.parametrize("extra", [[], ["--asynchronous"]], ids=["point-to-point", "asynchronous"])
def test_the_point_to_point_and_asynchronous_runs_move_members_of_any_size(tmp_path, extra):
    run_dir = run(tmp_path, TRUCT, 2, "--truncation-fraction", "0.5", "--tb-writer", "False", *extra)
    assert_architecture_goes_with_the_weights(run_dir)
    assert any(e["donor"] != e["recipient"] for e in read_lineage(run_dir) if "recipient" in e)  # the premise

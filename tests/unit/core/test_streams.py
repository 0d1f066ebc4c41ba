"""evo/core/streams.py: one table of the run's random streams, each constant distinct, documented in the
table, and the only place a stream constant is defined."""

import ast
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from evo.core import streams
from evo.core.streams import GENERATOR_STREAMS, MEMBER_STREAMS, eval_actions_seed, eval_env_seed, member_seed
from tests.support import ROOT


def test_every_stream_is_distinct_and_in_the_docstring_table():
    member = list(MEMBER_STREAMS.values())
    assert member == sorted(member) and len(set(member)) == len(member)
    generators = list(GENERATOR_STREAMS.values())
    assert len(set(generators)) == len(generators)
    for name in [*MEMBER_STREAMS, *GENERATOR_STREAMS]:
        assert f"``{name}``" in streams.__doc__, f"{name} is not in the table of evo/core/streams.py"
        assert getattr(streams, name) == {**MEMBER_STREAMS, **GENERATOR_STREAMS}[name]


def test_member_streams_stay_apart_within_their_documented_spans():
    """RESUMED_ENVS + generation stays below RESEEDED_RANK for fewer than 998 generations; RESTARTED_ENVS +
    failures below MOVED_ENVS: the offsets the docstring promises."""
    assert streams.RESUMED_ENVS + 997 < streams.RESEEDED_RANK
    assert streams.RESEEDED_RANK + 997 < streams.RESTARTED_ENVS
    seeds = {
        member_seed(7, 3, stream)
        for stream in (
            streams.MODEL,
            *(streams.RESUMED_ENVS + g for g in range(50)),
            *(streams.RESTARTED_ENVS + f for f in range(10)),
        )
    }
    assert len(seeds) == 1 + 50 + 10  # distinct seeds for distinct streams
    assert member_seed(7, 3) == int(np.random.SeedSequence([7, 3, 0]).generate_state(1)[0] % (2**31 - 1))


def test_no_module_of_evo_defines_a_stream_constant_of_its_own():
    """A ``*_STREAM`` constant, or a literal stream given to member_seed, outside the table is a stream the
    table does not know."""
    offending = []
    for path in sorted((ROOT / "evo").rglob("*.py")):
        if path == ROOT / "evo" / "core" / "streams.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z_]*STREAM[A-Z_]*", target.id):
                        offending.append(f"{path.relative_to(ROOT)}:{node.lineno} {target.id}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "member_seed":
                stream = [k.value for k in node.keywords if k.arg == "stream"] or node.args[2:3]
                if stream and isinstance(stream[0], ast.Constant):
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno} member_seed(..., {stream[0].value})")
    assert not offending, "streams outside evo/core/streams.py:\n  " + "\n  ".join(offending)


def test_each_evaluation_of_a_member_draws_its_sampled_actions_from_a_seed_of_its_own():
    seeds = {eval_actions_seed(7, member, steps) for member in range(4) for steps in (0, 256, 512, 10_000)}
    assert len(seeds) == 16 and all(0 <= seed < 2**63 for seed in seeds)
    assert eval_actions_seed(7, 1, 256) != eval_actions_seed(8, 1, 256)


def test_each_evaluation_env_is_seeded_by_the_env_steps_alone_and_every_member_shares_it():
    seeds = {eval_env_seed(7, steps) for steps in (0, 256, 512, 10_000)}
    assert len(seeds) == 4 and all(0 <= seed < 2**31 - 1 for seed in seeds)
    assert eval_env_seed(7, 256) != eval_env_seed(8, 256) and eval_env_seed(7, 256) == eval_env_seed(7, 256)


def test_the_seeds_are_the_same_in_another_process():
    """A resumed or moved member is seeded in another process (another rank, another job): the seeds depend on
    their arguments alone, not on the process (no hash(), no global generator), so a fresh interpreter with
    another hash seed computes the same ones."""
    program = (
        "from evo.core.streams import eval_actions_seed, member_seed, MEMBER_STREAMS; "
        "print([eval_actions_seed(7, 1, 256)] + [member_seed(7, 1, s) for s in MEMBER_STREAMS.values()])"
    )
    here = [eval_actions_seed(7, 1, 256)] + [member_seed(7, 1, stream) for stream in MEMBER_STREAMS.values()]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    there = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    assert there.stdout.strip() == str(here)


@pytest.mark.parametrize("seed", [0, 5, 2**31 - 2])
def test_every_member_of_a_large_population_gets_a_seed_of_its_own_in_every_stream(seed):
    """64 members, 64 distinct seeds in each member stream (at its base and a few steps into its span), and one
    member's seeds differ from stream to stream: no two members start from the same weights or envs."""
    for stream in MEMBER_STREAMS.values():
        for offset in (0, 1, 3):
            seeds = [member_seed(seed, member, stream + offset) for member in range(64)]
            assert len(set(seeds)) == 64, f"stream {stream} + {offset}: members share seeds"
            assert all(0 <= value < 2**31 - 1 for value in seeds)
    for member in (0, 17, 63):
        per_stream = [member_seed(seed, member, stream) for stream in MEMBER_STREAMS.values()]
        assert len(set(per_stream)) == len(per_stream)

"""JSON records are JSON (issue 54 N6): NaN and ±inf, which Python's json writes as the non-standard
``NaN`` and ``Infinity`` that other readers refuse, are written as null by every record writer
(evo.rundir.jsontext), and read back as NaN where a number is expected. A whole run's files are checked
with a strict reader in tests/unit/runner/test_objective_runs.py."""

import json
import math

import pytest

from evo.core.explorers.pb2 import PB2
from evo.core.kinds import Float
from evo.core.plan import Exploit
from evo.core.restart import Restart
from evo.rundir.jsontext import dumps, number


def strict(text: str):
    """``json.loads`` refusing NaN, Infinity and -Infinity, as a reader of JSON does."""
    return json.loads(text, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))


def test_nan_and_inf_are_written_as_null_and_read_back_as_nan():
    value = {"a": [1.5, math.nan, (math.inf, -math.inf)], "b": {"c": float("nan")}, "d": "nan", "e": 2}
    assert strict(dumps(value)) == {"a": [1.5, None, [None, None]], "b": {"c": None}, "d": "nan", "e": 2}
    assert math.isnan(number(None)) and number(2) == 2.0


def test_the_lineage_s_scores_and_objectives_are_null_when_not_finite():
    """An exploit's line held Infinity for a member that scored +inf; a restart's too."""
    exploit = Exploit(1, 0, 1, -math.inf, math.inf, {}, {}, (), {"info:merit": -math.inf}, {"info:merit": math.inf})
    line = strict(json.dumps(exploit.to_json()))
    assert line["recipient_score"] is None and line["donor_score"] is None
    assert line["recipient_objectives"] == {"info:merit": None} and line["donor_objectives"] == {"info:merit": None}
    restart = Restart(1, 0, 1, math.inf, 1, "boom", {}, {})
    assert strict(json.dumps(restart.to_json()))["donor_score"] is None


def test_pb2_s_state_with_an_unscored_member_goes_through_json_and_back():
    """A member with no score yet (NaN) has a baseline of NaN: written null, read back NaN."""
    pb2 = PB2({"p": Float(0.0, 1.0)}, observations=[(1, [0.5], 0.25)], baselines={0: 1.0, 1: math.nan})
    again = PB2({"p": Float(0.0, 1.0)})
    again.restore(strict(dumps(pb2.state())))
    assert again.observations == pb2.observations and again.baselines[0] == 1.0 and math.isnan(again.baselines[1])

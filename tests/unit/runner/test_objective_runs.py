"""Runs with ``--objective`` and env parameters, whole, in one process on MPI.COMM_SELF (tests/support.py's
run_in_process), in both modes (issue 38): the objective, not the return, decides who copies whom; an env
parameter is what the member's live envs run with after an explore and an exploit, and after a resume;
a run with two objectives copies only from its first front (front.json, and the run's last line naming it);
a key the env never reports stops the run at its first generation with its records kept. The env
(tests/objective_env.py) pays ``weight`` per step and reports ``merit`` = 1 - ``weight``: its return and its
objective disagree, whatever a member learns. These are the rules' only tests; tests/e2e/test_objective_runs.py
runs objectives across ranks (gathered from both, through a stop and a resume) and exit 2 on every rank."""

import json
import logging
import math

import pytest

import evo.config.probe
from evo.core.objective import ObjectiveNotReported
from evo.rundir import checkpoint as ckpt
from tests.support import TINY_DEFAULT, budget, read_lineage, read_population, run_in_process

ENV = ["--env-id", "tests.objective_env:Objectives-v0"]
SPACE = "  search_space:\n    env.weight: {low: 0.05, high: 0.95}\n    env.cost: {low: 0.05, high: 0.95}\n"
MODES = [pytest.param([], id="synchronous"), pytest.param(["--asynchronous"], id="asynchronous")]


def run(tmp_path, name, *flags, strategy="truncation", transport="p2p", generations=3):
    """A run of 4 members on the env, 3 generations of 128 env steps (32 episodes each); its records."""
    hp = tmp_path / "objectives.yml"
    hp.write_text(TINY_DEFAULT + SPACE)
    run_dir = tmp_path / name
    argv = [*ENV, "--hyperparams", str(hp), *budget(4, generations, 128), "--tb-writer", "False"]
    argv += ["--progress-interval", "0", "--seed", "2", "--run-dir", str(run_dir), *flags]
    assert run_in_process(argv, strategy, transport) == 0
    return run_dir, read_population(run_dir), read_lineage(run_dir)


def copies(lineage):
    return [line for line in lineage if "event" not in line and line["donor"] != line["recipient"]]


def weight_of(rows, member, generation):
    key = (str(member), str(generation))
    return next(float(r["env.weight"]) for r in rows if (r["member"], r["generation"]) == key)


@pytest.mark.parametrize("mode", MODES)
def test_the_objective_not_the_return_decides_who_copies_whom(tmp_path, mode):
    run_dir, rows, lineage = run(tmp_path, "objective", "--objective", "info:merit", *mode)
    assert rows[0].keys() >= {"info:merit", "env.weight", "score_train"}
    if not mode:  # the kept best is the best objective the run saw, not the best return
        best = ckpt.latest(run_dir)[0].best
        assert best["score"] == max(float(r["score"]) for r in rows)
        assert best["score"] != max(float(r["score_train"]) for r in rows)
    for row in rows:  # the score is the objective, the return is score_train: they disagree
        assert float(row["score"]) == pytest.approx(1 - float(row["env.weight"]))
        assert float(row["score_train"]) == pytest.approx(4 * float(row["env.weight"]), abs=1e-5)  # Monitor rounds
    moved = copies(lineage)
    assert moved
    for line in moved:  # every recipient copied a member of lower weight: a higher objective, a lower return
        assert line["donor_objectives"]["info:merit"] > line["recipient_objectives"]["info:merit"]
        assert line["donor_score"] == line["donor_objectives"]["info:merit"]
        assert 1 - line["donor_objectives"]["info:merit"] < line["old_hparams"]["env.weight"]
    _, _, control = run(tmp_path, "return", *mode)  # the same run selecting on the return copies the other way
    for line in copies(control):
        assert line["donor_score"] > line["recipient_score"] and "donor_objectives" not in line
        assert line["donor_score"] / 4 > line["old_hparams"]["env.weight"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scored", [[], ["--eval-episodes", "2", "--select-on", "test"]], ids=["train", "test"])
def test_the_live_envs_run_with_each_member_s_value_after_explore_and_exploit(tmp_path, mode, scored):
    """The objective is the weight the envs reported at their episodes' ends: after every explore and every
    exploit, the value population.csv says the member trained (or was evaluated) with."""
    _, rows, lineage = run(tmp_path, "weights", "--objective", "info:weight:min", *mode, *scored)
    assert copies(lineage) and any(int(r["generation"]) > 1 and r["donor"] for r in rows)
    for row in rows:
        assert float(row["info:weight"]) == pytest.approx(float(row["env.weight"])), row
    for line in copies(lineage):  # the recipient's next row runs with the value it took
        after = [r for r in rows if r["member"] == str(line["recipient"]) and int(r["generation"]) > line["generation"]]
        if after:
            assert float(after[0]["env.weight"]) == pytest.approx(line["new_hparams"]["env.weight"])


@pytest.mark.parametrize("mode", MODES)
def test_env_parameters_survive_a_resume(tmp_path, mode):
    run_dir, before, _ = run(tmp_path, "resumed", "--objective", "info:weight:min", *mode, generations=2)
    if not mode:  # a synchronous run's checkpoint of generation 2 holds the values generation 3 trains with
        checkpoint = ckpt.latest(run_dir)[0]
        saved = {m: ckpt.load_payload(checkpoint.member_path(m))["hparams"]["env.weight"] for m in range(4)}
    _, rows, _ = run(tmp_path, "resumed", "--resume", "--total-generations", "4", *mode)
    assert rows[: len(before)] == before
    later = [r for r in rows if int(r["generation"]) > 2]
    assert len(later) == 8
    for row in later:
        assert float(row["info:weight"]) == pytest.approx(float(row["env.weight"])), row
    if not mode:
        assert {m: weight_of(rows, m, 3) for m in range(4)} == pytest.approx(saved)


def dominated(point, others) -> bool:
    """Whether a member of ``others`` is at least as good in both objectives (merit up, cost down) and better in one."""
    merit, cost = point
    return any(m >= merit and c <= cost and (m > merit or c < cost) for m, c in others)


def seen_by(line, rows, mode):
    """The rows the decision of a lineage line ranked: its generation's (synchronous), or each member's
    latest up to the recipient's ready point (asynchronous, on one rank: ready points settle in turn)."""
    if not mode:
        return [r for r in rows if int(r["generation"]) == line["generation"]]
    latest = {}
    for row in rows:
        latest[row["member"]] = row
        if row["member"] == str(line["recipient"]) and int(row["generation"]) == line["generation"]:
            return list(latest.values())
    raise AssertionError(f"no row of the ready point of {line}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("strategy, transport", [("wta", "collective"), ("truncation", "p2p")])
def test_two_objectives_copy_only_from_the_first_front(tmp_path, caplog, mode, strategy, transport):
    objective = ["--objective", "info:merit,info:cost:min"]
    with caplog.at_level(logging.INFO, logger="evo"):
        run_dir, rows, lineage = run(tmp_path, "fronts", *objective, *mode, strategy=strategy, transport=transport)
    moved = copies(lineage)
    assert moved
    for line in moved:
        donor = (line["donor_objectives"]["info:merit"], line["donor_objectives"]["info:cost"])
        assert line["donor"] in line["front"]
        if strategy == "wta":  # the first front keeps its weights (truncation's bottom may reach into it)
            assert line["recipient"] not in line["front"]
        points = {int(r["member"]): (float(r["info:merit"]), float(r["info:cost"])) for r in seen_by(line, rows, mode)}
        front = sorted(m for m, p in points.items() if not dominated(p, points.values()))
        assert line["front"] == front and points[line["donor"]] == donor
    saved = json.loads((run_dir / "front.json").read_text())
    assert saved["objective"] == "info:merit,info:cost:min" and saved["front"]
    assert f"done: the first front has {len(saved['front'])} member(s): member " in caplog.text  # the run's last line
    if not mode:
        final = [r for r in rows if r["generation"] == "3"]
        last = {int(r["member"]): (float(r["info:merit"]), float(r["info:cost"])) for r in final}
        expected = sorted(m for m, p in last.items() if not dominated(p, last.values()))
        assert [entry["member"] for entry in saved["front"]] == expected


@pytest.mark.parametrize("mode", MODES)
def test_a_key_the_env_never_reports_stops_the_run_at_its_first_generation(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(evo.config.probe, "PROBE_STEPS", 2)  # the probe episode ends too late to tell
    with pytest.raises(ObjectiveNotReported) as stopped:
        run(tmp_path, "unreported", "--objective", "return,info:energy:min", *mode)
    said = str(stopped.value)
    assert "never put 'energy' in info" in said and "the keys it did report: cost, merit, weight" in said
    run_dir = tmp_path / "unreported"
    rows = read_population(run_dir)
    assert len(rows) <= (0 if not mode else 4)  # a synchronous run plans nothing of generation 1
    if not mode:
        assert ckpt.latest(run_dir)[0].generation == 0  # the initial population's checkpoint stands
    assert all(math.isnan(float(r["info:energy"])) for r in rows)


def strict_json_files(run_dir):
    """Every JSON record of the run read as JSON readers do (NaN, Infinity refused); how many files."""
    files = [*run_dir.rglob("*.json"), *run_dir.rglob("*.jsonl")]
    for path in files:
        for line in path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]:
            json.loads(line, parse_constant=lambda token, path=path: pytest.fail(f"{path} holds {token}"))
    return len(files)


@pytest.mark.parametrize("mode", MODES)
def test_inf_in_some_episodes_is_named_left_out_and_no_record_holds_it(tmp_path, caplog, mode):
    """Issue 54 N6: every member's 1st, 4th, 7th ... episode ends with merit = +inf, which won every exploit,
    became the kept best and put Infinity in lineage.jsonl and the manifests. Now the run names it at the
    generation (interval) it appears, scores each member on its finite episodes, and writes JSON."""
    odd = ["--env-kwargs", "odd_every:3", "odd:inf", "--objective", "info:merit"]
    with caplog.at_level(logging.INFO, logger="evo"):
        run_dir, rows, lineage = run(tmp_path, "inf", *odd, *mode)
    where = "generation 1: " if not mode else "member 0 interval 1: "
    assert f"{where}info:merit was NaN or ±inf at the end of " in caplog.text
    assert "those values are left out, each member scored on its finite ones" in caplog.text
    for row in rows:  # the finite episodes' merit, 1 - the weight the envs ran with
        assert float(row["info:merit"]) == float(row["score"]) == pytest.approx(1 - float(row["env.weight"])), row
    assert copies(lineage) and strict_json_files(run_dir) >= 2
    if not mode:
        assert ckpt.latest(run_dir)[0].best["score"] == max(float(r["score"]) for r in rows)


def test_a_key_only_ever_nan_stops_the_run_as_a_key_never_reported(tmp_path, monkeypatch):
    """Issue 54 N6: a key NaN in every episode ended the run with exit 0, "scored nan". Past the probe (its
    episode ends too late to tell), the run stops at its first generation, as for a key never reported."""
    monkeypatch.setattr(evo.config.probe, "PROBE_STEPS", 2)
    with pytest.raises(ObjectiveNotReported) as stopped:
        run(tmp_path, "nan", "--env-kwargs", "odd_every:1", "odd:nan", "--objective", "info:merit")
    said = str(stopped.value)
    assert said.startswith("generation 1: --objective info:merit: the env never put 'merit' in info as a finite number")
    assert "(only as NaN or ±inf: 'merit')" in said and "the keys it did report: cost, weight" in said
    assert ckpt.latest(tmp_path / "nan")[0].generation == 0


def test_an_env_reporting_the_key_in_only_some_episodes_runs_scored_on_those(tmp_path, caplog):
    """Issue 54 N10: the probe's one episode (each env's 1st, 3rd, ... lacks the key) refused the run, though
    docs/running.md says such an env is scored on the episodes that report it."""
    with caplog.at_level(logging.INFO, logger="evo"):
        _, rows, _ = run(tmp_path, "sometimes", "--env-kwargs", "odd_every:2", "--objective", "info:merit")
    assert len(rows) == 12 and "NaN or ±inf" not in caplog.text
    for row in rows:
        assert float(row["info:merit"]) == float(row["score"]) == pytest.approx(1 - float(row["env.weight"])), row


def test_tensorboard_carries_the_objectives_per_member_and_for_the_population(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    hp = tmp_path / "objectives.yml"
    hp.write_text(TINY_DEFAULT + SPACE)
    run_dir = tmp_path / "tb"
    argv = [*ENV, "--hyperparams", str(hp), *budget(2, 1, 128), "--objective", "info:merit,return"]
    assert run_in_process([*argv, "--progress-interval", "0", "--run-dir", str(run_dir)]) == 0
    tags = {}
    for name in ("population", "member_0"):
        events = EventAccumulator(str(run_dir / "tb" / name))
        events.Reload()
        tags[name] = set(events.Tags()["scalars"])
    assert {"objective/info:merit", "objective/return", "hparams/env.weight"} <= tags["member_0"]
    assert {"objective/info:merit/best", "objective/info:merit/mean", "pbt/best_return", "pbt/mean_return"} <= tags[
        "population"
    ]

"""bench/peers.py (evo against Ray Tune) without Ray: the process-tree parsing, the work's settings
as evo resolves them, the run order, the summary and the argument checks. Ray lives in its own
virtualenv (make bench-peers) and is never imported here. (The measurement of a real tree of
processes: tests/e2e/test_bench_peers_runs.py.)"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from bench import peers
from bench.proctree import descendants, parse_stat, parse_status_kb
from tests.support import ROOT


def test_parse_stat_reads_names_with_spaces_and_parentheses():
    line = "4242 (ray::Impl (x) y) S 17 4242 4242 0 -1 4194560 1 0 0 0 250 50 3 4 20 0 7 0 98765 100 200 0\n"
    info = parse_stat(line)
    assert (info.pid, info.name, info.ppid) == (4242, "ray::Impl (x) y", 17)
    assert (info.start_ticks, info.cpu_ticks) == (98765, 300)


def test_parse_stat_of_this_process():
    info = parse_stat(Path("/proc/self/stat").read_text())
    assert (info.pid, info.ppid) == (os.getpid(), os.getppid())
    assert info.start_ticks > 0 and info.cpu_ticks >= 0


def test_parse_status_kb():
    status = "Name:\tpython\nVmHWM:\t  123456 kB\nVmRSS:\t   2345 kB\n"
    assert parse_status_kb(status, "VmHWM") == 123456
    assert parse_status_kb(status, "VmRSS") == 2345
    assert parse_status_kb("Name:\tkthreadd\n", "VmRSS") == 0


def test_descendants_walks_the_whole_subtree_only():
    parents = {10: 1, 11: 10, 12: 10, 13: 11, 14: 13, 20: 1, 21: 20}
    assert descendants(10, parents) == [11, 12, 13, 14]
    assert descendants(20, parents) == [21]
    assert descendants(14, parents) == []
    assert descendants(10, {k: v for k, v in parents.items() if k != 11}) == [12]  # a cut link hides its subtree


def test_rotation_puts_every_system_in_every_place():
    systems = peers.SYSTEMS
    orders = [peers.rotation(systems, repeat) for repeat in range(len(systems))]
    assert all(sorted(order) == sorted(systems) for order in orders)
    for place in range(len(systems)):
        assert sorted(order[place] for order in orders) == sorted(systems)
    assert peers.rotation(systems, len(systems)) == list(systems)
    assert peers.rotation(["evo"], 4) == ["evo"]


def args_for(argv: list[str]):
    return peers.parse_args(argv)


def test_arguments_need_rays_python_only_for_ray(tmp_path, capsys):
    with pytest.raises(SystemExit):
        args_for([])
    assert "make bench-peers" in capsys.readouterr().err
    assert args_for(["--only", "evo", "evo-single", "sb3-single"]).only == ["evo", "evo-single", "sb3-single"]
    with pytest.raises(SystemExit):
        args_for(["--ray-python", str(tmp_path / "missing")])
    assert "not an executable" in capsys.readouterr().err
    assert args_for(["--ray-python", sys.executable]).ray_python == sys.executable


def test_arguments_collect_every_problem(capsys):
    with pytest.raises(SystemExit):
        args_for(["--only", "evo", "--members", "1", "--steps", "0", "--repeats", "0", "--retries", "-1"])
    error = capsys.readouterr().err
    assert "--steps is 0" in error and "--repeats is 0" in error and "population of 2" in error
    assert "--retries is -1" in error
    assert args_for(["--only", "sb3-single", "--members", "1"]).members == 1


def test_ranks_must_divide_the_population():
    with pytest.raises(SystemExit):
        args_for(["--only", "evo", "--members", "4", "--ranks", "3"])
    assert args_for(["--only", "evo", "--members", "4", "--cores", "8"]).ranks == 4  # never more than members


def test_the_work_is_make_runs_as_evo_resolves_it():
    args = args_for(["--only", "evo", "--generations", "3", "--steps", "2048", "--eval-episodes", "5"])
    spec = peers.build_spec(args)
    assert (spec["env_id"], spec["members"], spec["generations"], spec["steps"]) == ("CartPole-v1", 4, 3, 2048)
    assert spec["eval_episodes"] == 5
    assert (spec["n_envs"], spec["n_steps"], spec["batch_size"], spec["n_epochs"]) == (8, 128, 256, 10)
    assert (spec["net_arch"], spec["activation_fn"], spec["max_grad_norm"]) == ([64, 64], "tanh", 0.5)
    assert spec["defaults"]["learning_rate"] == 1e-3 and spec["defaults"]["gamma"] == 0.98
    space = spec["search_space"]
    assert set(space) == {"learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef"}
    assert space["learning_rate"] == {"low": 2e-4, "high": 3e-3, "scale": "log"}
    assert space["gamma"]["scale"] == space["gae_lambda"]["scale"] == "horizon"
    assert (spec["truncation_fraction"], spec["resample_probability"]) == (0.25, 0.25)
    assert sorted(spec["perturb_factors"]) == [0.8, 1.2]
    json.dumps(spec)  # what the Ray side reads


def test_commands_run_the_same_work(tmp_path):
    args = args_for(["--ray-python", sys.executable, "--members", "4", "--generations", "3", "--cores", "2"])
    spec_path = tmp_path / "spec.json"
    evo = peers.command("evo", args, spec_path, tmp_path, seed=5)
    # as many ranks as Ray gets CPUs, the 4 members spread over them
    assert evo[evo.index("-n") + 1] == "2" and evo[evo.index("--num-agents") + 1] == "4" and "--oversubscribe" in evo
    one_each = peers.command("evo", args_for(["--only", "evo", "--ranks", "4"]), spec_path, tmp_path, seed=5)
    assert one_each[one_each.index("-n") + 1] == "4"  # make run's layout
    assert evo[evo.index("--eval-episodes") + 1] == "10" and evo[evo.index("--select-on") + 1] == "test"
    assert evo[evo.index("--total-generations") + 1] == "3" and evo[evo.index("--seed") + 1] == "5"
    single = peers.command("evo-single", args, spec_path, tmp_path, seed=5)
    assert single[single.index("-n") + 1] == "1" and single[single.index("--num-agents") + 1] == "1"
    assert "--strategy" in single and single[single.index("--initial-hparams") + 1] == "defaults"
    for system, synch in (("ray-async", "false"), ("ray-sync", "true")):
        ray = peers.command(system, args, spec_path, tmp_path, seed=5)
        assert ray[:2] == [sys.executable, "bench/ray_pbt.py"] and ray[ray.index("--synch") + 1] == synch
    assert peers.command("sb3-single", args, spec_path, tmp_path, seed=5)[1] == "bench/sb3_member.py"


def record(system: str, repeat: int, wall: float, rss: float, cpu: float = 10.0) -> dict:
    return {
        "system": system,
        "repeat": repeat,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": rss,
        "concurrent_rss_mb": rss,
        "concurrent_pss_mb": rss,
        "processes": 4,
        "left_behind": [],
    }


def test_summary_medians_ideals_ratios_and_targets():
    walls = {"evo": [80, 90, 70], "ray-async": [140, 130, 150], "ray-sync": [200, 210, 190]}
    walls |= {"evo-single": [35, 30, 40], "sb3-single": [30, 33, 36]}
    rss = {"evo": 700, "ray-async": 1800, "ray-sync": 1900, "evo-single": 350, "sb3-single": 340}
    records = [record(s, k, w, rss[s]) for s, ws in walls.items() for k, w in enumerate(ws)]
    summary = peers.summarize(records, members=4, cores=2)

    assert summary["systems"]["evo"]["wall_s"] == 80 and summary["systems"]["ray-async"]["wall_s"] == 140
    assert summary["ideal"]["evo-single"]["wall_s"] == 4 * 35 / 2
    assert summary["ideal"]["sb3-single"]["wall_s"] == 4 * 33 / 2
    assert summary["ratios"]["ray-async"]["wall_per_repeat"] == pytest.approx([80 / 140, 90 / 130, 70 / 150])
    wall, memory = summary["targets"]["wall"], summary["targets"]["peak_rss"]
    assert wall["against"] == "ray-async" and wall["ratio"] == pytest.approx(80 / 140) and wall["met"]
    assert memory["against"] == "ray-async" and memory["ratio"] == pytest.approx(700 / 1800) and memory["met"]
    text = peers.report(summary)
    assert "0.57 (0.57, 0.69, 0.47)" in text and "NOT met" not in text
    assert "ideal (4 x one evo agent / 2 cores): 70.0 s; evo at 1.14x it" in text


def test_summary_says_when_a_target_is_missed():
    records = [record("evo", 0, 100, 900), record("ray-async", 0, 150, 2000), record("ray-sync", 0, 120, 1500)]
    summary = peers.summarize(records, members=4, cores=2)
    assert summary["targets"]["wall"]["against"] == "ray-sync"  # Ray's best wall
    assert summary["targets"]["peak_rss"]["against"] == "ray-sync"  # and its least memory
    assert not summary["targets"]["wall"]["met"] and not summary["targets"]["peak_rss"]["met"]
    assert peers.report(summary).count("NOT met") == 2


def test_summary_without_ray_or_without_evo():
    alone = peers.summarize([record("evo", 0, 80, 700), record("sb3-single", 0, 30, 300)], members=4, cores=2)
    assert alone["targets"] == {} and alone["ratios"] == {}
    assert "ideal (4 x one stock SB3 agent / 2 cores): 60.0 s" in peers.report(alone)
    no_evo = peers.summarize([record("ray-sync", 0, 80, 700)], members=4, cores=2)
    assert no_evo["targets"] == {} and "ray-sync" in peers.report(no_evo)


def test_version_mismatches_name_the_package():
    evo = {"stable-baselines3": "2.9.2", "gymnasium": "1.4.0", "torch": "2.13.0+cpu"}
    assert peers.version_mismatches(evo, dict(evo)) == []
    assert peers.version_mismatches(evo, {**evo, "gymnasium": "1.3.0"}) == ["gymnasium: evo 1.4.0, ray 1.3.0"]


def test_horizon_values_come_back_as_discounts():
    sb3_member = pytest.importorskip("bench.sb3_member")
    spec = {"defaults": {"learning_rate": 1e-3, "gamma": 0.98, "gae_lambda": 0.8}}
    hparams = sb3_member.hparams_from_config({"learning_rate": 5e-4, "gamma_horizon": 100.0}, spec)
    assert hparams == pytest.approx({"learning_rate": 5e-4, "gamma": 0.99, "gae_lambda": 0.8})


def test_ray_stays_out_of_evo():
    """Ray runs in its own virtualenv: no module of evo, no test and no dependency names it."""
    for path in [*sorted((ROOT / "evo").rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(name == "ray" or name.startswith("ray.") for name in names), path
            assert not any(name.endswith("ray_pbt") for name in names), path
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"ray' not in pyproject and "'ray" not in pyproject


def test_a_failed_run_is_run_again_and_the_failure_kept(monkeypatch):
    args = args_for(["--only", "sb3-single", "--retries", "1"])
    outcomes = [RuntimeError("sb3-single exited with 1"), {"system": "sb3-single", "wall_s": 1.0}]

    def run_once(system, args, spec_path, repeat):
        result = outcomes.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    monkeypatch.setattr(peers, "run_once", run_once)
    record = peers.run_measured("sb3-single", args, Path("spec.json"), 0)
    assert record["wall_s"] == 1.0 and record["failed_attempts"] == ["sb3-single exited with 1"]
    outcomes[:] = [RuntimeError("first"), RuntimeError("second")]
    with pytest.raises(RuntimeError, match="second"):
        peers.run_measured("sb3-single", args, Path("spec.json"), 0)


def test_the_asynchronous_mode_runs_the_same_work_and_is_reported_against_the_synchronous():
    args = args_for(["--only", "evo", "evo-async", "--generations", "3"])
    evo = peers.command("evo", args, Path("spec.json"), Path("out"), seed=5)
    asynchronous = peers.command("evo-async", args, Path("spec.json"), Path("out"), seed=5)
    assert asynchronous == [*evo[: evo.index("--seed")], "--asynchronous", *evo[evo.index("--seed") :]]
    records = [record("evo", r, w, 500) for r, w in enumerate([100, 110, 90])]
    records += [record("evo-async", r, w, 520) for r, w in enumerate([90, 99, 90])]
    summary = peers.summarize(records, members=4, cores=2)
    assert summary["modes"]["wall"] == pytest.approx(90 / 100)  # of the medians
    assert summary["modes"]["wall_per_repeat"] == pytest.approx([0.9, 0.9, 1.0])
    assert "evo-async / evo (asynchronous / synchronous) wall: 0.90 (0.90, 0.90, 1.00)" in peers.report(summary)
    records += [record("ray-async", r, w, 2500) for r, w in enumerate([180, 200, 190])]
    assert "evo-async / ray-async wall: 0.47 (0.50, 0.49, 0.47)" in peers.report(peers.summarize(records, 4, 2))

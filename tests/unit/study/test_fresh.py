"""evo/study/fresh.py on a real tiny run made in process (CartPole, 4 members, 3 generations, every
checkpoint kept): a kept checkpoint re-evaluated and cached, each member's weights digest with it (equal
for a copy and its donor only), sampled actions drawn the same way every time, a cache made another way
made again, and the floors played on the members' own episodes."""

import json

import numpy as np
import pytest

from evo.rundir.history import load_run
from evo.study.fresh import cache_path, floors, how_made, read_cache, reevaluated
from evo.study.jobs import Job
from evo.study.records import points
from evo.tools.saved import evaluation_seed
from tests.support import budget, run_in_process, write_hyperparams


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    flags = ["--hyperparams", str(write_hyperparams(root)), "--tb-writer", "False", "--seed", "5"]
    flags += ["--keep-checkpoints", "4", "--eval-episodes", "2", "--run-dir", str(root / "run"), *budget(4, 3, 128)]
    assert run_in_process(flags) == 0
    return root / "run"


def test_a_kept_checkpoint_is_re_evaluated_and_cached_beside_the_run(run_dir):
    first = reevaluated(run_dir, 3, generation=1, seed=5)
    assert sorted(first.members) == [0, 1, 2, 3] and all(len(r) == 3 for r in first.members.values())
    assert first.best_ever is None  # the kept best belongs to the last checkpoint's re-evaluation
    saved = json.loads(cache_path(run_dir, 1).read_text())
    assert cache_path(run_dir, 1).name == "reevaluation-gen000001.json"
    assert saved["how"] == {"tool": "evo-evaluate", "episodes": 3, "envs": 3, "seed": evaluation_seed(5),
                            "levels": None, "generation": 1}  # fmt: skip
    last = reevaluated(run_dir, 3, seed=5)
    assert cache_path(run_dir).name == "reevaluation.json" and last.best_ever is not None
    assert "generation" not in json.loads(cache_path(run_dir).read_text())["how"]
    # read back, not played again: the file's own returns
    saved["members"]["0"] = [123.0, 123.0, 123.0]
    cache_path(run_dir, 1).write_text(json.dumps(saved))
    assert reevaluated(run_dir, 3, generation=1, seed=5).members[0] == [123.0] * 3
    # a cache made another way (other episodes) is made again
    assert reevaluated(run_dir, 2, generation=1, seed=5).members[0] != [123.0] * 2
    # a damaged cache (cut short, not JSON, not a cache's mapping) is made again, said once: it was a traceback
    for damaged in ('{"how": {"tool"', "[1, 2]", '{"how": {}, "members": 3}'):
        cache_path(run_dir, 1).write_text(damaged)
        assert read_cache(cache_path(run_dir, 1)) is None
        assert sorted(reevaluated(run_dir, 2, generation=1, seed=5).members) == [0, 1, 2, 3]
        assert json.loads(cache_path(run_dir, 1).read_text())["how"]["episodes"] == 2  # written again, whole


def test_each_members_weights_digest_is_cached_equal_only_for_a_copy_and_its_donor(run_dir):
    """A checkpoint holds the members copied at its generation as untrained copies of their donors: their
    digests are their donors', every other member's its own. A cache made before the digests reads without
    them (the report then says only "the same score")."""
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    copied = {(e["generation"], e["recipient"]): e["donor"] for e in lineage
              if "event" not in e and e["recipient"] != e["donor"]}  # fmt: skip
    generation = min(g for g, _ in copied)
    fresh = reevaluated(run_dir, 5, generation=generation, seed=5)
    digests = fresh.digests
    assert sorted(digests) == [0, 1, 2, 3] and all(len(d) == 64 for d in digests.values())
    pairs = {r: d for (g, r), d in copied.items() if g == generation}
    assert pairs and all(digests[recipient] == digests[donor] for recipient, donor in pairs.items())
    assert len(set(digests.values())) == 4 - len(pairs)
    saved = json.loads(cache_path(run_dir, generation).read_text())
    assert saved["digests"] == {str(m): d for m, d in digests.items()}
    assert read_cache(cache_path(run_dir, generation)).digests == digests  # read back
    last = reevaluated(run_dir, 5, seed=5)
    assert json.loads(cache_path(run_dir).read_text())["best_ever"]["digest"] == last.best_ever_digest is not None
    del saved["digests"]
    cache_path(run_dir, generation).write_text(json.dumps(saved))
    assert reevaluated(run_dir, 5, generation=generation, seed=5).digests == {}  # used as it is, not made again


def test_sampled_actions_are_drawn_the_same_way_every_time(run_dir, tmp_path):
    sampled = reevaluated(run_dir, 8, deterministic=False, generation=2, seed=5)
    assert cache_path(run_dir, 2).is_file()
    how = json.loads(cache_path(run_dir, 2).read_text())["how"]
    assert how["actions"] == "sampled"
    cache_path(run_dir, 2).unlink()
    again = reevaluated(run_dir, 8, deterministic=False, generation=2, seed=5)
    assert again.members == sampled.members  # the same draws: torch seeded by the evaluation seed
    cache_path(run_dir, 2).unlink()
    victim = tmp_path / "victim"  # a link planted where the cache goes (anyone who may write the run directory)
    victim.write_text('{"how": {"tool": "precious"}}')  # read as a cache made another way; not followed
    cache_path(run_dir, 2).symlink_to(victim)
    argmax = reevaluated(run_dir, 8, generation=2, seed=5)
    assert argmax.members != sampled.members and "actions" not in argmax.how
    assert victim.read_text() == '{"how": {"tool": "precious"}}' and not cache_path(run_dir, 2).is_symlink()


def test_a_cache_without_actions_was_made_deterministically():
    wanted = how_made(7, 20, None, True, None)
    assert "actions" not in wanted and how_made(7, 20, None, False, 3)["actions"] == "sampled"


def test_the_floors_play_the_members_episodes(run_dir, tmp_path):
    found = floors(run_dir, 4, None, tmp_path / "floors.json")
    assert len(found.random) == 4 and sorted(found.constant) == [0, 1]
    # CartPole pushed one way falls within a few steps of the same start: 8-11 steps
    assert all(5 <= r <= 15 for r in found.constant[0] + found.constant[1])
    assert found.best_constant in (0, 1) and found.how["seed"] == evaluation_seed(5)
    again = floors(run_dir, 4, None, tmp_path / "floors.json")  # read back
    assert again.random == found.random and again.constant == found.constant
    fresh = floors(run_dir, 4, None, tmp_path / "other.json")  # played again: the same seeded draws
    assert fresh.random == found.random and fresh.constant == found.constant


def test_any_discrete_env_has_floors_and_a_space_without_them_leaves_the_report_without_them(tmp_path, caplog):
    """``fresh.floors: true`` plays the floors for any discrete env (CartPole here: no Procgen), read from the
    run's config.yaml alone; an env whose action space no floor plays in (MultiDiscrete) is said in one line
    and left without them, the other env's floors kept (before: a traceback after every run had finished)."""
    from types import SimpleNamespace

    from evo.study.fresh import NoFloors
    from evo.study.reporting import collect_floors
    from evo.study.spec import Fresh, Study

    runs = []
    for env_id in ("CartPole-v1", "tests.alternate_env:Pairs-v0"):
        run_dir = tmp_path / env_id.replace(":", "-")
        run_dir.mkdir()
        (run_dir / "config.yaml").write_text(f"env_id: {env_id}\nseed: 5\n")
        runs.append(SimpleNamespace(job=SimpleNamespace(env_id=env_id, mpi=True, seed=5, run_dir=run_dir)))
    with pytest.raises(NoFloors, match=r"^fresh.floors: tests.alternate_env:Pairs-v0's action space MultiDiscrete"):
        floors(runs[1].job.run_dir, 2, None, tmp_path / "pairs.json")
    envs = tuple(run.job.env_id for run in runs)
    study = Study("floors", envs, {}, (5,), {}, tmp_path / "out", fresh=Fresh(episodes=2, floors=True))
    with caplog.at_level("WARNING"):
        found = collect_floors(study, runs)
    assert list(found) == ["CartPole-v1"] and found["CartPole-v1"][5].action in (0, 1)
    said = [r.getMessage() for r in caplog.records if "fresh.floors" in r.getMessage()]
    assert said == [
        "fresh.floors: tests.alternate_env:Pairs-v0's action space MultiDiscrete([2 2]) is neither discrete nor a "
        "box, so no floor can be played; its report has none (fresh.floors: false leaves them out without this "
        "warning)"
    ]


def test_a_runs_points_come_from_its_kept_checkpoints(run_dir):
    fresh = {1: reevaluated(run_dir, 3, generation=1, seed=5), 3: reevaluated(run_dir, 3, seed=5)}
    history = load_run(run_dir)
    job = Job("CartPole-v1", "pbt", 5, 1, (), run_dir, generations=3, members=4)
    found = points(job, history, fresh, (1 / 3, 1.0))
    assert [(p.generation, p.total_env_steps) for p in found] == [(1, 4 * 128), (3, 3 * 4 * 128)]
    last = found[-1]
    scores = {row.member: row.score for row in history.rows if row.generation == 3}
    assert scores[last.selected_member] == max(scores.values()) and last.selection_score == max(scores.values())
    assert last.selected == pytest.approx(np.mean(fresh[3].members[last.selected_member]))
    assert last.digest == fresh[3].digests[last.selected_member] is not None
    lineage = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    copied = {e["recipient"] for e in lineage if e.get("generation") == 3 and e["recipient"] != e["donor"]}
    assert set(last.copied) == copied
    others = [np.mean(fresh[3].members[m]) for m in range(4) if m not in copied]
    assert last.median_uncopied == pytest.approx(np.median(others))
    assert read_cache(cache_path(run_dir, 1)).members == fresh[1].members


def test_evo_evaluate_names_how_its_members_acted(run_dir, tmp_path, capsys):
    """evo-evaluate --actions: auto samples for Procgen only; sampled returns are drawn the same way twice
    and written with their name."""
    from evo.tools import evaluate as evaluate_tool

    assert evaluate_tool.deterministic_actions("auto", "CartPole-v1")
    assert not evaluate_tool.deterministic_actions("auto", "starpilot")
    assert not evaluate_tool.deterministic_actions("auto", "procgen:procgen-bigfish-v0")
    assert evaluate_tool.deterministic_actions("deterministic", "starpilot")
    records = []
    for name, actions in (("a", "sampled"), ("b", "sampled"), ("c", "auto")):
        flags = [str(run_dir), "--episodes", "4", "--envs", "2", "--actions", actions, "--json", str(tmp_path / name)]
        assert evaluate_tool.main(flags) == 0
        records.append(json.loads((tmp_path / name).read_text()))
    assert [r["actions"] for r in records] == ["sampled", "sampled", "deterministic"]
    assert records[0]["members"] == records[1]["members"] != records[2]["members"]
    assert "(sampled actions)" in capsys.readouterr().out

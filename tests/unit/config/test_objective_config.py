"""``--objective`` and env parameters (``env.<attribute>`` in a search space) at start-up (issue 38): what
they resolve to, and every bad input refused with its value and its fix, read from a probe env. Pure
(gymnasium only)."""

import pytest
import yaml

from evo.config import ConfigError, parse_config
from evo.config.resolved import explore_help
from evo.core.explorers import EXPLORERS
from evo.core.objective import Objective, Term
from tests.mirror_explorer import Mirror

EXAMPLE = ["--env-id", "evo.examples.shaped:ShapedCorridor-v0"]
OBJECTIVES = ["--env-id", "tests.objective_env:Objectives-v0"]


def parse(argv, tmp_path):
    return parse_config([*argv, "--run-dir", str(tmp_path / "run")])


def problems(argv, tmp_path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(argv, tmp_path)
    return caught.value.problems


def space(entries: str) -> list[str]:
    return ["--hyperparams", f"search_space:{{{entries}}}"]


def test_the_objective_resolves_and_a_resume_keeps_it(tmp_path):
    config = parse([*EXAMPLE, "--objective", "return, info:success:max"], tmp_path)
    assert config.objective == Objective((Term(), Term("success")))
    assert config.to_dict()["objective"] == "return,info:success"
    assert parse([], tmp_path / "default").objective == Objective()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict()))
    assert parse_config(["--resume", "--run-dir", str(run_dir)]).objective == config.objective
    refused = problems(["--resume", "--objective", "return"], tmp_path)
    assert refused == [
        "--resume: objective was 'return,info:success' in this run, the command gives 'return'; a run resumes with "
        "the same value (drop the flag to keep it)"
    ]


def test_every_bad_objective_is_refused_at_once(tmp_path):
    found = problems(["--objective", "retrun,info:x:lowest"], tmp_path)
    assert len(found) == 2
    assert "did you mean 'return'?" in found[0] and "the direction 'lowest' of info:x is not 'max' or 'min'" in found[1]


@pytest.mark.parametrize("explore", [name for name, explorer in EXPLORERS.items() if not explorer.several_objectives])
def test_several_objectives_are_refused_by_an_explorer_that_models_one_score(tmp_path, explore):
    found = problems([*EXAMPLE, "--objective", "return,info:success", "--explore", explore], tmp_path)
    assert found == [
        f"--objective return,info:success --explore {explore}: several objectives rank members by Pareto fronts, "
        f"and {explore} {EXPLORERS[explore].why_one_objective}; use --explore perturb, or give one objective (a "
        "weighted sum computed by the env and put in info is one)"
    ]
    assert "pb2" in EXPLORERS and not EXPLORERS["pb2"].several_objectives
    assert f"'{explore}': " in explore_help() and "not with several objectives" in explore_help()


def test_the_refusal_follows_the_explorer_s_declaration(tmp_path, monkeypatch):
    class Single(Mirror):
        name = "single"
        several_objectives = False
        why_one_objective = "its test mirror models one score"

    monkeypatch.setitem(EXPLORERS, "single", Single)
    found = problems([*EXAMPLE, "--objective", "return,info:success", "--explore", "single"], tmp_path)
    assert "single its test mirror models one score; use --explore perturb, or give one objective" in found[0]


def test_several_objectives_are_refused_with_stages(tmp_path):
    argv = [*EXAMPLE, "--objective", "return,info:success", "--max-distillations", "1"]
    found = problems([*argv, *space("pi_layers: {low: 1, high: 3, type: int}")], tmp_path)
    assert found == [
        "--objective return,info:success --max-distillations 1: a stage cuts its students by successive halving on "
        "one score; give one objective, or drop --max-distillations"
    ]


def test_a_key_no_probe_episode_reports_is_refused_naming_the_keys_they_did_and_the_fix(tmp_path):
    assert problems(["--objective", "info:is_success"], tmp_path) == [
        "--objective info:is_success: none of the 92 episodes of CartPole-v1 the probe played (2000 steps of random "
        "actions) ended with 'is_success' in its info as a finite number; the keys they reported: no key at all. Give "
        "one of those, or make the env put 'is_success' in info at the end of every episode (an env that reports it "
        "in only some episodes is scored on those)"
    ]
    found = problems([*EXAMPLE, "--objective", "return,info:succes,info:bonus:min"], tmp_path)
    assert len(found) == 1 and "ended with 'succes' in its info as a finite number" in found[0]
    assert "the keys they reported: bonus, bonus_weight, success, task_return" in found[0]
    assert parse([*EXAMPLE, "--objective", "info:success"], tmp_path).objective.info_keys == ("success",)


def test_a_key_some_episodes_report_passes_the_probe_one_only_nan_or_inf_does_not(tmp_path):
    """Issue 54 N10: the env's first episode (the one the probe played) lacks the key, its second has it; as
    the docs say, such an env is scored on the episodes that report the key (tests/unit/runner/
    test_objective_runs.py runs it). N6: a key that is NaN (or ±inf) in every episode is a key never reported."""
    sometimes = [*OBJECTIVES, "--env-kwargs", "odd_every:2", "--objective", "info:merit"]
    assert parse(sometimes, tmp_path).objective.info_keys == ("merit",)
    never = problems([*OBJECTIVES, "--env-kwargs", "odd_every:1", "--objective", "info:merit"], tmp_path)
    assert len(never) == 1 and "ended with 'merit' in its info as a finite number; the keys they reported: " in never[0]
    assert (
        "cost, weight. Give one of those, or make the env put 'merit' in info at the end of every episode" in never[0]
    )
    nan = problems([*OBJECTIVES, "--env-kwargs", "odd_every:1", "odd:nan", "--objective", "info:merit"], tmp_path)
    assert (
        len(nan) == 1 and "as a finite number (only as NaN or ±inf: 'merit'); the keys they reported: cost, " in nan[0]
    )


def test_procgen_takes_no_info_objective_and_no_env_parameter(tmp_path):
    found = problems(["--env-id", "bigfish", "--objective", "info:x", *space("env.x: {low: 0.1, high: 1.0}")], tmp_path)
    assert any("Procgen games take no env parameters" in p and "drop env.x from the search space" in p for p in found)
    assert any("evo's Procgen env passes no info on at an episode's end" in p for p in found)


def test_env_parameters_of_every_kind_resolve_with_the_env_s_values_as_defaults(tmp_path):
    entries = (
        "env.weight: {low: 0.1, high: 0.9}, env.cost: {choices: [0.25, 0.5, 0.75]}, "
        "env.length: {low: 2, high: 8, type: int}"
    )
    config = parse([*OBJECTIVES, *space(entries)], tmp_path)
    names = list(config.agent.search_space)
    assert names[-3:] == ["env.cost", "env.length", "env.weight"]  # after the learner's, by name
    assert config.explored_names[-3:] == ("env.cost", "env.length", "env.weight")
    assert config.agent.env_params == {"env.cost": 0.5, "env.length": 4, "env.weight": 0.5}
    assert config.agent.defaults["env.weight"] == 0.5
    assert set(config.agent.explored_space) >= {"env.cost", "env.length", "env.weight"}
    assert config.agent.to_dict()["env_params"] == config.agent.env_params
    defaults = parse([*OBJECTIVES, *space(entries), "--initial-hparams", "defaults"], tmp_path / "d")
    assert defaults.agent.env_params["env.weight"] == 0.5


def test_an_attribute_the_env_lacks_is_refused_with_its_name_and_the_env_s_class(tmp_path):
    found = problems(space("env.gravityy: {low: 9.0, high: 10.0}, env.reset: {low: 0.1, high: 1.0}"), tmp_path)
    assert found == [
        "search_space.env.gravityy: the env CartPole-v1 (its class CartPoleEnv "
        "(gymnasium.envs.classic_control.cartpole)) has no attribute 'gravityy'; an env parameter is an attribute "
        "the env reads as it steps (a reward weight, a curriculum setting): give one it has, or add it to the env",
        "search_space.env.reset: 'reset' of the env CartPole-v1 (its class CartPoleEnv "
        "(gymnasium.envs.classic_control.cartpole)) is a method, not a value; an env parameter is a number or a "
        "name the env reads as it steps",
    ]
    assert parse(space("env.gravity: {low: 9.0, high: 10.0}"), tmp_path).agent.env_params == {"env.gravity": 9.8}


def test_badly_written_env_entries_are_refused(tmp_path):
    found = problems(
        space("env._secret: {low: 0.1, high: 1.0}, env.gravity: {low: 9.0}, env.length: {choices: [2, x]}"),
        tmp_path,
    )
    assert len(found) == 3
    assert "'_secret' is not an env attribute's name" in found[0]
    assert "env.gravity needs both low and high" in found[1]
    assert "env.length.choices must all be numbers or all names" in found[2]


def test_with_initial_defaults_the_env_s_own_value_must_be_in_the_range(tmp_path):
    found = problems([*OBJECTIVES, *space("env.weight: {low: 0.6, high: 0.9}"), "--initial-hparams", "defaults"],
                     tmp_path)  # fmt: skip
    assert found == [
        "search_space.env.weight: with --initial-hparams defaults every member starts from the env's own value, 0.5, "
        "which is not in its search range [0.6, 0.9]; widen the range, or use --initial-hparams sample"
    ]
    assert parse([*OBJECTIVES, *space("env.weight: {low: 0.6, high: 0.9}")], tmp_path).agent.env_params


def test_a_schedule_may_give_env_parameters(tmp_path):
    schedule = tmp_path / "schedule.yml"
    hparams = {"learning_rate": 1e-3, "ent_coef": 0.0, "clip_range": 0.2, "gamma": 0.99, "gae_lambda": 0.95}
    entries = [{"env_steps": 0, "hparams": {**hparams, "vf_coef": 0.5, "env.weight": 0.2}},
               {"env_steps": 256, "hparams": {**hparams, "vf_coef": 0.5, "env.weight": 0.8}}]  # fmt: skip
    schedule.write_text(yaml.safe_dump({"env_id": OBJECTIVES[1], "schedule": entries}))
    argv = [*OBJECTIVES, *space("env.weight: {low: 0.1, high: 0.9}"), "--num-agents", "1", "--schedule", str(schedule)]
    config = parse(argv, tmp_path)
    assert [entry[1]["env.weight"] for entry in config.schedule] == [0.2, 0.8]
    assert "env.weight" in config.explored_names

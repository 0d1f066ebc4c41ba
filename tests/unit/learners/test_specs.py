"""The learners' declarations: each name in one place, each learner's names in its own files."""

import ast
import re
from pathlib import Path

import pytest
import yaml

from evo.config import ConfigError, builtin_hyperparams, parse_config
from evo.config.envnames import PROCGEN_GAMES
from evo.learners import DEFAULT_ALGO, Reach, algos, learner_spec, specs
from tests.support import ROOT, need_atari, need_mujoco

EVO = ROOT / "evo"


def own_files(algo: str) -> set[Path]:
    """A learner's own files: its declaration, its SB3 side and its YAML."""
    return {EVO / "learners" / f"{algo}.py", EVO / "sb3" / f"{algo}.py", EVO / "hyperparams" / f"{algo}.yml"}


def declared_names(algo: str) -> set[str]:
    spec = learner_spec(algo)
    return set(spec.by_name) | set(spec.policy_kwargs)


def specific_names() -> dict[str, set[str]]:
    """Each learner's names that no other learner declares."""
    found = {}
    for algo in algos():
        others = set().union(*(declared_names(other) for other in algos() if other != algo))
        found[algo] = declared_names(algo) - others
    return found


def mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def test_the_learners_are_found_by_their_files():
    assert algos()[0] == "ppo"
    assert set(algos()) == {"ppo", "a2c", "dqn", "qrdqn", "sac", "td3", "ddpg", "tqc", "crossq"}
    for algo in algos():
        assert all(path.is_file() for path in own_files(algo)), algo
        assert (ROOT / "hyperparams" / f"{algo}.yml").resolve() == builtin_hyperparams(algo)


def test_each_learner_has_names_of_its_own():
    specific = specific_names()
    assert {"clip_range", "n_epochs", "target_kl", "microbatch_size", "aug_coef"} <= specific["ppo"]
    assert {"use_rms_prop", "rms_prop_eps"} <= specific["a2c"]
    assert {"top_quantiles_to_drop_per_net"} <= specific["tqc"]
    assert {"batch_norm_momentum", "renorm_warmup_steps"} <= specific["crossq"]
    assert not specific["sac"]  # SAC's names are TQC's and CrossQ's too (evo/learners/entropy.py)
    assert "tau" not in specific["sac"] and "gamma" not in specific["ppo"]  # shared names are nobody's own
    assert "gae_lambda" not in specific["ppo"] and "ortho_init" not in specific["a2c"]  # PPO's and A2C's


def test_an_algorithm_specific_name_appears_only_in_its_learner_and_yaml():
    """Searched in every file under evo/: a name only one learner declares is written nowhere but
    in that learner's declaration, its SB3 side and its YAML file."""
    files = [path for path in sorted(EVO.rglob("*")) if path.is_file() and path.suffix in (".py", ".yml", ".yaml")]
    offending = []
    for algo, names in specific_names().items():
        for path in files:
            if path.resolve() in {p.resolve() for p in own_files(algo)}:
                continue
            text = path.read_text()
            offending += [
                f"{name} ({algo}) in {path.relative_to(ROOT)}" for name in sorted(names) if mentions(text, name)
            ]
    assert not offending, "algorithm-specific names outside their learner:\n  " + "\n  ".join(offending)


def quoted_names(source: str) -> list[tuple[int, str]]:
    """The string constants of ``source`` that are not docstrings, with their lines."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_a_learner_s_name_is_written_once_in_evo_s_code():
    """A learner's name as a string in evo's code is its declaration's ``name=`` only; the default learner (the
    fallback of a record that names none) is DEFAULT_ALGO, declared once (issue 57: ``"ppo"`` was written in
    five modules)."""
    declared = {EVO / "learners" / f"{algo}.py": algo for algo in algos()}
    found = []
    for path in sorted(EVO.rglob("*.py")):
        found += [
            (str(path.relative_to(ROOT)), value, line)
            for line, value in quoted_names(path.read_text())
            if value in algos() and declared.get(path) != value
        ]
    assert [(path, value) for path, value, _ in found] == [("evo/learners/__init__.py", "ppo")], found  # DEFAULT_ALGO
    assert DEFAULT_ALGO == algos()[0] == "ppo"


def test_the_name_search_would_see_one(tmp_path):
    assert mentions("model.gae_lambda = 0.9", "gae_lambda")
    assert not mentions("model.gae_lambda_old = 0.9", "gae_lambda")
    assert not mentions("vf_coefficient", "vf_coef")


def test_a_setting_is_declared_once_with_a_reason_when_it_cannot_be_tuned():
    for algo, spec in specs().items():
        names = [setting.name for setting in spec.settings]
        assert len(names) == len(set(names)), algo
        for setting in spec.settings:
            assert setting.help, (algo, setting.name)
            if setting.reach is Reach.CONSTRUCTION:
                assert setting.why_fixed, (algo, setting.name)
            if setting.may_be_off:
                assert setting.default is None or setting.reach is not Reach.CONSTRUCTION


def test_every_key_of_the_builtin_yaml_files_is_declared():
    for algo, spec in specs().items():
        data = yaml.safe_load(builtin_hyperparams(algo).read_text())
        for block, settings in data.items():
            assert isinstance(settings, dict), (algo, block)
            explored = settings.get("search_space") or {}
            space = {name for name in explored if not name.startswith("env.")}  # env parameters are the env's
            assert space <= set(spec.tunable), (algo, block, space - set(spec.tunable))


def blocks(algo: str) -> list[str]:
    data = yaml.safe_load(builtin_hyperparams(algo).read_text())
    return [name for name in data if name != "default" and not name.startswith("procgen")]


@pytest.mark.parametrize("algo, env_id", [(algo, env) for algo in algos() for env in blocks(algo)])
def test_every_env_block_of_the_builtin_yaml_resolves(algo, env_id):
    """Each env's tuned settings resolve into a valid configuration (MuJoCo's need the extra; the ``atari``
    block, on a game, the atari extra: one member, as a DQN member's replay buffer takes 5.6 GB)."""
    members = []
    if env_id == "atari":
        need_atari()
        env_id, members = "ALE/Pong-v5", ["--num-agents", "1"]
    elif env_id not in PROCGEN_GAMES and "-v5" in env_id:
        need_mujoco()
    try:
        config = parse_config(["--algo", algo, "--env-id", env_id, *members], check_run_dir=False)
    except ConfigError as error:
        pytest.fail(f"{algo} {env_id}: {error}")
    assert config.agent.algo == algo and config.agent.search_space
    assert config.explored_names == tuple(config.agent.search_space)

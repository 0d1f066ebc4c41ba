"""A learner of your own (``--algo package.module:ClassName``, evo/learners/__init__.py): the worked example
docs/examples/trpo_learner.py (sb3-contrib's TRPO) is found by its ``--algo`` text, its settings and YAML
file checked as evo's own learners' are, its values reach the update, and its state moves bit for bit at an
exploit and through a checkpoint; what is not a learner is refused at start-up, saying why and what to do.
Under real MPI, with PBT: tests/e2e/test_own_learner.py."""

import io
import logging

import pytest
import torch

from evo.config import ConfigError, parse_config
from evo.learners import algos, learner_spec, user_learner
from evo.learners.interface import Learner, learner_methods
from evo.rundir import checkpoint as ckpt
from evo.sb3 import learner as learner_module
from evo.sb3.flat import is_bound
from evo.sb3.learner import SB3Learner, learner_class
from tests.support import ROOT, member_of
from tests.unit.sb3.offpolicy import checkpoint_payload_of, train_alike

EXAMPLES = ROOT / "docs" / "examples"
TRPO = "trpo_learner:TRPOLearner"
TINY = ["--hyperparams", "n_steps:32", "batch_size:32", "policy_kwargs:{net_arch: [16, 16]}"]


@pytest.fixture(autouse=True)
def examples_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # as PYTHONPATH=docs/examples gives every rank


def problems(argv) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse_config(argv, check_run_dir=False)
    return refused.value.problems


def test_the_example_is_found_by_its_algo_text_and_declares_what_a_run_needs():
    cls, spec = user_learner(TRPO)
    assert learner_class(TRPO) is cls and issubclass(cls, SB3Learner)
    assert spec.name == TRPO and learner_spec(TRPO) is spec  # the records name it so, --resume finds it so
    assert TRPO not in algos()  # not a built-in: nothing in evo lists it
    assert [s.name for s in spec.settings] == [s.name for s in cls.spec.settings]  # the architecture's once
    assert all(hasattr(cls, name) for name in learner_methods())
    assert {"train", "evaluate", "exploit_state", "load", "member_state", "restore", "set_tensorboard"} <= set(
        learner_methods()
    )
    config = parse_config(["--algo", TRPO, "--env-id", "Pendulum-v1"], check_run_dir=False)
    assert config.agent.algo == TRPO and config.agent.settings["gamma"] == 0.9  # its YAML's Pendulum block
    assert list(config.agent.search_space) == ["learning_rate", "gamma", "gae_lambda", "target_kl", "n_critic_updates"]


def test_its_settings_are_checked_as_evos_own_learners_are():
    (problem,) = problems(["--algo", TRPO, "--hyperparams", "target_kl:-0.1"])
    assert problem.startswith("target_kl (--hyperparams) is -0.1; it must be > 0")
    (problem,) = problems(["--algo", TRPO, "--hyperparams", "n_epochs:3"])
    assert "'n_epochs' is a setting of PPO (--algo ppo), not of TRPO" in problem
    (problem,) = problems(["--algo", TRPO, "--hyperparams", "search_space:{n_steps: {low: 64, high: 512}}"])
    assert "n_steps cannot be explored: it sizes the rollout buffer" in problem


def test_its_values_reach_the_model_and_its_state_moves_bit_for_bit(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(learner_module, "_SAID_REPLACED", set())  # nothing said before
    config = parse_config(["--algo", TRPO, "--env-id", "CartPole-v1", *TINY], check_run_dir=False)
    donor, recipient = member_of(config, 0), member_of(config, 1)
    assert isinstance(donor, Learner)
    donor.train(96)
    recipient.train(64)
    assert not is_bound(donor.model, donor.buffer)  # TRPO's line search assigned param.data
    with caplog.at_level(logging.WARNING, logger="evo.sb3.learner"):
        state = donor.exploit_state()
    assert not [r for r in caplog.records if r.name == "evo.sb3.learner"]  # declared: no warning (issue 57)
    assert is_bound(donor.model, donor.buffer)
    new = {**recipient.hparams, "target_kl": 0.03, "gae_lambda": 0.9, "n_critic_updates": 7, "learning_rate": 5e-4}
    recipient.load({name: array.copy() for name, array in state.items()}, new)
    assert recipient.pack().tobytes() == donor.pack().tobytes()  # policy, value function, Adam
    model = recipient.model
    assert (model.target_kl, model.n_critic_updates, model.rollout_buffer.gae_lambda) == (0.03, 7, 0.9)
    assert [group["lr"] for group in model.policy.optimizer.param_groups] == [5e-4]
    assert recipient.effective_hparams() == pytest.approx(new)

    recipient.scores.append(3.0)
    raw = ckpt.dump_payload(checkpoint_payload_of(recipient, "run-own", 1))
    assert torch.load(io.BytesIO(raw), weights_only=True)["algo"] == TRPO
    resumed = member_of(config, 1, env_seed=77)
    assert resumed.restore(torch.load(io.BytesIO(raw), weights_only=True)) is None
    train_alike(64, recipient, resumed)
    assert resumed.pack().tobytes() == recipient.pack().tobytes() and resumed.hparams == recipient.hparams


@pytest.mark.parametrize(
    ("algo", "message"),
    [
        ("no_such_module:Learner", "module 'no_such_module' does not import (ModuleNotFoundError"),
        (
            "tests.own_learners:HalfLerner",
            "module 'tests.own_learners' has no 'HalfLerner'; did you mean 'HalfLearner'?",
        ),
        ("tests.own_learners:NoSpec", "NoSpec is not a learner: a learner is a class with a class attribute spec"),
        ("tests.own_learners:SPEC", "SPEC is not a learner"),
        ("tests.own_learners:", "a learner of your own is named package.module:ClassName"),
    ],
    ids=["module-does-not-import", "no-such-class", "no-spec", "not-a-class", "no-class-name"],
)
def test_what_is_not_a_learner_is_refused_saying_why(algo, message):
    (problem,) = problems(["--algo", algo])
    assert problem.startswith(f"--algo {algo}: ") and message in problem, problem


def test_a_learner_lacking_methods_a_run_calls_is_refused_naming_them():
    (problem,) = problems(["--algo", "tests.own_learners:HalfLearner"])
    lacking = [name for name in learner_methods() if name not in ("train", "close")]
    assert f"HalfLearner lacks {', '.join(lacking)}, which a run calls" in problem
    assert "evaluate" in lacking and "member_state" in lacking and "set_hparams" in lacking
    assert "subclass evo.sb3.learner.SB3Learner" in problem


def test_an_unknown_name_suggests_the_closest_learner():
    (problem,) = problems(["--algo", "crosq"])
    assert problem.startswith("--algo crosq: no such learner; did you mean 'crossq'? use one of ppo, a2c,")
    assert "package.module:ClassName (docs/examples/trpo_learner.py)" in problem


def test_its_export_is_named_as_rl_zoo3_names_its_algorithm():
    """The export's folder and its enjoy line name the algorithm as rl_zoo3 does (``--algo trpo``), not by the
    learner's module text, which zoo's enjoy refuses (the learning table's replay of TRPO found it)."""
    from evo.sb3.stock import zoo_algo

    assert zoo_algo(TRPO) == "trpo" and zoo_algo("qrdqn") == "qrdqn"

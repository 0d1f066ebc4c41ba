"""EagerAdam and EagerRMSprop (evo/sb3/optimizer.py): torch's Adam and RMSprop bit for bit, with or
without torch._dynamo imported; evo's policies use them in place of SB3's default Adam (PPO's, and all
three of SAC's optimizers) and A2C's RMSprop. That a whole evo run and its resume never import torch._dynamo
on any rank: tests/e2e/test_resilience.py::test_an_evo_run_and_its_resume_never_import_dynamo."""

import copy
import importlib

import pytest
import torch
from torch import nn

import evo.sb3.optimizer as optimizer_module
from evo.sb3.optimizer import EagerAdam, EagerRMSprop, stock_optimizer


def network(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    data = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(32, 6, generator=data), torch.randn(32, 3, generator=data)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def same_state(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> bool:
    state_a, state_b = a.state_dict(), b.state_dict()
    if state_a["param_groups"] != state_b["param_groups"] or state_a["state"].keys() != state_b["state"].keys():
        return False
    return all(
        torch.equal(state_a["state"][index][key], state_b["state"][index][key])
        for index in state_a["state"]
        for key in state_a["state"][index]
    )


SETTINGS = {
    "adam-sb3-default": (EagerAdam, {"lr": 3e-3, "eps": 1e-5}),
    "adam-amsgrad-decay": (EagerAdam, {"lr": 1e-3, "weight_decay": 0.01, "amsgrad": True}),
    "adam-single-tensor": (EagerAdam, {"lr": 1e-3, "foreach": False}),
    "rmsprop-a2c": (EagerRMSprop, {"lr": 7e-4, "alpha": 0.99, "eps": 1e-5, "weight_decay": 0}),  # SB3's A2C
    "rmsprop-centered-momentum": (EagerRMSprop, {"lr": 1e-3, "centered": True, "momentum": 0.9}),
}


@pytest.mark.parametrize("dynamo", [False, True], ids=["without-dynamo", "dynamo-imported"])
@pytest.mark.parametrize(("eager", "settings"), list(SETTINGS.values()), ids=list(SETTINGS))
def test_an_eager_optimizer_computes_what_torchs_computes(monkeypatch, dynamo, eager, settings):
    """The same parameters and state bit for bit after 25 steps, then after a state copied from
    torch's optimizer into the eager one and 5 more steps each (as a member's resume or exploit does)."""
    if dynamo:
        importlib.import_module("torch._dynamo")  # the wrappers' own path: torch.compile could be tracing
    monkeypatch.setattr(optimizer_module, "dynamo_imported", lambda: dynamo)
    torch_class = stock_optimizer(eager)
    assert torch_class is not eager and torch_class.__module__.startswith("torch.optim")
    ours, theirs = network(0), network(0)
    ours_optimizer = eager(ours.parameters(), **settings)
    theirs_optimizer = torch_class(theirs.parameters(), **settings)
    train(ours, ours_optimizer, 25, seed=1)
    train(theirs, theirs_optimizer, 25, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters(), strict=True))
    assert same_state(ours_optimizer, theirs_optimizer)
    assert all(p.grad is not None for p in ours.parameters())  # the last step's gradients stay
    ours_optimizer.zero_grad()
    assert all(p.grad is None for p in ours.parameters())

    other = network(5)
    other_optimizer = eager(other.parameters(), **settings)
    other.load_state_dict(theirs.state_dict())
    other_optimizer.load_state_dict(copy.deepcopy(theirs_optimizer.state_dict()))  # not its tensors themselves
    train(other, other_optimizer, 5, seed=2)
    train(theirs, theirs_optimizer, 5, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(other.parameters(), theirs.parameters(), strict=True))
    assert same_state(other_optimizer, theirs_optimizer)


def test_a_step_under_grad_mode_changes_nothing_autograd_sees(monkeypatch):
    """Adam's wrapper steps without grad (differentiable=False); EagerAdam's step does too,
    even when the caller has grad enabled."""
    monkeypatch.setattr(optimizer_module, "dynamo_imported", lambda: False)  # its own step, not torch's wrapper
    model = network(0)
    optimizer = EagerAdam(model.parameters(), lr=1e-2)
    train(model, optimizer, 1, seed=0)
    with torch.enable_grad():
        optimizer.step()
    assert all(p.grad_fn is None and p.is_leaf for p in model.parameters())


def test_evo_policies_get_eager_adam_with_sb3s_eps_and_keep_any_other_optimizer():
    import gymnasium as gym

    from evo.sb3.policies import MixedPrecisionPolicy

    space, actions = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    default = MixedPrecisionPolicy(space, actions, lambda _: 1e-3)
    assert type(default.optimizer) is EagerAdam and default.optimizer.defaults["eps"] == 1e-5
    assert default.optimizer_class is EagerAdam  # what SB3 saves with the policy
    given = MixedPrecisionPolicy(space, actions, lambda _: 1e-3, optimizer_kwargs={"betas": (0.8, 0.9)})
    assert type(given.optimizer) is EagerAdam
    assert given.optimizer.defaults["eps"] == 1e-8 and given.optimizer.defaults["betas"] == (0.8, 0.9)  # SB3's rule
    other = MixedPrecisionPolicy(space, actions, lambda _: 1e-3, optimizer_class=torch.optim.RMSprop)
    assert type(other.optimizer) is torch.optim.RMSprop


def test_every_sac_optimizer_is_eager_adam():
    """SAC's actor and critic optimizers (the policy's optimizer_class) and the entropy coefficient's
    optimizer (which SB3 builds as torch's Adam), at SB3's learning rate."""
    from evo.config import parse_config
    from evo.runner.session import member_factory
    from evo.sb3.flat import named_state

    config = parse_config(
        ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:50", "buffer_size:2000"],
        check_run_dir=False,
    )
    member = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
    model = member.model
    optimizers = [model.actor.optimizer, model.critic.optimizer, model.ent_coef_optimizer]
    assert all(type(optimizer) is EagerAdam for optimizer in optimizers)
    assert named_state(model)[1] == optimizers
    assert model.ent_coef_optimizer.param_groups[0]["params"] == [model.log_ent_coef]
    assert all(optimizer.param_groups[0]["lr"] == config.agent.defaults["learning_rate"] for optimizer in optimizers)
    member.close()

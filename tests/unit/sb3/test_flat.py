"""A member's state as one flat buffer (evo/sb3/flat.py), on a real PPO member: each tensor once, the
model's tensors views of the buffer, and bound again when something replaced one; and, on a network with
an int64 buffer, any optimizer's state (Adam, RMSprop, SB3's RMSpropTFLike) created as its first step
creates it and every dtype moved bit for bit."""

import logging

import numpy as np
import pytest
import torch
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
from torch import nn

from evo.config import parse_config
from evo.sb3 import learner as learner_module
from evo.sb3.flat import bind_flat, flat_size, is_bound, offsets, pack, state_tensors, unpack
from tests.support import member_of, write_hyperparams


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    hp = write_hyperparams(tmp_path_factory.mktemp("hp"))
    return parse_config(["--hyperparams", str(hp)], check_run_dir=False)


def test_flat_layout_counts_each_tensor_once(config):
    member = member_of(config, 0)
    params = sum(p.numel() for p in member.model.policy.parameters())
    count = len(list(member.model.policy.parameters()))
    assert flat_size(member.model) == 3 * params + count  # weights + exp_avg + exp_avg_sq + steps
    assert member.buffer.dtype == np.float32 and member.buffer.size == flat_size(member.model)


def test_flat_buffer_is_the_model_zero_copy(config):
    member = member_of(config, 0)
    member.train(256)  # Adam steps, optimizer state updated in place
    assert is_bound(member.model, member.buffer)
    assert member.pack() is member.buffer
    first = next(member.model.policy.parameters())
    before = first.detach().clone()
    member.buffer[0] += 1.0  # writing the buffer (as MPI Recv does) changes the model itself
    assert first.detach().view(-1)[0] == before.view(-1)[0] + 1.0
    assert float(member.model.policy.optimizer.state[first]["step"]) > 0


def test_rebinding_after_a_replaced_tensor(config, caplog, monkeypatch):
    """Rebound at each pack, and said once per process with what it means (issue 57: a warning at every exploit
    that did not say whether anything was wrong)."""
    monkeypatch.setattr(learner_module, "_SAID_REPLACED", set(), raising=False)  # nothing said before
    member = member_of(config, 0)
    for _ in range(2):
        first = next(member.model.policy.parameters())
        first.data = first.data.clone() + 0.5  # something replaced a tensor behind our back
        assert not is_bound(member.model, member.buffer)
        with caplog.at_level(logging.WARNING, logger="evo.sb3.learner"):
            packed = member.pack()  # rebinds, so what is sent is the model's current state
        assert is_bound(member.model, member.buffer)
        assert torch.equal(torch.from_numpy(packed[: first.numel()]).view(first.shape), first.detach())
    (said,) = [record.getMessage() for record in caplog.records if record.name == "evo.sb3.learner"]
    assert "PPOLearner's update put new tensors in place of the model's state" in said
    assert "so what moves is right" in said and "replaces_tensors = True" in said


# --- any optimizer, any dtype: on a stand-in for an SB3 model (a network and its optimizer) ---------------


class Counted(nn.Module):
    """A network with an int64 buffer that its forward counts up in place (as CrossQ's batch renorm does)."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(5, 7), nn.Linear(7, 3)
        self.register_buffer("scale", torch.ones(3))
        self.register_buffer("calls", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        self.calls += 1
        return self.second(torch.tanh(self.first(x))) * self.scale


class Holder:
    """What flat.py asks of an SB3 model: ``_get_torch_save_params`` naming a module and its optimizer."""

    def __init__(self, optimizer_class, seed=0, **settings):
        torch.manual_seed(seed)
        self.net = Counted()
        self.net.optimizer = optimizer_class(self.net.parameters(), **settings)

    def _get_torch_save_params(self):
        return ["net", "net.optimizer"], []


def fit(holder, steps, seed):
    data = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(16, 5, generator=data), torch.randn(16, 3, generator=data)
        holder.net.optimizer.zero_grad()
        nn.functional.mse_loss(holder.net(x), y).backward()
        holder.net.optimizer.step()


OPTIMIZERS = {
    "adam": (torch.optim.Adam, {"lr": 1e-2}, ["step", "exp_avg", "exp_avg_sq"], 0.0),
    "rmsprop": (torch.optim.RMSprop, {"lr": 1e-2, "alpha": 0.99, "eps": 1e-5}, ["step", "square_avg"], 0.0),
    "rmsprop-centered": (torch.optim.RMSprop, {"lr": 1e-2, "centered": True, "momentum": 0.9}, None, 0.0),
    "rmsprop-tf-like": (RMSpropTFLike, {"lr": 1e-2, "eps": 1e-5}, ["step", "square_avg"], 1.0),  # zoo's Atari A2C
}


@pytest.mark.parametrize(("optimizer_class", "settings", "keys", "square_start"), OPTIMIZERS.values(), ids=OPTIMIZERS)
def test_any_optimizers_state_is_created_as_its_first_step_creates_it_and_lives_in_the_buffer(
    optimizer_class, settings, keys, square_start
):
    """The state evo creates up front is the optimizer's own (its keys in its order, its initial values:
    RMSpropTFLike starts its square average at 1, torch's at 0; an int step count as an int64 tensor), so
    a member trained from it is bit for bit the member whose optimizer created its state lazily, and
    the int64 buffer and every state tensor are views of the flat buffer, moved bit for bit by pack/unpack."""
    bound, lazy = Holder(optimizer_class, **settings), Holder(optimizer_class, **settings)
    flat = bind_flat(bound)
    params = list(bound.net.parameters())
    state = bound.net.optimizer.state[params[0]]
    if keys is not None:
        assert list(state) == keys
    assert float(state["step"]) == 0
    assert ("square_avg" in state) is (optimizer_class is not torch.optim.Adam)
    assert "square_avg" not in state or torch.all(state["square_avg"] == square_start)
    tensors = state_tensors(bound)
    assert is_bound(bound, flat) and flat.size == flat_size(bound)
    assert {t.dtype for t in tensors} >= {torch.float32, torch.int64}

    fit(bound, 12, seed=1)
    fit(lazy, 12, seed=1)
    assert is_bound(bound, flat)  # the updates ran in place, the int64 count included
    assert int(bound.net.calls) == 12 and bound.net.calls.data_ptr() in {t.data_ptr() for t in tensors}
    assert all(torch.equal(a, b) for a, b in zip(bound.net.parameters(), lazy.net.parameters(), strict=True))
    lazy_state = lazy.net.optimizer.state
    for mine, theirs in zip(params, lazy.net.parameters(), strict=True):
        assert list(bound.net.optimizer.state[mine]) == list(lazy_state[theirs])
        for key, value in lazy_state[theirs].items():
            assert torch.equal(
                torch.as_tensor(value), bound.net.optimizer.state[mine][key].to(torch.as_tensor(value).dtype)
            )

    other = Holder(optimizer_class, seed=3, **settings)
    other_flat = bind_flat(other)
    assert not np.array_equal(other_flat, flat)
    unpack(other, flat.copy())  # a donor's state into a recipient
    assert other_flat.tobytes() == flat.tobytes() and int(other.net.calls) == 12
    assert pack(other, np.empty_like(flat)).tobytes() == flat.tobytes()
    fit(bound, 3, seed=2)
    fit(other, 3, seed=2)
    assert other_flat.tobytes() == flat.tobytes()


def test_a_tensor_wider_than_a_word_starts_at_a_multiple_of_its_size():
    """float32 tensors lie back to back; an int64 one after an odd number of words skips one."""
    tensors = [torch.zeros(3), torch.tensor(5, dtype=torch.long), torch.zeros(2), torch.zeros(1, dtype=torch.int8)]
    starts, total = offsets(tensors)
    assert starts == [0, 4, 6, 8] and total == 9

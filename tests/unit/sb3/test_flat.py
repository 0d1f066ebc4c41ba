"""A member's state as one flat buffer (evo/sb3/flat.py), on a real PPO member: each tensor once, the
model's tensors views of the buffer, and bound again when something replaced one."""

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.sb3.flat import flat_size, is_bound
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


def test_rebinding_after_a_replaced_tensor(config):
    member = member_of(config, 0)
    first = next(member.model.policy.parameters())
    first.data = first.data.clone() + 0.5  # something replaced a tensor behind our back
    assert not is_bound(member.model, member.buffer)
    packed = member.pack()  # rebinds, so what is sent is the model's current state
    assert is_bound(member.model, member.buffer)
    assert torch.equal(torch.from_numpy(packed[: first.numel()]).view(first.shape), first.detach())

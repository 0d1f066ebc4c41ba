"""A member whose state lives on a device (``--device cuda``) travels through a host copy: the exchange, the
checkpoints and the export read host memory only. On a CPU-only machine the same code runs with the member's
flat state in a tensor of its own (``staged``, forced), so every path that a GPU member takes is checked here
bit for bit; tests/unit/sb3/test_device_gpu.py runs them on a real GPU (the device check)."""

import dataclasses

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.runner.session import member_factory
from evo.sb3.flat import is_bound, pack
from tests.support import member_of, write_hyperparams

SPACE = "default:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n  search_space:\n    learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}\n    pi_layers: {low: 1, high: 3, type: int}\n"  # noqa: E501


@pytest.fixture
def config(tmp_path):
    return parse_config(
        ["--hyperparams", str(write_hyperparams(tmp_path, SPACE)), "--tb-writer", "False"], check_run_dir=False
    )


def staged_member(config, member_id, hparams=None):
    """A member built as a GPU member is (its state in a flat tensor of its own, a host copy that travels)."""
    factory = member_factory(config)
    factory = dataclasses.replace(factory, setup=dataclasses.replace(factory.setup, stage_state=True))
    return factory.make(member_id, {**config.agent.defaults, **(hparams or {})}, tensorboard=False)


def device_state(member) -> np.ndarray:
    """What the model's tensors hold now, read from them (not from any buffer)."""
    return pack(member.model, np.empty_like(member.buffer)).copy()


def test_a_staged_member_binds_its_model_to_its_own_flat_tensor_and_travels_by_a_host_copy(config):
    member = staged_member(config, 0)
    assert member.flat is not None and is_bound(member.model, member.flat)
    assert member.flat.data_ptr() != member.buffer.ctypes.data  # two memories: the device's and the host's
    member.train(128)
    state = member.exploit_state()
    assert all(isinstance(array, np.ndarray) for array in state.values())  # the exchange reads host memory only
    assert np.array_equal(state["weights"], member.flat.numpy()) and np.array_equal(
        state["weights"], device_state(member)
    )
    member.close()


@pytest.mark.parametrize("donor_staged", [True, False], ids=["device-to-cpu", "cpu-to-device"])
def test_an_exploit_between_a_staged_member_and_a_cpu_member_is_bit_exact(config, donor_staged):
    build = {True: lambda m: staged_member(config, m), False: lambda m: member_of(config, m)}
    donor, recipient = build[donor_staged](0), build[not donor_staged](1)
    donor.train(128)
    recipient.train(64)
    sent = {name: array.copy() for name, array in donor.exploit_state().items()}
    received = recipient.receive_buffers(tuple((n, a.dtype.str, a.shape) for n, a in sent.items()))
    for name, array in sent.items():
        np.copyto(received[name], array)
    recipient.load(received, donor.hparams)
    assert np.array_equal(device_state(recipient), sent["weights"])  # in the model's own tensors
    assert np.array_equal(recipient.pack(), sent["weights"])
    if recipient.flat is not None:
        assert is_bound(recipient.model, recipient.flat)
    recipient.train(64)  # and it trains on from there
    assert not np.array_equal(recipient.pack(), sent["weights"])
    donor.close()
    recipient.close()


def test_a_staged_members_checkpoint_restores_on_the_cpu_and_the_reverse(config):
    staged, plain = staged_member(config, 0), member_of(config, 0)
    staged.train(128)
    plain.restore(staged.member_state())
    assert np.array_equal(plain.pack(), staged.pack())
    plain.train(64)
    again = staged_member(config, 0)
    again.restore(plain.member_state())
    assert np.array_equal(device_state(again), plain.pack()) and again.flat is not None
    for member in (staged, plain, again):
        member.close()


def test_a_staged_recipient_of_another_architecture_rebuilds_on_its_device(config):
    donor = member_of(config, 0, {"pi_layers": 3})
    recipient = staged_member(config, 1, {"pi_layers": 1})
    donor.train(64)
    state = {name: array.copy() for name, array in donor.exploit_state().items()}
    received = recipient.receive_buffers(tuple((n, a.dtype.str, a.shape) for n, a in state.items()))
    for name, array in state.items():
        np.copyto(received[name], array)
    recipient.load(received, donor.hparams)
    assert recipient.architecture == donor.architecture and recipient.flat is not None
    assert is_bound(recipient.model, recipient.flat) and np.array_equal(device_state(recipient), state["weights"])
    assert all(t.device == recipient.device for t in recipient.model.policy.parameters())
    donor.close()
    recipient.close()


def test_members_are_built_on_their_setups_device(config):
    member = member_of(config, 0)
    assert member.device == torch.device("cpu") and member.flat is None  # the default: nothing changes
    assert {p.device.type for p in member.model.policy.parameters()} == {"cpu"}
    member.close()

"""GPU members on a real GPU (marker ``gpu``; skipped, with the reason, where torch sees no CUDA device): a
member built on the GPU holds its networks and optimizer state there, an exploit between a GPU member and a
CPU member is bit-exact both ways, a checkpoint written on one resumes on the other, bf16 runs through CUDA's
autocast. scripts/device-check.sh runs these on the device machine."""

import dataclasses

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.runner.session import member_factory
from tests.support import write_hyperparams

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device check runs it)"),
]


@pytest.fixture
def config(tmp_path):
    return parse_config(
        ["--hyperparams", str(write_hyperparams(tmp_path)), "--tb-writer", "False"], check_run_dir=False
    )


def member(config, member_id: int, device: str, precision: str = "fp32"):
    factory = member_factory(config, device)
    factory = dataclasses.replace(factory, setup=dataclasses.replace(factory.setup, precision=precision))
    return factory.make(member_id, config.agent.defaults, tensorboard=False)


def copy_into(recipient, donor) -> np.ndarray:
    sent = {name: array.copy() for name, array in donor.exploit_state().items()}
    received = recipient.receive_buffers(tuple((n, a.dtype.str, a.shape) for n, a in sent.items()))
    for name, array in sent.items():
        np.copyto(received[name], array)
    recipient.load(received, donor.hparams)
    return sent["weights"]


def test_a_gpu_member_holds_its_state_on_the_gpu(config):
    gpu = member(config, 0, "cuda:0")
    assert {p.device.type for p in gpu.model.policy.parameters()} == {"cuda"}
    assert gpu.flat.is_cuda and all(
        t.is_cuda for state in gpu.model.policy.optimizer.state.values() for t in state.values()
    )
    gpu.train(256)
    assert np.array_equal(gpu.pack(), gpu.flat.cpu().numpy())
    gpu.close()


@pytest.mark.parametrize("donor_device", ["cuda:0", "cpu"])
def test_an_exploit_between_a_gpu_and_a_cpu_member_is_bit_exact(config, donor_device):
    recipient_device = "cpu" if donor_device != "cpu" else "cuda:0"
    donor, recipient = member(config, 0, donor_device), member(config, 1, recipient_device)
    donor.train(256)
    sent = copy_into(recipient, donor)
    assert np.array_equal(recipient.pack(), sent)
    recipient.train(128)  # it trains on from the donor's state, on its own device
    donor.close()
    recipient.close()


def test_a_checkpoint_written_on_the_gpu_resumes_on_the_cpu_and_the_reverse(config):
    gpu, cpu = member(config, 0, "cuda:0"), member(config, 0, "cpu")
    gpu.train(256)
    cpu.restore(gpu.member_state())
    assert np.array_equal(cpu.pack(), gpu.pack())
    cpu.train(128)
    back = member(config, 0, "cuda:0")
    back.restore(cpu.member_state())
    assert np.array_equal(back.pack(), cpu.pack()) and back.flat.is_cuda
    for each in (gpu, cpu, back):
        each.close()


def test_bf16_runs_through_cudas_autocast(config):
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16 arithmetic")
    gpu = member(config, 0, "cuda:0", precision="bf16")
    gpu.train(256)
    assert np.isfinite(gpu.pack()).all()
    gpu.close()


def test_sampled_evaluation_on_the_gpu_leaves_its_generators_alone_and_repeats(tmp_path):
    """--eval-actions sampled on a GPU member: the CPU's and the GPU's generators are as before the
    evaluation, and the same member after as many env steps plays the same sampled actions."""
    flags = ["--hyperparams", str(write_hyperparams(tmp_path)), "--tb-writer", "False", "--eval-episodes", "4"]
    config = parse_config([*flags, "--eval-actions", "sampled"], check_run_dir=False)
    scores = []
    for _ in range(2):
        gpu = member(config, 0, "cuda")
        gpu.train(256)
        before = torch.get_rng_state(), torch.cuda.get_rng_state()
        scores.append(gpu.test_score())
        assert torch.equal(torch.get_rng_state(), before[0]) and torch.equal(torch.cuda.get_rng_state(), before[1])
        gpu.close()
    assert scores[0] == scores[1]

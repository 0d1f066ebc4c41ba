"""The counts and limits a search space may add reach PPO's next update: the number of epochs,
the minibatch size, the gradient-norm clip and the KL early stop, in SB3's train() and in evo's
microbatched one, also after an exploit (real SB3, real CartPole, no MPI)."""

import math

import pytest
import torch

from evo.config import parse_config
from tests.support import member_of, write_hyperparams

EXTRA = ("n_epochs", "batch_size", "n_minibatches", "max_grad_norm", "target_kl")
"""PPO's settings a search space may add to the six, in their declaration order."""
ROLLOUT = 2 * 64


@pytest.fixture(scope="module", params=[0, 8], ids=["sb3-train", "microbatched-train"])
def config(request, tmp_path_factory):
    hp = write_hyperparams(
        tmp_path_factory.mktemp("hp"),
        "CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n"
        f"  microbatch_size: {request.param}\n",
    )
    return parse_config(["--hyperparams", str(hp)], check_run_dir=False)


class Spy:
    """Counts what one train() does: optimizer steps, minibatch sizes, the clip norm it used."""

    def __init__(self, member, monkeypatch):
        self.steps, self.sizes, self.norms = 0, [], []
        model = member.model
        optimizer_step, buffer_get, clip = (
            model.policy.optimizer.step,
            model.rollout_buffer.get,
            torch.nn.utils.clip_grad_norm_,
        )

        def step(*args, **kwargs):
            self.steps += 1
            return optimizer_step(*args, **kwargs)

        def get(batch_size=None):
            for data in buffer_get(batch_size):
                self.sizes.append(len(data.advantages))
                yield data

        def clip_grad_norm(parameters, max_norm, *args, **kwargs):
            self.norms.append(max_norm)
            return clip(parameters, max_norm, *args, **kwargs)

        monkeypatch.setattr(model.policy.optimizer, "step", step)
        monkeypatch.setattr(model.rollout_buffer, "get", get)
        monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_grad_norm)
        self.updates_before = model._n_updates
        self.model = model

    @property
    def epochs(self) -> int:
        return self.model._n_updates - self.updates_before


def one_update(member, monkeypatch) -> Spy:
    spy = Spy(member, monkeypatch)
    member.train(ROLLOUT)  # one rollout, then one train()
    monkeypatch.undo()
    return spy


def test_the_extras_are_ppos_tunable_settings_in_their_record_order(config):
    spec = config.agent.spec
    assert spec.record_order(list(reversed(EXTRA))) == EXTRA
    assert all(name in spec.tunable for name in EXTRA)


@pytest.mark.parametrize(
    ("values", "epochs", "sizes"),
    [
        ({"n_epochs": 3, "n_minibatches": 4}, 3, [32] * 12),
        ({"n_epochs": 1, "batch_size": 64}, 1, [64, 64]),
        ({"n_epochs": 5, "n_minibatches": 1}, 5, [128] * 5),
    ],
)
def test_epochs_and_minibatches_take_effect_at_the_next_update(config, monkeypatch, values, epochs, sizes):
    member = member_of(config, 0)
    member.train(ROLLOUT)
    baseline = one_update(member, monkeypatch)
    assert (baseline.epochs, baseline.sizes) == (2, [64] * 4)  # the YAML's 2 epochs x 2 minibatches
    member.set_hparams({**member.hparams, **values, "max_grad_norm": 0.37, "target_kl": None})
    spy = one_update(member, monkeypatch)
    assert spy.epochs == epochs and spy.sizes == sizes and spy.steps == len(sizes)
    assert spy.norms == [0.37] * len(sizes)
    names = (*values, "max_grad_norm", "target_kl")
    assert member.effective_hparams(names) == {**values, "max_grad_norm": 0.37, "target_kl": None}


def test_target_kl_stops_the_update_early_and_off_never_does(config, monkeypatch):
    member = member_of(config, 0)
    member.train(ROLLOUT)
    member.set_hparams({**member.hparams, "n_epochs": 4, "n_minibatches": 4, "target_kl": 1e-12})
    strict = one_update(member, monkeypatch)
    # the first minibatch sees the rollout's own policy (KL 0) and steps; the next one's KL > 1.5e-12
    assert strict.steps == 1 and strict.epochs == 1 and strict.sizes == [32, 32]
    member.set_hparams({**member.hparams, "target_kl": math.inf})  # "off" as a format-1 checkpoint wrote it
    assert member.model.target_kl is None and member.hparams["target_kl"] is None
    member.set_hparams({**member.hparams, "target_kl": None})  # off
    assert member.model.target_kl is None and member.hparams["target_kl"] is None
    free = one_update(member, monkeypatch)
    assert free.steps == 16 and free.epochs == 4


def test_an_exploit_reapplies_the_recipients_counts_not_the_donors(config, monkeypatch):
    donor = member_of(config, 0, {**config.agent.defaults, "n_epochs": 7, "batch_size": 16})
    recipient = member_of(config, 1)
    donor.train(ROLLOUT)
    recipient.train(ROLLOUT)
    new = {**donor.hparams, "n_epochs": 3, "batch_size": 128, "max_grad_norm": 2.5, "target_kl": None}
    recipient.load({"weights": donor.pack().copy()}, new)
    assert recipient.hparams["n_epochs"] == 3 and isinstance(recipient.hparams["n_epochs"], int)
    spy = one_update(recipient, monkeypatch)
    assert (spy.epochs, spy.sizes, spy.norms) == (3, [128] * 3, [2.5] * 3)
    assert donor.effective_hparams(("n_epochs", "batch_size")) == {"n_epochs": 7, "batch_size": 16}

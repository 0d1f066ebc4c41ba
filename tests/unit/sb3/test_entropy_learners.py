"""TQC and CrossQ behind the learner interface (evo/sb3/tqc.py, crossq.py, entropy.py; real sb3-contrib,
real Pendulum, no MPI job): every tunable value reaches the next update, read where the update reads it
(the batches drawn, the gradient steps, the discount, TQC's target updates' τ, the target entropy and
TQC's dropped quantiles as the update reads them, CrossQ's delayed actor steps, every optimizer's rate);
CrossQ's batch-renormalisation statistics (an int64 step count among them) move with its weights. The
state's moves (exploit, checkpoint) for both: test_zoo_learners.py."""

import pytest
import sb3_contrib.tqc.tqc as contrib_tqc
import torch
from sb3_contrib import TQC, CrossQ

from evo.sb3.flat import state_tensors
from evo.sb3.optimizer import EagerAdam
from tests.support import member_of
from tests.unit.sb3 import offpolicy
from tests.unit.sb3.offpolicy import NEW_VALUES, OffPolicyUpdateSpy

NEW = {
    "tqc": {**NEW_VALUES, "target_entropy": -0.5, "top_quantiles_to_drop_per_net": 3},
    "crossq": {**{k: v for k, v in NEW_VALUES.items() if k != "tau"}, "target_entropy": -0.5, "policy_delay": 4},
}
READ = {"tqc": ("target_entropy", "top_quantiles_to_drop_per_net"), "crossq": ("target_entropy", "policy_delay")}
CLASSES = {"tqc": (contrib_tqc, TQC), "crossq": (None, CrossQ)}


def spy_class(algo):
    module, cls = CLASSES[algo]

    class UpdateSpy(OffPolicyUpdateSpy):
        """OffPolicyUpdateSpy's records, the values of READ[algo] each time the update reads them, and the
        update count at each actor step."""

        sb3_module, sb3_class = module, cls

        def __init__(self, member, monkeypatch):
            super().__init__(member, monkeypatch)
            model = member.model
            self.reads = {name: [] for name in READ[algo]}
            self.actor_steps = []
            step = model.actor.optimizer.step

            def recording_step(*args, **kwargs):
                self.actor_steps.append(model._n_updates)
                return step(*args, **kwargs)

            for name in READ[algo]:
                monkeypatch.setattr(cls, name, property(self.reader(name), self.writer(name)), raising=False)
            monkeypatch.setattr(model.actor.optimizer, "step", recording_step)

        def reader(self, name):
            def read(instance):
                if self.training:
                    self.reads[name].append(instance.__dict__[name])
                return instance.__dict__[name]

            return read

        def writer(self, name):
            def write(instance, value):
                instance.__dict__[name] = value

            return write

    return UpdateSpy


@pytest.mark.parametrize("algo", list(NEW))
def test_every_tunable_value_reaches_the_next_update(algo, monkeypatch):
    config = offpolicy.config_of(algo)
    spec = config.agent.spec
    assert set(NEW[algo]) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    assert isinstance(member.model, CLASSES[algo][1])
    member.train(100)
    assert member.model._n_updates == 50
    spy, rows = offpolicy.train_with_new_values(member, NEW[algo], spy_class(algo), monkeypatch)

    offpolicy.assert_collections_and_updates(member, spy)  # train_freq, gradient_steps, batch_size, gamma
    assert spy.reads["target_entropy"] and set(spy.reads["target_entropy"]) == {-0.5}
    if algo == "tqc":
        assert spy.taus == [0.02] * 12  # the target critics follow at every gradient step, with the new tau
        assert spy.reads["top_quantiles_to_drop_per_net"] == [3] * 12
    else:
        assert spy.taus == []  # CrossQ has no target networks
        assert spy.reads["policy_delay"] == [4] * 12
        assert len(spy.actor_steps) == 3 and all(n % 4 == 0 for n in spy.actor_steps)
    # learning_rate: the actor's, the critics' and the entropy coefficient's Adam (EagerAdam, each)
    assert all(type(optimizer) is EagerAdam for optimizer in offpolicy.optimizers(member))
    offpolicy.assert_new_values_in_effect(member, NEW[algo], rows, optimizer_count=3)


def test_crossqs_optimizers_keep_sb3_contribs_betas():
    member = member_of(offpolicy.config_of("crossq"), 0)
    actor, critic, entropy = offpolicy.optimizers(member)
    assert actor.defaults["betas"] == critic.defaults["betas"] == (0.5, 0.999)  # sb3-contrib's for CrossQ
    assert entropy.defaults["betas"] == (0.9, 0.999)  # the entropy coefficient's: torch's default, as sb3-contrib's
    member.close()


def test_crossqs_batch_renorm_statistics_move_with_its_weights():
    """Each batch-renormalisation layer's running mean, variance and int64 step count are views of the flat
    buffer, and a recipient takes the donor's, bit for bit."""
    config = offpolicy.config_of("crossq")
    donor, recipient = member_of(config, 0), member_of(config, 1)
    donor.train(90)
    recipient.train(60)
    counts = [b for b in donor.model.policy.buffers() if b.dtype == torch.int64]
    assert counts and all(int(count) > 0 for count in counts)  # the renorm layers stepped
    tensors = {t.data_ptr() for t in state_tensors(donor.model)}
    assert all(b.data_ptr() in tensors for b in donor.model.policy.buffers())
    recipient.load({"weights": donor.exploit_state()["weights"].copy()}, recipient.hparams)
    for mine, theirs in zip(recipient.model.policy.buffers(), donor.model.policy.buffers(), strict=True):
        assert mine.dtype == theirs.dtype and torch.equal(mine, theirs)

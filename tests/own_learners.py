"""Learners of one's own that are not complete, for the refusals of ``--algo package.module:ClassName``
(tests/unit/learners/test_own_learner.py, tests/e2e/test_own_learner.py): imported by name, never by evo."""

from evo.learners.spec import POSITIVE, LearnerSpec, Reach, setting

SPEC = LearnerSpec(
    name="half",
    title="Half a learner",
    settings=(setting("learning_rate", float, 1e-3, "a step size", Reach.ATTRIBUTE, domain=POSITIVE),),
    action_spaces=("Discrete",),
)


class HalfLearner:
    """Declares its settings and trains, but has nothing a run needs to score, exchange or checkpoint it."""

    spec = SPEC

    def __init__(self, setup, hparams):
        self.hparams = dict(hparams)

    def train(self, steps, should_stop, schedule=(), progress=None) -> None:
        pass

    def close(self) -> None:
        pass


class NoSpec:
    """A class that is not a learner: no spec."""

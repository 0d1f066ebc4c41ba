"""PB2-Rand, PB2-Mult and PB2-Mix: PB2 over search spaces with categories (pure).

Parker-Holder, Nguyen, Desai & Roberts, "Tuning Mixed Input Hyperparameters on the Fly for
Efficient Population Based AutoRL" (NeurIPS 2021; code: jparkerholder/procgen_autorl ``pbt.py``,
``pb2_utils.py``, ``exp3.py``), under the paper's names. Every ``choices`` hyperparameter (ordered
numbers such as a number of epochs, named ones such as DrAC's augmentation) is a category; the others are
PB2's continuous (and integer) inputs. Each recipient's categories are chosen first, then its
continuous values by PB2's GP-UCB (evo.core.explorers.pb2) given them:

- ``pb2-rand``: each category kept from the donor, or with probability 0.5 drawn uniformly from its
  choices; the GP models the continuous columns only, on every observation;
- ``pb2-mult``: each category from its own TV.EXP3.M bandit (evo.core.explorers.exp3); the GP is fitted
  only on the observations with the chosen categories, over the continuous columns. With fewer than
  two such observations there is nothing to fit, and the recipient keeps the donor's continuous
  values with the bandit's categories (the paper's code keeps the donor's whole config, categories
  included, so a category the initial population did not draw is never tried: the bandit's pick
  would be thrown away);
- ``pb2-mix``: each category from its bandit; one GP over all columns with CoCaBO's time-varying
  mixture kernel (evo.core.explorers.kernels), its mixing weight λ and both decays fitted; the UCB is
  maximised over the continuous columns with the categories held at **the bandit's choices**. The
  paper's code holds them at the donor's categories (``fixed_cat``), which makes the continuous
  values fit a category the recipient will not train with whenever the bandit picks another; here
  they fit the category it trains with.

What stays PB2's (as evo's ``--explore pb2``, not the paper's code): y is the change in score over a
generation (per generation rather than per env step: the same up to the constant steps of a
generation), X does not hold the score before the change, κ follows GP-UCB's schedule over the
searched dimensions, and a batch of recipients is GP-BUCB's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evo.core.explorers.exp3 import TVExp3M, normalise_rewards
from evo.core.explorers.kernels import mixture_kernel
from evo.core.explorers.pb2 import MIN_OBSERVATIONS, PB2, GPModel
from evo.core.kinds import Kind

RESAMPLE_PROBABILITY = 0.5  # PB2-Rand: a category is drawn anew this often, else kept from the donor


def is_category(kind: Kind) -> bool:
    """Whether the paper's explorers treat this hyperparameter as a category (any ``choices``)."""
    return getattr(kind, "choices", None) is not None


class _WithCategories(PB2):
    """What the three share: which columns are categories, and the GP over the others."""

    named_choices = True
    why_ordered = ""

    @property
    def categories(self) -> dict[int, str]:
        return {i: name for i, (name, kind) in enumerate(self.space.items()) if is_category(kind)}

    @property
    def continuous(self) -> list[int]:
        return [i for i in range(len(self.space)) if i not in self.categories]

    def model(self, generation: int, fixed: Mapping[int, float], rng: np.random.Generator) -> GPModel | None:
        rows = self.rows(fixed)
        if not self.continuous or (rows is not None and len(rows) < MIN_OBSERVATIONS):
            return None
        gp = self.fit(rng, rows, self.gp_columns)
        if gp is None:
            return None
        points = len(self.observations) if rows is None else len(rows)
        return GPModel.of(gp, self.gp_columns, generation, self.kappa(len(self.continuous), points))

    @property
    def gp_columns(self) -> list[int]:
        """The columns the GP models (PB2-Mix: all; the others: the continuous ones)."""
        return self.continuous

    def rows(self, fixed: Mapping[int, float]) -> list[int] | None:
        """The observations the GP of categories ``fixed`` is fitted on (None: all)."""
        return None

    def arm(self, column: int, unit: float) -> int:
        kind = self.space[self.categories[column]]
        return kind.index(kind.from_unit(unit))

    def bandit(self, column: int) -> TVExp3M:
        """The TV.EXP3.M of one category column, replayed over the observations: batch B the
        population, T the run's generations (from the data when unknown)."""
        kind = self.space[self.categories[column]]
        rewards = normalise_rewards([dy for _, _, dy in self.observations])
        rounds: dict[int, int] = {}
        for t, _, _ in self.observations:
            rounds[t] = rounds.get(t, 0) + 1
        batch = self.population or max(rounds.values(), default=1)
        horizon = self.rounds or max(rounds, default=1)
        history = [(t, self.arm(column, x[column]), r) for (t, x, _), r in zip(self.observations, rewards, strict=True)]
        return TVExp3M.replay(len(kind.choices), max(batch, 1), max(horizon, 1), history)


class PB2Rand(_WithCategories):
    """PB2-Rand: categories kept or redrawn at random, the continuous values by PB2 (see the module docstring)."""

    name = "pb2-rand"
    summary = (
        "PB2 for search spaces with named choices such as DrAC's augmentation (the Procgen AutoRL paper, "
        "Parker-Holder et al. 2021): choices kept or redrawn at random"
    )
    category_rule = "keeps or redraws each at random"

    def pick_categories(
        self, generation: int, donors: Sequence[Sequence[float]], rng: np.random.Generator
    ) -> list[dict[int, tuple[float, str]]]:
        chosen: list[dict[int, tuple[float, str]]] = []
        for donor in donors:
            recipient = {}
            for column, name in self.categories.items():
                kind = self.space[name]
                if rng.random() < RESAMPLE_PROBABILITY:
                    recipient[column] = (kind.to_unit(kind.sample(rng)), "pb2-rand resample")
                else:
                    recipient[column] = (float(donor[column]), "pb2-rand kept")
            chosen.append(recipient)
        return chosen


class _ByBandit(_WithCategories):
    """Categories from one TV.EXP3.M per categorical column (PB2-Mult and PB2-Mix)."""

    def pick_categories(
        self, generation: int, donors: Sequence[Sequence[float]], rng: np.random.Generator
    ) -> list[dict[int, tuple[float, str]]]:
        """Each recipient's categories from the bandits, distinct within a generation where they can be."""
        chosen: list[dict[int, tuple[float, str]]] = [{} for _ in donors]
        for column, name in self.categories.items():
            kind = self.space[name]
            for recipient, arm in zip(chosen, self.bandit(column).draw(len(donors), rng), strict=True):
                recipient[column] = (kind.to_unit(kind.choices[arm]), f"{self.name} bandit")
        return chosen


class PB2Mult(_ByBandit):
    """PB2-Mult: categories by TV.EXP3.M, then a GP of those categories' data (see the module docstring)."""

    name = "pb2-mult"
    summary = "the Procgen AutoRL paper's PB2 with choices by the TV.EXP3.M bandit, a GP per choice"
    category_rule = "draws them from a TV.EXP3.M bandit"

    def rows(self, fixed: Mapping[int, float]) -> list[int] | None:
        return [
            i
            for i, (_, x, _) in enumerate(self.observations)
            if all(abs(x[column] - unit) < 1e-9 for column, unit in fixed.items())
        ]

    def model_key(self, fixed: Mapping[int, float]) -> Any:
        return tuple(sorted(fixed.items()))


class PB2Mix(_ByBandit):
    """PB2-Mix: categories by TV.EXP3.M, then one GP with CoCaBO's mixture kernel, the categories
    held at the bandit's choices (see the module docstring)."""

    name = "pb2-mix"
    summary = "the Procgen AutoRL paper's PB2 with choices by the TV.EXP3.M bandit, one GP with CoCaBO's mixture kernel"
    category_rule = "draws them from a TV.EXP3.M bandit"

    @property
    def gp_columns(self) -> list[int]:
        return list(range(len(self.space)))

    def kernel(self, columns: Sequence[int] | None):
        columns = list(range(len(self.space))) if columns is None else list(columns)
        return mixture_kernel([columns.index(c) for c in self.categories if c in columns])

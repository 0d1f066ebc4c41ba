"""The weight of the teacher's term while a student is distilled from it, as BG-PBT does (Wan et al.,
"Bayesian Generational Population-Based Training", AutoML-Conf 2022; code github
xingchenwan/bgpbt, ``custom_brax_train/ppo_torch.py``: ``set_distillation_schedule`` and
``distill``, with the schedule's values of ``hpo/casmo/bgpbt_arch.py``). Pure: the SB3 side
(evo/sb3/ppo.py) adds α times the teacher's term to PPO's loss.
"""

from __future__ import annotations


def distillation_weight(
    steps_done: int, total_steps: int, start: float = 1.0, end: float = 0.05, fraction: float = 0.8
) -> float:
    """α after ``steps_done`` of a distillation's ``total_steps`` env steps: linear from ``start``
    at 0 to ``end`` at ``fraction * total_steps``, ``end`` from there on (past ``total_steps``
    too). Steps before the start (negative) count as 0."""
    if total_steps <= 0:
        raise ValueError(f"total_steps {total_steps}: a distillation lasts a positive number of env steps")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction}: α reaches its end value within the distillation, in (0, 1]")
    progress = max(steps_done, 0) / (fraction * total_steps)
    return float(end) if progress >= 1 else float(start + (end - start) * progress)

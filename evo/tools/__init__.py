"""What runs after a run: the tools that read a run directory once training has finished (or stopped).

- ``saved``: a run's members opened outside MPI, from its checkpoints (what the next three share);
- ``evaluate``: ``evo-evaluate RUN``, every member and the kept best on fresh episodes;
- ``export``: ``evo-export RUN``, a member as a stock SB3 zip in rl-baselines3-zoo's layout;
- ``video``: ``--video`` on both, one episode of a member as an MP4 or a GIF;
- ``plot``: ``python -m evo.tools.plot RUN``, the scores, schedules and lineage as PNGs;
- ``replay``: ``python -m evo.tools.replay RUN``, a member's hyperparameter schedule for ``--schedule``;
- ``importance``: ``python -m evo.tools.importance RUN``, which hyperparameters explain the scores (fANOVA,
  with the ``importance`` extra's Optuna).

They read the run directory and never write into it, except where a tool says so: ``plot`` and
``importance`` write ``RUN/plots/`` and ``replay`` ``RUN/schedule_member<N>.yml`` unless given
``--out``. The run engine imports none of them (the toy only borrows ``plot``'s figure style). Their
former names (``import evo.plot``, ``python -m evo.replay``, ...) still work: see ``MOVED`` in
``evo/__init__.py``.
"""

"""``evo-study``: did PBT help on *your* task? A study file names the env, the methods, the seeds and
the budget; the command runs every (method, seed) as an ordinary evo run under mpiexec (or lists them
for a SLURM array), re-evaluates every selected member on fresh episodes that all methods of a seed
share, and reports paired comparisons with a verdict that says "not separated" when it is not.

The package is pure where it can be:

=================  ============================================================================
``spec``           the study file: parsed, checked (every problem at once, each with its fix)
``jobs``           a study's runs as jobs: commands, run directories, the SLURM listing, which
                   runs are finished and whether a run directory was made by this study
``stats``          t-intervals, paired differences, the sign-flip test (numpy and scipy only)
``records``        one run's numbers from its records (population.csv, lineage, re-evaluations)
``report``         the tables, the anytime curves, the selection bias and the verdict (pure text)
``fresh``          re-evaluation on fresh episodes and the floors (through evo-evaluate's code)
``running``        the runs under mpiexec, a few at a time, stopped and continued cleanly
``plot``           the figures
``main``           the command line (``evo-study``, ``python -m evo.study``)
=================  ============================================================================

Nothing here imports mpi4py, torch or Stable-Baselines3: the runs are subprocesses, and the fresh
episodes are played through ``evo.tools.evaluate`` and ``evo.sb3.stock``.
"""

"""PBT of Stable-Baselines3 agents over MPI (any learner: --algo): truncation selection, weights moved with collectives.

mpiexec -n 4 python pbt_rl_truct_collective.py --env-id CartPole-v1
"""

import sys

from evo.main import main

if __name__ == "__main__":
    sys.exit(main(strategy="truncation", transport="collective"))

"""PBT of Stable-Baselines3 agents over MPI (any learner: --algo): winner takes all (the best member's weights are
broadcast).

mpiexec -n 4 python pbt_rl_wta.py --env-id CartPole-v1
"""

import sys

from evo.main import main

if __name__ == "__main__":
    sys.exit(main(strategy="wta", transport="collective"))

"""PBT of Stable-Baselines3 agents over MPI (any learner: --algo): truncation selection, weights moved point-to-point.

mpiexec -n 4 python pbt_rl_truct.py --env-id CartPole-v1
"""

import sys

from evo.main import main

if __name__ == "__main__":
    sys.exit(main(strategy="truncation", transport="p2p"))

"""The PBT paper's toy problem on evo's selection, explore and exchange code.

mpiexec -n 2 python pbt_toy.py            # writes toy.png, prints final Q per variant
"""

import sys

from evo.toy import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m evo.study STUDY.yml``: the same as ``evo-study``."""

import sys

from evo.study.main import main

if __name__ == "__main__":
    sys.exit(main())

"""Did PBT help? The built-in studies under their first command line:

    python experiments/compare.py [--study NAME] [OPTIONS]   =   evo-study experiments/studies/NAME.yml [OPTIONS]

``--study`` names a study file of experiments/studies/ (default: classic): classic, continuous, bgpbt,
horizon, sac, procgen, procgen-pilot, ties, learning, atari, evo-seed, untuned. Every other option is
evo-study's (``--list``, ``--job N``, ``--report-only``, ``--envs``, ``--methods``, ``--seeds``, ``--members``,
``--ranks``, ``--generations``, ``--steps``, ``--eval-episodes``, ``--out``, ``--runs``, ``--cores``); the study
itself, its runs and its report are evo/study/'s (``python -m evo.study --help``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.study import main as study  # noqa: E402

DEFAULT_STUDY = "classic"


def translate(argv: list[str]) -> list[str]:
    """compare.py's arguments as evo-study's: ``--study NAME`` becomes the study file's path."""
    argv, name = list(argv), DEFAULT_STUDY
    for index, argument in enumerate(argv):
        if argument == "--study" and index + 1 < len(argv):
            name = argv[index + 1]
            del argv[index : index + 2]
            break
        if argument.startswith("--study="):
            name = argument.split("=", 1)[1]
            del argv[index]
            break
    return [str(study.BUILT_IN / f"{name}.yml"), *argv]


def main(argv: list[str] | None = None) -> int:
    return study.main(translate(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())

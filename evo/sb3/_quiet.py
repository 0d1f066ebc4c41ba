"""Import the unmaintained ``gym`` once, swallowing the notice it prints to stderr, unless the run holds it back
(evo/sb3/holdback.py).

procgen-mirror depends on ``gym`` and SB3 imports it when installed, so every rank would
print a notice that users cannot act on. Import this module before SB3 or procgen.
"""

import contextlib
import io
import warnings

from evo.sb3.holdback import held_back

if not held_back("gym"):
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            import gym  # noqa: F401
        except ImportError:
            pass

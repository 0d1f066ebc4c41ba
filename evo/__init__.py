"""evo: MPI-distributed Population Based Training of Stable-Baselines3 and sb3-contrib agents (``--algo``: a
learner of evo.learners, or one of your own)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

__version__ = "0.1.0"

MOVED = {
    "evo.saved": "evo.tools.saved",
    "evo.evaluate": "evo.tools.evaluate",
    "evo.export": "evo.tools.export",
    "evo.video": "evo.tools.video",
    "evo.plot": "evo.tools.plot",
    "evo.replay": "evo.tools.replay",
}
"""Modules that moved, old name -> new name. Users' scripts and batch jobs still import them or run
``python -m evo.plot RUN``, so the old names stay valid: :class:`_MovedModules` answers for them."""


class _MovedModules:
    """The import system's finder and loader (``importlib.abc.MetaPathFinder`` and ``Loader``,
    implemented rather than inherited: importing ``importlib.abc`` would add 20 ms to ``import evo``)
    for the old names in :data:`MOVED`.

    ``import evo.plot`` gives the very module object ``evo.tools.plot`` (one module, one state, and
    ``evo.plot is evo.tools.plot``); ``python -m evo.plot ARGS`` runs ``evo.tools.plot`` as
    ``__main__`` (runpy asks the loader for ``get_code``) after one line on stderr naming the new
    form. It sits last on ``sys.meta_path``, so it answers only for names no file provides."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in MOVED:
            return None
        from importlib.util import find_spec

        return ModuleSpec(name, self, origin=find_spec(MOVED[name]).origin)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        from importlib import import_module

        module = import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system is about to set __spec__ to ours
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state  # already executed; give it its own spec back

    def get_code(self, name: str) -> CodeType | None:
        from importlib.util import find_spec

        print(f"python -m {name}: now python -m {MOVED[name]} (the old name keeps working)", file=sys.stderr)
        return find_spec(MOVED[name]).loader.get_code(MOVED[name])


sys.meta_path.append(_MovedModules())

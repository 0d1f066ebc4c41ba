"""How a :class:`~evo.config.resolved.Config` field is declared: ``option(...)`` or ``derived(...)``. Pure.

CleanRL's ``Args`` dataclass is its own declaration: each field carries its type, default and
help. Ours does too. A field declared with :func:`option` is a command-line option: its
metadata holds an :class:`Option` (what argparse needs, the check of its own value and what
``--resume`` does with it), and the option takes its name from the field. A field declared with
:func:`derived` is resolved from something else (the MPI job, the YAML, the other options);
its metadata says from what. :func:`declared` refuses a field that is neither, so a value cannot
reach the resolved config without a declaration; :func:`options_of` lists the options in
declaration order, each in a known group of ``--help``, from which ``evo.config.options`` derives
the parser and the resume rules.

A help text or a list of choices that names what a registry holds (the learners, the explorers)
is given as a function, called when the parser is built: a learner or an explorer registered
after evo.config is imported is offered too.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar


class Resume(enum.Enum):
    """What ``--resume`` does with an option."""

    RESTORED = "taken from the run unless given again; may change on resume"
    FIXED = "taken from the run; refused if given with another value"
    OWN = "this invocation's own; never taken from the run"


Check = Callable[[str, Any], "str | None"]
"""``check(flag, value)``: the problem with an option's value, or None."""

OPTION, DERIVED = "option", "derived"
"""The metadata keys of the two kinds of field."""

Text = str | Callable[[], str]
"""A help text, or the function that writes it when the parser is built (from a registry)."""
Choices = Sequence[str] | Callable[[], Sequence[str]]
"""The values an option takes, or the function that lists them when the parser is built."""

STATES_DEFAULT = re.compile(r"\(default\b|\bdefault:", re.IGNORECASE)
"""A help text that says its default itself: "(default: number of MPI ranks)", "(default 0: ...)", "Default: ..."."""
SWITCHES = ("store_true", "store_false", "store_const")
"""The actions of a flag that takes no value: its default is the flag's absence, not a value to show."""


@dataclass(frozen=True)
class Option:
    """One command-line option: argparse's arguments, its check, its Config field, its resume class."""

    name: str
    """argparse's dest, and the key under ``cli`` in config.yaml ('' in a declaration: the field's name)."""
    help: Text
    resume: Resume
    group: str
    """The key of its group in ``--help`` (``GROUPS`` in evo/config/resolved.py)."""
    default: Any = None
    """argparse's default: the value when the flag is not given (None: resolved from elsewhere)."""
    type: Callable[[str], Any] | None = None
    nargs: int | str | None = None
    choices: Choices | None = None
    metavar: str | tuple[str, ...] | None = None
    action: str | None = None
    const: Any = None
    flag: str = ""
    """The flag; '' for ``--`` + the name with dashes."""
    field: str = ""
    """The Config field it fills; '' for the same name."""
    check: Check | None = None

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def field_name(self) -> str:
        return self.field or self.name

    @property
    def allowed(self) -> tuple[str, ...] | None:
        """The values it takes, listed now (None: any its type accepts)."""
        choices = self.choices() if callable(self.choices) else self.choices
        return None if choices is None else tuple(choices)

    @property
    def help_text(self) -> str:
        """Its help as ``--help`` shows it: the declared text (written now if a function), then its
        default, once: not when it has none (None), not for a switch (a flag that takes no value),
        and not when the text already says it ("(default: from the YAML)")."""
        text = self.help() if callable(self.help) else self.help
        if self.default is None or self.action in SWITCHES or STATES_DEFAULT.search(text):
            return text
        shown = " ".join(map(str, self.default)) if isinstance(self.default, (list, tuple)) else str(self.default)
        return f"{text} (default: {shown})"

    def add_to(self, parser: argparse._ActionsContainer) -> None:
        """Add it to ``parser`` (or one of its argument groups), its help and choices written now."""
        settings = {
            "type": self.type,
            "nargs": self.nargs,
            "choices": self.allowed,
            "metavar": self.metavar,
            "action": self.action,
            "const": self.const,
        }
        given = {key: value for key, value in settings.items() if value is not None}
        help_text = self.help_text.replace("%", "%%")  # argparse expands %(...)s in help
        parser.add_argument(self.flag_name, dest=self.name, default=self.default, help=help_text, **given)

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this option alone, or None."""
        return self.check(self.flag_name, value) if self.check is not None else None

    def saved(self, value: Any) -> Any:
        """``value`` as plain YAML data for the run's ``cli`` record."""
        if isinstance(value, Path):
            return str(value)
        return list(value) if isinstance(value, tuple) else value

    def restored(self, value: Any) -> Any:
        """A value read back from the run's ``cli`` record, as argparse would have made it."""
        if value is None:
            return None
        if self.type is Path:
            return Path(value)
        if self.nargs in ("+", "*") and isinstance(value, str):
            return [value]  # runs from before --hyperparams took several values
        return value


def option(
    help: Text,
    resume: Resume,
    *,
    group: str,
    default: Any = dataclasses.MISSING,
    type: Callable[[str], Any] | None = None,
    nargs: int | str | None = None,
    choices: Choices | None = None,
    metavar: str | tuple[str, ...] | None = None,
    action: str | None = None,
    const: Any = None,
    flag: str = "",
    name: str = "",
    check: Check | None = None,
) -> Any:
    """A Config field that is a command-line option.

    ``default`` is the value when the flag is not given, for argparse and for the dataclass (a
    list becomes the tuple Config holds). Without one, argparse gives None and the field has no
    default: ``parse_config`` resolves it (the population from the MPI job, the budget from the
    YAML ...). ``group`` is the key of its group in ``--help``. ``help`` and ``choices`` may be
    functions, called when the parser is built (to read a registry then, not at import). ``name``
    is the option's own name (its dest and ``cli`` key) when it is not the field's. ``type``
    stays explicit rather than read from the annotation: the annotation is the resolved value's
    type, while argparse needs the converter of one token (``str2bool`` for a bool, ``float`` for
    each item of a ``tuple[float, ...]``, nothing for ``--hyperparams KEY:VALUE`` that resolves to
    a dict).
    """
    declaration = Option(
        name=name,
        help=help,
        resume=resume,
        group=group,
        default=None if default is dataclasses.MISSING else default,
        type=type,
        nargs=nargs,
        choices=choices,
        metavar=metavar,
        action=action,
        const=const,
        flag=flag,
        check=check,
    )
    field_default = tuple(default) if isinstance(default, list) else default
    return dataclasses.field(default=field_default, metadata={OPTION: declaration})


def derived(source: str) -> Any:
    """A Config field that no option fills; ``source`` says where its value comes from."""
    return dataclasses.field(metadata={DERIVED: source})


T = TypeVar("T")


def declared(cls: type[T]) -> type[T]:
    """Refuse a dataclass with a field declared with neither (or both) of :func:`option` and :func:`derived`.

    Applied to Config at import time, so a plain field fails as soon as evo.config is imported.
    """
    for item in dataclasses.fields(cls):
        kinds = [kind for kind in (OPTION, DERIVED) if kind in item.metadata]
        if len(kinds) != 1:
            how = "both option() and derived()" if kinds else "neither option() nor derived()"
            raise TypeError(
                f"{cls.__name__}.{item.name} is declared with {how}: declare a command-line option with "
                "option(help, resume class, ...), or a value resolved from elsewhere with derived('where from')"
            )
    return cls


def options_of(cls: type, groups: Collection[str]) -> tuple[Option, ...]:
    """The options declared by ``cls``'s fields, in declaration order, each named after its field.

    Refuses an option whose group is not one of ``groups`` (the keys of ``--help``'s groups), so
    every option has a place in ``--help`` as soon as evo.config is imported.
    """
    found = []
    for item in dataclasses.fields(cls):
        declaration = item.metadata.get(OPTION)
        if declaration is None:
            continue
        if declaration.group not in groups:
            raise TypeError(
                f"{cls.__name__}.{item.name} is declared in group {declaration.group!r}, which --help does not "
                f"have; use one of {', '.join(groups)}, or add the group"
            )
        found.append(dataclasses.replace(declaration, name=declaration.name or item.name, field=item.name))
    return tuple(found)


def must(holds: Callable[[Any], bool], tail: str) -> Check:
    """A check that reports ``FLAG VALUE: tail`` when ``holds(value)`` is false (None is not checked)."""

    def check(flag: str, value: Any) -> str | None:
        return None if value is None or holds(value) else f"{flag} {value}: {tail}"

    return check


def ordered_range(flag: str, bounds: Sequence[float] | None) -> str | None:
    """``--learning-rate-range LOW HIGH`` and the like: LOW < HIGH."""
    if bounds is None or bounds[0] < bounds[1]:
        return None
    kind = "reversed" if bounds[0] > bounds[1] else "empty"
    return f"{flag} {bounds[0]:g} {bounds[1]:g}: the range is {kind}; give LOW < HIGH"


def str2bool(text: str) -> bool:
    """'True'/'False' as EVO users type them (argparse's type=bool would make 'False' true)."""
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


RESTORED, FIXED, OWN = Resume.RESTORED, Resume.FIXED, Resume.OWN

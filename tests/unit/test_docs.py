"""The documentation a newcomer reads: a short README that links to the pages in docs/, links
that resolve, and running.md's table of every flag matching the flags' declarations."""

import re

from evo.config.options import GROUPS, OPTIONS
from tests.support import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = ("running.md", "hyperparameters.md", "records.md", "architecture.md", "testing.md", "studies.md")
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def markdown_files():
    return [README, *sorted(DOCS.glob("*.md"))]


def test_the_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move details into docs/"
    text = README.read_text()
    for page in PAGES:
        assert (DOCS / page).is_file(), page
        assert f"docs/{page}" in text, f"README.md does not link docs/{page}"


def test_the_pages_are_markdown_files_directly_in_docs():
    assert not [path for path in DOCS.rglob("*.md") if path.parent != DOCS]


def test_every_relative_link_resolves():
    broken = []
    for path in markdown_files():
        for target, _ in LINK.findall(path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, "links to nothing:\n  " + "\n  ".join(broken)


def test_the_link_check_would_see_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [the page](missing.md) and [that](https://example.org)\n")
    assert [t for t, _ in LINK.findall(page.read_text())] == ["missing.md", "https://example.org"]


def flag_tables(text: str) -> dict[str, list[str]]:
    """running.md's "Every flag": each ``### heading``'s flags, from the first column of its table."""
    section = text.split("\n## Every flag\n", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[str]] = {}
    heading = None
    for line in section.splitlines():
        if line.startswith("### "):
            heading = line[4:].strip()
            tables[heading] = []
        elif line.startswith("| `") and heading is not None:
            first = re.split(r"(?<!\\)\|", line)[1]  # a cell may hold an escaped \|
            tables[heading] += re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", first)
    return tables


def flag_table_problems(text: str) -> list[str]:
    """Where running.md's tables and the declared flags and groups (evo/config/resolved.py) differ."""
    tables = flag_tables(text)
    titles = list(GROUPS.values())
    problems = [] if list(tables) == titles else [f"the tables' headings are {list(tables)}, --help's groups {titles}"]
    group_of = {option.flag_name: GROUPS[option.group] for option in OPTIONS}
    for flag, title in group_of.items():
        if flag not in tables.get(title, []):
            problems.append(f"{flag} is not in the table of {title!r}")
    for title, flags in tables.items():
        for flag in flags:
            if flag not in group_of:
                problems.append(f"{flag} under {title!r} is not a declared flag")
            elif group_of[flag] != title:
                problems.append(f"{flag} is under {title!r}, its group is {group_of[flag]!r}")
        problems += [f"{flag} is twice under {title!r}" for flag in sorted(set(flags)) if flags.count(flag) > 1]
    return problems


def test_every_flag_is_in_the_table_of_its_group():
    problems = flag_table_problems((DOCS / "running.md").read_text())
    assert not problems, "docs/running.md's Every flag and the declared options differ:\n  " + "\n  ".join(problems)


def test_the_flag_check_would_see_a_flag_missing_misplaced_or_unknown():
    text = (DOCS / "running.md").read_text()
    seed = next(line for line in text.splitlines() if line.startswith("| `--seed N`"))
    moved = text.replace(seed + "\n", "").replace("| `--resume` |", seed + "\n| `--resume` |")
    assert flag_table_problems(moved) == [
        f"--seed is not in the table of {GROUPS['population']!r}",
        f"--seed is under {GROUPS['checkpoints']!r}, its group is {GROUPS['population']!r}",
    ]
    unknown = text.replace("| `--resume` |", "| `--no-such-flag` | x | own |\n| `--resume` |")
    assert flag_table_problems(unknown) == [f"--no-such-flag under {GROUPS['checkpoints']!r} is not a declared flag"]
    renamed = text.replace("### Speed\n", "### Fast\n")
    assert flag_table_problems(renamed)[0].startswith("the tables' headings are")

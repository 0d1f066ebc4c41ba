"""The documentation a newcomer reads: a short README that links to the pages in docs/, and
links that resolve."""

import re

from tests.support import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = ("running.md", "hyperparameters.md", "records.md", "architecture.md", "testing.md")
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

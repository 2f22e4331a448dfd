"""Every link between the README and the docs leads somewhere: the page exists and so does the heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\((?P<page>[^)#\s:]*\.md)?(?:#(?P<anchor>[^)\s]+))?\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchor_of(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = CODE_BLOCK.sub("", page.read_text())
    return {anchor_of(h) for h in re.findall(r"^#+ (.*)$", text, re.MULTILINE)}


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    found = []
    for match in LINK.finditer(CODE_BLOCK.sub("", page.read_text())):
        target = (page.parent / match["page"]).resolve() if match["page"] else page
        if not target.is_file():
            found.append(f"{page.relative_to(root)}: no page {match['page']}")
        elif match["anchor"] and match["anchor"] not in anchors(target):
            found.append(f"{page.relative_to(root)}: no heading #{match['anchor']} in {target.relative_to(root)}")
    return found


def test_every_link_between_the_pages_leads_to_a_page_and_heading() -> None:
    assert [line for page in PAGES for line in broken_links(page)] == []


def test_a_link_to_a_heading_that_moved_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Kept here\n\nSee [b](b.md#moved-away) and [here](#kept-here).\n")
    (tmp_path / "b.md").write_text("# B\n\n## Still here\n")
    assert broken_links(tmp_path / "a.md", root=tmp_path) == ["a.md: no heading #moved-away in b.md"]

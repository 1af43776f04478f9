"""axe-core in the browser tests: the accessibility check of a UI page as Chromium rendered it
(issue 41 item 6; docs/UI.md "Accessibility").

axe-core is vendored at build time like Swagger UI (infra/axe.sh: `npm pack` of the pinned
version into .cache/axe-core/<version>, checked against its SHA-256; `make assets`, which `make
test` runs). The pages' strict CSP (`script-src 'self'`) refuses an injected <script> (which is
what Playwright's `add_script_tag` adds, whether from a path or a string), so the source is
evaluated through the DevTools protocol (`page.evaluate`), which the page's CSP does not
govern; the page keeps its own CSP, and axe checks it as a visitor gets it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = ROOT / "infra" / "axe.sh"
VERSION = re.search(r"^VERSION=(\S+)$", _SCRIPT.read_text(encoding="utf-8"), re.M)[1]  # type: ignore[index]
SOURCE = ROOT / ".cache" / "axe-core" / VERSION / "axe.min.js"
BLOCKING = ("serious", "critical")  # the impacts a page may not have
# what axe checks: WCAG 2.0/2.1 A and AA, and its best practices (landmarks, one <h1>, ...)
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

_RUN = """async (tags) => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: tags},
                                     resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
                              summary: n.failureSummary}))}));
}"""


@dataclass(frozen=True)
class Violation:
    page: str  # the page's path, as visited
    rule: str  # axe's rule id (color-contrast, label, landmark-one-main, ...)
    impact: str
    help: str
    nodes: list[dict[str, Any]]

    def __str__(self) -> str:
        where = "; ".join(f"{n['target']}: {n['html']}" for n in self.nodes[:5])
        more = f" (+{len(self.nodes) - 5} more)" if len(self.nodes) > 5 else ""
        return f"{self.page}: [{self.impact}] {self.rule}: {self.help} — {where}{more}"


def available() -> bool:
    return SOURCE.is_file()


async def violations(page: Any, path: str, impacts: tuple[str, ...] = BLOCKING
                     ) -> list[Violation]:
    """axe-core's violations of `impacts` on the page as it stands (injected once per
    document: a navigation loads a new one)."""
    if not await page.evaluate("() => typeof window.axe === 'object'"):
        await page.evaluate(SOURCE.read_text(encoding="utf-8"))
    found = await page.evaluate(_RUN, TAGS)
    return [Violation(path, v["id"], v["impact"], v["help"], v["nodes"]) for v in found
            if v["impact"] in impacts]

"""Event types new since the previous release (tests/compat/PREVIOUS) are listed in
docs/UPGRADES.md: the previous release's catalogue refuses an unknown `type`, so each is
written only by a feature that waits until no instance of that release runs (issue 39 item 6).
A new field of an existing event needs no listing: the previous release ignores it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers.compat import code_env, git, previous_commit, previous_tree, require_commit
from tests.helpers.lab.cluster import ROOT

_TAG = re.compile(r'\btag="(\w+)"')
_ROW = re.compile(r"^\| `(\w+)` \|", re.M)
SECTION = "## Event types new since the previous release"


def listed() -> set[str]:
    doc = (ROOT / "docs" / "UPGRADES.md").read_text()
    section = doc.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return set(_ROW.findall(section))


def test_every_event_type_the_previous_release_cannot_read_is_listed() -> None:
    commit = previous_commit()
    require_commit(commit)
    before = set(_TAG.findall(git("show", f"{commit}:libs/ostinato/domain/events.py")))
    now = set(_TAG.findall((ROOT / "libs/ostinato/domain/events.py").read_text()))
    assert before and now >= before, f"event types removed since {commit[:7]}: {before - now}"
    assert now - before <= listed(), (
        "docs/UPGRADES.md, 'Event types new since the previous release', must list every type "
        f"the previous release cannot read: not listed {sorted(now - before - listed())}")


def test_the_previous_release_refuses_each_listed_type() -> None:
    """Why the list exists: the previous release's own catalogue, run from its tree."""
    tree = previous_tree()
    probe = ("import sys, ostinato.domain.events as e\n"
             "for t in sys.argv[1:]:\n"
             "    try:\n"
             "        e.decode_event('{\"type\": \"%s\"}' % t)\n"
             "    except Exception as exc:\n"
             "        print(t, type(exc).__name__)\n")
    types = sorted(listed())
    out = subprocess.run([sys.executable, "-c", probe, *types], cwd=tree, check=True,
                         env=code_env(tree, dict(os.environ)), capture_output=True, text=True)
    assert out.stdout.split("\n")[:-1] == [f"{t} ValidationError" for t in types]

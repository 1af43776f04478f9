"""The previous release beside main (issue 39, mixed versions during a rolling upgrade).

`previous_commit` reads the pinned release from tests/compat/PREVIOUS; `previous_tree` checks
it out with `git worktree add` into the git-ignored `.cache/compat/<hash>` (reused when it is
there) and fails, never skips, when the clone does not hold the commit. `spawn` starts one
service of a `Cluster` from a given code tree: the previous release's runs with
`PYTHONPATH=<tree>/libs:<tree>` in front and its tree as the working directory, on main's
virtual environment, so `ostinato` and `services` are the old ones (`imported_from` shows it).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.lab.cluster import ROOT, Cluster, free_port

PREVIOUS_FILE = ROOT / "tests" / "compat" / "PREVIOUS"
CACHE = ROOT / ".cache" / "compat"
MIGRATIONS = "schemas/sql/migrations"
_HASH = re.compile(r"^[0-9a-f]{40}$")
_PORT_VARS = {"api": "API", "worker_gateway": "GATEWAY", "scheduler": "SCHEDULER",
              "dispatcher": "DISPATCHER", "reconciler": "RECONCILER"}


def previous_commit(path: Path = PREVIOUS_FILE) -> str:
    """The full hash pinned in tests/compat/PREVIOUS (its one line that is not a comment)."""
    lines = [ln.strip() for ln in path.read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1 or not _HASH.match(lines[0]):
        raise ValueError(f"{path} must hold exactly one full 40-hex commit hash, found {lines}")
    return lines[0]


def git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def require_commit(commit: str) -> None:
    """Fetch `commit` once when this clone lacks it (a shallow checkout with a remote), then
    fail with what to do if it is still missing."""
    try:
        git("cat-file", "-e", f"{commit}^{{commit}}")
        return
    except RuntimeError:
        pass
    for fetch in (("fetch", "--quiet", "--unshallow"), ("fetch", "--quiet", "origin", commit)):
        try:
            git(*fetch)
        except RuntimeError:
            continue  # not shallow, no remote, or the remote refuses a bare hash: try the next
    try:
        git("cat-file", "-e", f"{commit}^{{commit}}")
    except RuntimeError as exc:
        raise RuntimeError(
            f"the previous release {commit} (tests/compat/PREVIOUS) is not in this clone: the "
            "mixed-version tests need the repository's history (a full clone, or "
            "`git fetch --unshallow`)") from exc


def previous_migrations(commit: str) -> list[str]:
    """The migration file names the previous release shipped."""
    require_commit(commit)
    listed = git("ls-tree", "--name-only", f"{commit}:{MIGRATIONS}")
    return sorted(n for n in listed.split() if n.endswith(".sql"))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One checkout at a time across test processes (parallel sessions share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def previous_tree(commit: str | None = None) -> Path:
    """A worktree of the previous release under .cache/compat, made once and reused."""
    commit = commit or previous_commit()
    require_commit(commit)
    tree = CACHE / commit[:12]
    with _locked(CACHE / ".lock"):
        if (tree / ".git").exists():
            try:
                if git("rev-parse", "HEAD", cwd=tree).strip() == commit:
                    return tree
            except RuntimeError:
                pass
            git("worktree", "remove", "--force", str(tree))
        elif tree.exists():
            shutil.rmtree(tree)  # a folder left without its worktree registration
        git("worktree", "prune")
        git("worktree", "add", "--detach", str(tree), commit)
    return tree


def code_env(tree: Path | None, env: dict[str, str]) -> dict[str, str]:
    """`env` for a process running the code of `tree` (None: main's own)."""
    if tree is None:
        return env
    front = f"{tree / 'libs'}{os.pathsep}{tree}"
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": f"{front}{os.pathsep}{rest}" if rest else front}


def imported_from(tree: Path | None, module: str) -> Path:
    """Where a process started as `spawn` starts it imports `module` from."""
    out = subprocess.run(
        [sys.executable, "-c", f"import {module}; print({module}.__file__)"],
        cwd=tree or ROOT, env=code_env(tree, dict(os.environ)), capture_output=True, text=True,
        check=True)
    return Path(out.stdout.strip()).resolve()


def spawn(cluster: Cluster, alias: str, service: str, tree: Path | None, *,
          port: int | None = None) -> None:
    """`launch`, then wait until it is ready."""
    launch(cluster, alias, service, tree, port=port)
    cluster.wait_ready(alias)


def launch(cluster: Cluster, alias: str, service: str, tree: Path | None, *,
           port: int | None = None) -> None:
    """Start `service` from `tree` (None: main) as `alias` on `port` (default: a free one);
    its log is `<alias>.log` in the cluster's log folder. `cluster.wait_ready(alias)` waits."""
    cluster.log_dir.mkdir(parents=True, exist_ok=True)
    cluster.ports[alias] = port or free_port()
    env = code_env(tree, {**cluster.env(service),
                          f"OSTINATO_{_PORT_VARS[service]}_PORT": str(cluster.ports[alias])})
    with (cluster.log_dir / f"{alias}.log").open("ab") as log:
        cluster.procs[alias] = subprocess.Popen(
            [sys.executable, "-m", f"services.{service}"], cwd=tree or ROOT, env=env,
            stdout=log, stderr=subprocess.STDOUT)


def stop(cluster: Cluster, alias: str) -> int:
    """SIGTERM one process (a graceful stop, as in a rolling upgrade) and wait for its exit."""
    proc = cluster.procs.pop(alias)
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def start_script(script: Path, tree: Path | None, env: dict[str, str],
                 log_path: Path) -> subprocess.Popen[bytes]:
    """Run a script of main's tests (e.g. a worker) on the code of `tree` (None: main)."""
    with log_path.open("ab") as log:
        return subprocess.Popen([sys.executable, str(script)], cwd=tree or ROOT,
                                env=code_env(tree, {**os.environ, **env}), stdout=log,
                                stderr=subprocess.STDOUT)

"""`infra/services.sh` judges a service alive by its process, not by `kill -0`: a service killed
with kill -9 and not yet reaped by its parent (a zombie) is stopped, so `start` restarts it
instead of printing "already running" and leaving it down."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.lab.cluster import ROOT

SCRIPT = ROOT / "infra" / "services.sh"


def status(run_dir: Path) -> dict[str, str]:
    out = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, check=True,
                         env={**os.environ, "OSTINATO_RUN_DIR": str(run_dir),
                              "OSTINATO_ADMIN_KEY": "adm_test"}).stdout
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def test_a_zombie_service_is_stopped_and_a_live_one_running(tmp_path: Path) -> None:
    live = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["sleep", "60"])
    try:
        dead.kill()
        os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
        assert Path(f"/proc/{dead.pid}/stat").read_text().split(") ")[1][0] == "Z"
        (tmp_path / "api.pid").write_text(f"{dead.pid}\n")
        (tmp_path / "scheduler.pid").write_text(f"{live.pid}\n")
        found = status(tmp_path)
        assert found["api"] == "stopped"
        assert found["scheduler"] == f"running (pid {live.pid})"
        assert found["dispatcher"] == "stopped"  # no pid file
    finally:
        live.kill()
        live.wait()
        dead.wait()

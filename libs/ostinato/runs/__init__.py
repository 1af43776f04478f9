"""Run commands: cancel, re-run as a linked run, dead-letter triage and replay (`commands`);
signals to workflow runs (`signals`); pause and resume of workflow runs (`pausing`); child runs
(`children`)."""

from ostinato.runs.commands import (
    TRIAGE_STATES,
    cancel_run,
    cancel_runs,
    replay_many,
    rerun,
    triage,
)
from ostinato.runs.pausing import pause_matching, pause_run, resume_run
from ostinato.runs.signals import SignalSent, send_signal

__all__ = ["TRIAGE_STATES", "SignalSent", "cancel_run", "cancel_runs", "pause_matching",
           "pause_run", "replay_many", "rerun", "resume_run", "send_signal", "triage"]

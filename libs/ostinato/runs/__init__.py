"""Run commands: cancel, re-run as a linked run, dead-letter triage and replay (`commands`);
signals to workflow runs (`signals`)."""

from ostinato.runs.commands import TRIAGE_STATES, cancel_run, replay_many, rerun, triage
from ostinato.runs.signals import SignalSent, send_signal

__all__ = ["TRIAGE_STATES", "SignalSent", "cancel_run", "replay_many", "rerun", "send_signal",
           "triage"]

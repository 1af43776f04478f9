"""Run commands: cancel, re-run as a linked run, dead-letter triage and replay (`commands`)."""

from ostinato.runs.commands import TRIAGE_STATES, cancel_run, replay_many, rerun, triage

__all__ = ["TRIAGE_STATES", "cancel_run", "replay_many", "rerun", "triage"]

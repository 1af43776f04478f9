"""The scheduler: pure decisions per due job (`decide`) wired to PostgreSQL (`tick`)."""

from ostinato.scheduling.decide import Decision, decide
from ostinato.scheduling.tick import ACTOR, Waiting, fire_due, run_scheduler

__all__ = ["ACTOR", "Decision", "Waiting", "decide", "fire_due", "run_scheduler"]

"""Job commands: submission (one or a batch) and steering (delete, pause, resume, trigger now,
backfill). Each validates, then appends to the job's stream in the caller's transaction.
`request` is what a client submits, `decide` the pure decision over one due job, `materialise`
the one writer of `RunScheduled`."""

from ostinato.jobs.control import (
    MAX_BACKFILL_SLOTS,
    Backfill,
    BackfillSlot,
    Triggered,
    backfill,
    delete_job,
    pause_job,
    resume_job,
    trigger_now,
)
from ostinato.jobs.submit import Submitted, submit_job, submit_jobs

__all__ = ["MAX_BACKFILL_SLOTS", "Backfill", "BackfillSlot", "Submitted", "Triggered",
           "backfill", "delete_job", "pause_job", "resume_job", "submit_job", "submit_jobs",
           "trigger_now"]

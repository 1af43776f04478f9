"""Workflow ids and their reuse policy (signal-with-start, issue 40 item 3): the pure decision
whether a start by workflow id may make a new run, given what that id already names. Mirrors
Temporal's WorkflowIdReusePolicy; whatever the policy, a start never makes a second running run
with the same id (decided under an advisory lock in `ostinato.runs.workflow_ids`)."""

from __future__ import annotations

from ostinato.domain.errors import InvalidInput

MAX_WORKFLOW_ID_CHARS = 200
# allow_duplicate: another run after the previous one ended, whatever its outcome;
# allow_duplicate_failed_only: only after one that did not succeed; reject_duplicate: never
POLICIES = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate")
DEFAULT_POLICY = "allow_duplicate"


def check_workflow_id(workflow_id: str) -> str:
    """The id as given, or a 422 naming the field: 1 to 200 characters, no control characters
    (it travels in paths, logs and the CLI)."""
    if not 0 < len(workflow_id) <= MAX_WORKFLOW_ID_CHARS or any(
            ord(c) < 32 or ord(c) == 127 for c in workflow_id):
        raise InvalidInput(f"a workflow id has 1 to {MAX_WORKFLOW_ID_CHARS} characters, none "
                           "a control character",
                           errors=[{"field": "workflow_id", "message": "invalid workflow id"}])
    return workflow_id


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise InvalidInput(f"unknown id reuse policy {policy!r}; one of {', '.join(POLICIES)}",
                           errors=[{"field": "id_reuse_policy", "message": "unknown policy"}])
    return policy


def refusal(policy: str, previous_state: str | None) -> str | None:
    """Why a new run may not take the id (None: it may), given the state of the id's latest
    ended run (None: the id was never used). A running run is the caller's concern: it is
    signalled (signal-with-start) or refused (start) before this is asked."""
    if previous_state is None:
        return None
    if policy == "reject_duplicate":
        return f"the id was used before (policy reject_duplicate; its last run {previous_state})"
    if policy == "allow_duplicate_failed_only" and previous_state == "succeeded":
        return "the id's last run succeeded (policy allow_duplicate_failed_only)"
    return None

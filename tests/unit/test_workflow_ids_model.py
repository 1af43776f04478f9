"""The workflow id reuse policy's decision (ostinato.domain.workflow_ids), without servers."""

import pytest

from ostinato.domain.errors import InvalidInput
from ostinato.domain.workflow_ids import check_policy, check_workflow_id, refusal


def test_a_never_used_id_is_free_under_every_policy() -> None:
    for policy in ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"):
        assert refusal(policy, None) is None


@pytest.mark.parametrize(("policy", "previous", "refused"), [
    ("allow_duplicate", "succeeded", False),
    ("allow_duplicate", "dead_lettered", False),
    ("allow_duplicate", "cancelled", False),
    ("allow_duplicate_failed_only", "succeeded", True),
    ("allow_duplicate_failed_only", "dead_lettered", False),
    ("allow_duplicate_failed_only", "cancelled", False),
    ("reject_duplicate", "succeeded", True),
    ("reject_duplicate", "dead_lettered", True),
])
def test_each_policy_after_an_ended_run(policy: str, previous: str, refused: bool) -> None:
    assert (refusal(policy, previous) is not None) is refused


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\nb", "a\x00b"])
def test_bad_workflow_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_workflow_id(bad)


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(InvalidInput):
        check_policy("terminate_if_running")
    assert check_policy("reject_duplicate") == "reject_duplicate"

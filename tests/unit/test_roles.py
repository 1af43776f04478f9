"""The role table: every role against every action, and the defaults a route gets."""

from __future__ import annotations

import pytest

from ostinato.domain import roles

# The definition, written out by hand so the table in roles.py is checked against it.
EXPECTED = {
    roles.ADMIN: set(roles.ACTIONS),
    roles.OPERATOR: {roles.READ, roles.SUBMIT, roles.OPERATE, roles.MANAGE_KEYS, roles.WORK,
                     roles.READ_AUDIT},
    roles.VIEWER: {roles.READ},
    roles.SUBMITTER: {roles.SUBMIT},
    roles.WORKER: {roles.WORK},
}


@pytest.mark.parametrize("role", [*EXPECTED, roles.LEGACY_TENANT, "nobody"])
@pytest.mark.parametrize("action", roles.ACTIONS)
def test_each_role_may_do_exactly_its_actions(role: str, action: str) -> None:
    allowed = EXPECTED.get(roles.canonical(role), set())
    assert roles.may(role, action) is (action in allowed)


def test_a_key_of_the_one_key_era_acts_as_an_operator() -> None:
    assert roles.canonical(roles.LEGACY_TENANT) == roles.OPERATOR
    assert all(roles.canonical(r) == r for r in EXPECTED)


@pytest.mark.parametrize(("method", "action"), [
    ("GET", roles.READ), ("head", roles.READ), ("POST", roles.OPERATE), ("PUT", roles.OPERATE),
    ("DELETE", roles.OPERATE), ("PATCH", roles.OPERATE)])
def test_a_route_that_says_nothing_reads_on_get_and_operates_otherwise(
        method: str, action: str) -> None:
    assert roles.default_action(method) == action


def test_a_refusal_names_the_role_and_what_it_may_do() -> None:
    assert roles.refusal(roles.VIEWER, roles.OPERATE) == \
        "a viewer key may not operate (it may: read)"
    assert "worker gateway" in roles.refusal(roles.WORKER, roles.READ)
    assert "use a worker key" in roles.refusal(roles.SUBMITTER, roles.WORK)
    assert roles.refusal(roles.OPERATOR, roles.ADMINISTER) == "this call needs the admin key"

"""Which errors mean "the database cannot serve now" (a 503 to retry) and which are a bug (500),
and what the SDK makes of a 503's problem: pure decisions, no servers."""

from __future__ import annotations

import asyncpg
import pytest

from ostinato.db.sqlstate import is_unavailable
from ostinato.runtime.problems import status_of
from ostinato.sdk.errors import GatewayError, retry_after_of


@pytest.mark.parametrize("exc", [
    ConnectionRefusedError(111, "refused"),  # the server down: new connections refused
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.CannotConnectNowError("the database system is starting up"),
    asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.InterfaceError("connection is closed"),
    TimeoutError(),  # a pool's acquire timing out
    asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
    asyncpg.DiskFullError("could not extend file"),
])
def test_a_database_that_cannot_serve_now_is_a_503(exc: Exception) -> None:
    assert is_unavailable(exc) and status_of(exc) == 503


def test_a_group_of_connection_errors_is_a_503_and_a_group_with_a_bug_a_500() -> None:
    # Litestar raises what a request's dependencies raise on cleanup as one group: the
    # primary killed mid-transaction cut the statement and then the transaction's exit.
    cut = [asyncpg.InterfaceError("cannot call Transaction.__aexit__(): the underlying "
                                  "connection is closed"),
           asyncpg.ConnectionDoesNotExistError("terminating connection due to unexpected "
                                               "postmaster exit")]
    group = ExceptionGroup("Exceptions occurred during cleanup of dependencies", cut)
    assert is_unavailable(group) and status_of(group) == 503
    nested = ExceptionGroup("outer", [group, TimeoutError()])
    assert is_unavailable(nested) and status_of(nested) == 503
    with_bug = ExceptionGroup("cleanup", [*cut, ValueError("a bug")])
    assert not is_unavailable(with_bug) and status_of(with_bug) == 500


@pytest.mark.parametrize("exc", [
    ValueError("a bug"),
    asyncpg.UndefinedTableError('relation "jobz" does not exist'),
    asyncpg.PostgresSyntaxError("syntax error"),
])
def test_a_bug_is_still_a_500(exc: Exception) -> None:
    assert not is_unavailable(exc) and status_of(exc) == 500


def test_the_sdk_waits_what_a_503_asked_and_no_more_than_a_minute() -> None:
    assert retry_after_of(GatewayError(503, "Service unavailable", retry_after=1)) == 1
    assert retry_after_of(GatewayError(503, "Service unavailable", retry_after=3600)) == 60
    assert retry_after_of(GatewayError(500, "Internal error")) == 0
    assert retry_after_of(ConnectionResetError()) == 0

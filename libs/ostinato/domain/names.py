"""Names users choose that become parts of other names: one pattern each, checked where input
is decoded (the api's job requests, the worker protocol's claims) and where the name is used
(a pool's Kafka topic `ostinato.runs.ready.<pool>`), so a name the decoder accepts can never
fail later as a `ValueError` (a 500)."""

from __future__ import annotations

import re
from typing import Annotated, Final

import msgspec

# A pool names a Kafka topic: lower case, digits, `_` and `-`, at most 63 characters. The
# lookahead refuses a trailing newline, which Python's `$` (unlike JSON Schema's) lets through.
POOL_NAME_PATTERN: Final = r"^(?!.*\n)[a-z0-9][a-z0-9_-]{0,62}$"
POOL_NAME: Final = re.compile(POOL_NAME_PATTERN)
PoolName = Annotated[str, msgspec.Meta(pattern=POOL_NAME_PATTERN)]

__all__ = ["POOL_NAME", "POOL_NAME_PATTERN", "PoolName"]

"""Session ids: validated before they touch a path, generated sortable by time."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from zero.errors import UsageError

__all__ = ["SESSION_ID", "new_session_id", "short_id", "validate_session_id"]

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def validate_session_id(value: str) -> str:
    """Return ``value`` if it is a valid session id, else raise ``UsageError`` saying why."""
    if not isinstance(value, str) or not SESSION_ID.fullmatch(value):
        raise UsageError(
            f"invalid session id {value!r}: use 1-128 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return value


def new_session_id(prefix: str = "zero") -> str:
    """``<prefix>_<UTC yyyymmddHHMMSS>_<12 hex>``: unique, and sorted by creation time."""
    return f"{prefix}_{datetime.now(UTC):%Y%m%d%H%M%S}_{secrets.token_hex(6)}"


def short_id(session_id: str) -> str:
    """The first 8 characters of an id's random last part: what the tree and the list show, and what
    the command line takes as a prefix."""
    return session_id.rsplit("_", 1)[-1][:8]

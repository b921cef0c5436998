"""Secret redaction, applied before text reaches the model, the terminal or disk."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["Redactor", "redact"]

MASK = "[REDACTED]"

_PATTERNS = [
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_-]{35}",  # Google API key
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{20,}=*",
    r"(?<=[Aa][Pp][Ii]_[Kk][Ee][Yy]=)[A-Za-z0-9._-]{16,}",
]
# Every pattern above matches only text that holds one of these (lowercased): a text with none
# of them skips the regex, which scans every position and costs ~30 us per kilobyte.
_TRIGGERS = (
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "akia",
    "xox",
    "aiza",
    "glpat-",
    "private key",
    "bearer ",
    "api_key=",
)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


class Redactor:
    """Masks well-known token formats and the values of secret-looking environment variables."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        self._regex = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
        env = os.environ if environ is None else environ
        values = {v for k, v in env.items() if _SECRET_ENV.search(k) and len(v) >= 8}
        # Longest first, so a value containing another is masked whole.
        self._literals = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._literals:
            if value in text:
                text = text.replace(value, MASK)
        lowered = text.lower()
        if not any(trigger in lowered for trigger in _TRIGGERS):
            return text
        return self._regex.sub(MASK, text)


_default: Redactor | None = None


def redact(text: str) -> str:
    """Redact ``text`` with a redactor built once from this process's environment."""
    global _default
    if _default is None:
        _default = Redactor()
    return _default(text)

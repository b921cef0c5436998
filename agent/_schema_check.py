"""Checking a value against a JSON Schema: in process, or as a script (``python -I _schema_check.py``) that reads
``[schema, value]`` as JSON on stdin, says ``ready`` on a line of its own once it can check, then writes the
problems as JSON on stdout.

As a script it imports nothing of Zero (nor its packages' ``__init__``), so the child process that checks a
schema with regular expressions starts in the time ``jsonschema`` takes to import.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ENDLESS = "the output schema refers to itself without end (a $ref cycle), so no result can be checked against it"


def problems_of(schema: dict[str, Any], value: Any, most: int = 3) -> list[str]:
    """What is wrong with ``value`` by ``schema``, the first ``most`` problems, each at its place."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    except RecursionError:
        return [ENDLESS]
    return [f"{'.'.join(str(p) for p in e.absolute_path) or 'the result'}: {e.message}" for e in errors[:most]]


if __name__ == "__main__":
    schema, value = json.load(sys.stdin)
    import jsonschema  # noqa: F401 (loaded before "ready": the parent's time limit is the check's alone)

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    json.dump(problems_of(schema, value), sys.stdout)

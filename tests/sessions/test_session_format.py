"""docs/SESSION_FORMAT.md is the session files' contract: it names every metadata field, the record's keys
and every stored event kind with exactly its payload fields (which of them may be left out, too)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import typing
from pathlib import Path

import pytest
from pydantic import TypeAdapter
from support.package import ROOT

from zero.agent import STORED, Event, Usage, decode_event
from zero.sessions import SessionMetadata, UsageTotals, parse_log, record_of
from zero.sessions.models import now_iso

DOC = (ROOT / "docs" / "SESSION_FORMAT.md").read_text()


def section(heading: str) -> str:
    start = DOC.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    end = DOC.find(f"\n{level} ", start + len(heading) + 2)
    return DOC[start : end if end >= 0 else None]


def first_column(heading: str) -> list[list[str]]:
    """The code spans of the first cell of each row of the section's first table."""
    rows = [line for line in section(heading).splitlines() if line.startswith("| `")]
    return [re.findall(r"`([^`]+)`", row.split("|")[1]) for row in rows]


def test_the_metadata_table_names_every_field() -> None:
    documented = [name for cell in first_column("## `metadata.json`") for name in cell]
    assert documented == list(SessionMetadata.model_json_schema(by_alias=True)["properties"])


def test_the_usage_object_is_described_field_by_field() -> None:
    (fields,) = re.findall(r"A usage object is `\{([^}]+)\}`", " ".join(section("## `metadata.json`").split()))
    assert fields.split(", ") == list(UsageTotals.model_json_schema(by_alias=True)["properties"])


def test_the_example_record_has_the_records_keys_and_decodes() -> None:
    (example,) = re.findall(r"```json\n(.+)\n```", section("## `events.jsonl`"))
    record = json.loads(example)
    event = decode_event(record["type"], record["sessionId"], record["payload"])
    assert event is not None
    assert record == record_of(record["sessionId"], record["sequence"], record["createdAt"], event)
    log = Path(record["sessionId"]) / "events.jsonl"
    assert [stored.event for stored in parse_log(example.encode() + b"\n", log)] == [event]


def payload_fields(cls: type) -> list[str]:
    """The payload keys of an event class, as stored (camelCase), ``?`` after those that have a default."""
    schema = TypeAdapter(cls).json_schema(by_alias=True)
    required = set(schema.get("required", ()))
    return [
        name + ("" if name in required else "?") for name in schema["properties"] if name not in ("sessionId", "kind")
    ]


def test_the_event_kinds_are_every_stored_kind_with_its_payload_fields() -> None:
    rows = [line.split("|") for line in section("### Event kinds").splitlines() if line.startswith("| `")]
    documented = {row[1].strip(" `"): row[2].strip(" `").split(", ") for row in rows}
    kinds = {
        kind.default: cls for cls in typing.get_args(Event) for kind in dataclasses.fields(cls) if kind.name == "kind"
    }
    assert sorted(documented) == sorted(STORED)
    assert {kind: payload_fields(kinds[kind]) for kind in STORED} == documented


def test_a_stamp_is_utc_to_the_millisecond_as_isoformat_writes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    import types
    from datetime import UTC, datetime

    from zero.sessions import models

    clock = [1764714000.9995, 1764714000.0, 1764714001.0004, 1764714001.5, 1767225599.999, 1767225600.001]
    fake = types.SimpleNamespace(time=lambda: clock[0], strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(models, "time", fake)  # the module's clock only
    for now in clock:  # a second's turn, a second back, the year's turn: each stamp as the clock says
        clock[0] = now
        expected = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert now_iso() == expected


def test_a_sessions_totals_are_the_sum_of_its_usage_events_as_usage_adds_them() -> None:
    """``UsageTotals.add`` runs on every event that spends, so it adds in place, field by field: its result must be
    what ``to_usage() + usage`` gives, made into totals, in every mix of unknown costs, estimates and calls."""
    costs = (None, 0.0, 1e-11, 0.00123, 2.5)
    cases = [
        Usage(
            prompt_tokens=p,
            completion_tokens=c,
            cached_tokens=p // 2,
            cost_usd=cost,
            calls=calls,
            unpriced=u,
            estimated=e,
        )
        for p, c, cost, calls, u, e in itertools.product((0, 7), (0, 3), costs, (0, 1), (False, True), (False, True))
    ]
    for start in cases[::7]:
        totals = UsageTotals.of(start)
        for usage in cases[::5]:
            expected = UsageTotals.of(totals.to_usage() + usage)
            totals.add(usage)
            assert totals.model_dump_json() == expected.model_dump_json()
            assert totals.model_fields_set == expected.model_fields_set

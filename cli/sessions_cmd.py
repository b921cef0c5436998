"""``zero sessions list | show ID | tree ID | lineage ID``"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import TextIO

from rich.console import Console

from zero.agent import Usage, format_cost
from zero.cli.common import Streams, print_error, session_store
from zero.errors import ZeroError
from zero.sessions import (
    FileSessionStore,
    SessionMetadata,
    SessionStore,
    lineage,
    records_json,
    session_tree,
    validate_session_id,
)
from zero.tools.describe import printable

__all__ = ["run_sessions"]


def run_sessions(args: argparse.Namespace, streams: Streams) -> int:
    out = streams.stdout
    try:
        store = session_store()
        action = args.sessions_command
        if action == "list":
            return _list(store, args.json, out)
        session_id = validate_session_id(args.session_id)
        if action == "show":
            return _show(store, session_id, args.json, out)
        if action == "tree":
            return _tree(store, session_id, args.json, out, args.svg)
        return _lineage(store, session_id, args.json, out)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return 2 if "not found" in str(e) else e.exit_code


def _usage_text(usage: Usage) -> str:
    return f"{usage.total_tokens} tokens, {format_cost(usage)}"


def _label(meta: SessionMetadata) -> str:
    who = meta.member_name or meta.specialist or meta.agent_name or meta.session_kind or "session"
    return f"{who} [{meta.session_kind or 'root'}] {meta.status}"


def _list(store: FileSessionStore, as_json: bool, out: TextIO) -> int:
    sessions = store.list()
    if as_json:
        out.write(json.dumps([m.to_json() for m in sessions], indent=2) + "\n")
        return 0
    for m in sessions:
        kind = m.session_kind or "root"
        out.write(f"{m.session_id}  {m.updated_at}  {kind:<6} {m.status:<16} {printable(m.title[:60])}\n")
    if not sessions:
        out.write(f"no sessions in {store.root}\n")
    return 0


def _show(store: SessionStore, session_id: str, as_json: bool, out: TextIO) -> int:
    meta = store.metadata(session_id)
    events = store.events(session_id)
    if as_json:
        records = records_json(events, session_id)
        out.write(json.dumps({"metadata": meta.to_json(), "events": records}, indent=2) + "\n")
        return 0
    out.write(f"session {meta.session_id}: {_label(meta)}\n")
    for key in (
        "title",
        "cwd",
        "provider",
        "model_id",
        "parent_session_id",
        "root_session_id",
        "depth",
        "created_at",
        "updated_at",
    ):
        value = getattr(meta, key)
        if value not in ("", None):
            out.write(f"  {key}: {printable(str(value))}\n")
    out.write(f"  own usage: {_usage_text(meta.usage.to_usage())}\n")
    out.write(f"  with children: {_usage_text(meta.subtree_usage)}\n")
    counts = Counter(e.event.kind for e in events)
    out.write(f"  events: {len(events)} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})\n")
    for e in events:
        event = e.event
        if event.kind == "message" and event.role in ("user", "assistant") and event.content:
            text = " ".join(event.content.split())
            out.write(f"  #{e.sequence} {event.role}: {printable(text[:200])}\n")
    return 0


def _tree(store: SessionStore, session_id: str, as_json: bool, out: TextIO, svg: str | None = None) -> int:
    if as_json:
        out.write(json.dumps(session_tree(store, session_id).to_json(), indent=2) + "\n")
        return 0
    from zero.orchestrator.live import tree_from_store
    from zero.orchestrator.view import render_tree

    tree = tree_from_store(store, session_id)
    console = Console(file=out, highlight=False, record=svg is not None, width=None if out.isatty() else 120)
    console.print(render_tree(tree, budget=tree.budget()))
    if svg:
        picture = console.export_svg(title=f"zero sessions tree {session_id}")
        # Keep the spaces between coloured runs: without this, SVG renderers collapse them.
        picture = picture.replace("<svg ", '<svg xml:space="preserve" ', 1)
        Path(svg).write_text(picture, encoding="utf-8")
        out.write(f"saved {svg}\n")
    return 0


def _lineage(store: SessionStore, session_id: str, as_json: bool, out: TextIO) -> int:
    chain = lineage(store, session_id)
    if as_json:
        out.write(json.dumps([m.to_json() for m in chain], indent=2) + "\n")
    else:
        out.write(" -> ".join(m.session_id for m in chain) + "\n")
    return 0

"""``zero sessions list | show | tree | lineage | resume | fork | export | rm | prune``"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

from zero.agent import STATUSES, RunStarted, format_cost, format_tokens
from zero.cli._console import Console
from zero.cli.common import Streams, confirm, print_error, session_store, workspace_from
from zero.cli.options import SessionsOptions
from zero.cli.session_ids import resolve_session_id
from zero.cli.transcript import Transcript
from zero.errors import SessionError, UsageError, ZeroError, did_you_mean
from zero.sessions import (
    FileSessionStore,
    Rollup,
    SessionMetadata,
    SessionStore,
    fork_session,
    lineage,
    records_json,
    same_folder,
    session_tree,
    short_id,
    totals_json,
)
from zero.sessions.index import Row
from zero.sessions.script import answered, export_script
from zero.tools.describe import printable

__all__ = ["run_sessions"]


def run_sessions(args: SessionsOptions, streams: Streams) -> int:
    action = args.action
    out = streams.stdout
    try:
        store = session_store(writable=action in ("fork", "rm", "prune"))
        if action == "list":
            return _list(store, args, out)
        if action == "prune":
            return _prune(store, args, out)
        here = workspace_from(args) if args.here else None
        session_id = resolve_session_id(store, args.session_id, here=here)
        if action == "show":
            return _show(store, session_id, args, out)
        if action == "tree":
            return _tree(store, session_id, args.json, out, args.svg)
        if action == "lineage":
            return _lineage(store, session_id, args.json, out)
        if action == "fork":
            return _fork(store, session_id, args, streams)
        if action == "export":
            return _export(store, session_id, args, out)
        return _remove(store, session_id, args, streams)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code


# -- list ------------------------------------------------------------------------------


def _list(store: FileSessionStore, args: SessionsOptions, out: TextIO) -> int:
    if args.status and args.status not in (*STATUSES, "damaged"):
        raise UsageError(
            f"--status {args.status!r} is not a status{did_you_mean(args.status, STATUSES)}; "
            f"choose one of {', '.join(STATUSES)}, or damaged"
        )
    rows, damaged = store.listing()
    rows += [_damaged_row(store, sid, why) for sid, why in damaged.items()]
    rows.sort(key=lambda m: (m.get("updatedAt", ""), m.get("sessionId", "")), reverse=True)
    by_id = {r["sessionId"]: r for r in rows}
    rollup = Rollup.of_rows(rows)  # before any filter: a session's total counts every descendant
    if args.root:
        top = resolve_session_id(store, args.root)
        rows = [r for r in rows if top in _ancestry(r, by_id)]
    if args.here:
        here = workspace_from(args)
        rows = [r for r in rows if same_folder(str(r.get("cwd") or ""), here)]
    if args.kind:
        rows = [r for r in rows if (r.get("sessionKind") or "root") == args.kind]
    if args.status:
        rows = [r for r in rows if r.get("status") == args.status]
    ordered = _grouped(rows)
    shown = ordered if args.limit == 0 else ordered[: args.limit]
    if args.json:
        listed = [_with_totals(row, rollup) for row, _ in shown]
        out.write(json.dumps(listed, indent=None if args.limit == 0 else 2) + "\n")
        return 0
    if not shown:
        filtered = args.root or args.here or args.kind or args.status
        out.write(f"no sessions{' match' if filtered else ''} in {store.root}\n")
        return 0
    now = datetime.now(UTC)
    header = f"{'ID':<9} {'KIND':<6} {'STATUS':<16} {'AGENT':<18} {'TOKENS own/all':>15} {'COST':>10} {'AGE':>5}  TITLE"
    out.write(header + "\n")
    for row, depth in shown:
        indent = "  " * depth if args.tree else ""
        agent = indent + str(row.get("memberName") or row.get("specialist") or row.get("agentName") or "zero")
        if "damaged" in row:  # nothing of it can be trusted: what is wrong goes where the title would
            agent, tokens, cost = "?", "?", "?"
            title = " ".join(line.strip() for line in str(row["damaged"]).splitlines())
            title = title.replace(f"{store.root / row['sessionId']}/", "").replace(f"{store.root}/", "")[:120]
        else:
            own, subtree = rollup.own(row["sessionId"]), rollup.subtree(row["sessionId"])
            tokens = f"{format_tokens(own.total_tokens)}/{format_tokens(subtree.total_tokens)}"
            cost, title = format_cost(subtree), str(row.get("title", ""))[:60]
        out.write(
            f"{short_id(row['sessionId']):<9} {(row.get('sessionKind') or 'root'):<6} {row.get('status', ''):<16} "
            f"{printable(agent[:18]):<18} {tokens:>15} {cost:>10} {_age(row, now):>5}  {printable(title)}\n"
        )
    if args.limit and len(ordered) > args.limit:
        out.write(f"({len(ordered) - args.limit} more: --limit 0 shows all, or filter with --kind, --status, --here)\n")
    return 0


def _damaged_row(store: FileSessionStore, session_id: str, why: str) -> Row:
    """A session that cannot be read, as a row of the list: ``status`` says ``damaged``, ``damaged`` says why."""
    try:
        mtime = (store.root / session_id).stat().st_mtime
        updated = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except OSError:
        updated = ""
    return {"sessionId": session_id, "status": "damaged", "damaged": why, "updatedAt": updated}


def _ancestry(row: Row, by_id: dict[str, Row]) -> set[str]:
    found = {row["sessionId"]}
    parent = row.get("parentSessionId")
    while parent and parent not in found and parent in by_id:
        found.add(parent)
        parent = by_id[parent].get("parentSessionId")
    return found


def _grouped(rows: list[Row]) -> list[tuple[Row, int]]:
    """Each root's sessions together (the root first, its descendants below it, oldest first), the
    roots newest first; a session whose parent is not in ``rows`` stands as a root."""
    ids = {r["sessionId"] for r in rows}
    kids: dict[str, list[Row]] = {}
    tops: list[Row] = []
    for row in rows:
        parent = row.get("parentSessionId")
        if parent and parent in ids:
            kids.setdefault(parent, []).append(row)
        else:
            tops.append(row)
    out: list[tuple[Row, int]] = []

    def walk(row: Row, depth: int) -> None:
        out.append((row, depth))
        for kid in sorted(kids.get(row["sessionId"], []), key=lambda r: (r.get("createdAt", ""), r["sessionId"])):
            walk(kid, depth + 1)

    for top in tops:  # rows come newest first
        walk(top, 0)
    return out


def _with_totals(row: Row, rollup: Rollup) -> Row:
    """A row with its children's usage and its subtree's as the one fold has them (as ``sessions tree``
    shows them), not as its own log's ``child_end`` events say."""
    if "damaged" in row:
        return row
    sid = row["sessionId"]
    return {**row, "childrenUsage": totals_json(rollup.below(sid)), "subtreeUsage": rollup.subtree(sid).to_json()}


def _age(row: Row, now: datetime) -> str:
    try:
        then = datetime.fromisoformat(str(row.get("updatedAt", "")).replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- show, tree, lineage -------------------------------------------------------------


def _show(store: SessionStore, session_id: str, args: SessionsOptions, out: TextIO) -> int:
    if args.json:
        meta = store.metadata(session_id)
        records = records_json(store.events(session_id), session_id)
        out.write(json.dumps({"metadata": meta.to_json(), "events": records}, indent=2) + "\n")
        return 0
    for line in Transcript(store=store, children=args.children, full=args.full).lines(session_id):
        out.write(line + "\n")
    return 0


def _tree(store: SessionStore, session_id: str, as_json: bool, out: TextIO, svg: str | None = None) -> int:
    if as_json:
        out.write(json.dumps(session_tree(store, session_id).to_json(), indent=2) + "\n")
        return 0
    from zero.orchestrator.live import tree_from_store
    from zero.orchestrator.view import render_tree

    tree = tree_from_store(store, session_id)
    console = Console(file=out, highlight=False, record=svg is not None, width=None if out.isatty() else 120)
    console.print(render_tree(tree, budget=tree.budget(), ids=True))
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


# -- fork, export, rm, prune ------------------------------------------------------------


def _fork(store: SessionStore, session_id: str, args: SessionsOptions, streams: Streams) -> int:
    meta, history = fork_session(store, session_id, at_sequence=args.at)
    out = streams.stdout
    worked = {e.event.cwd for e in store.events(session_id) if isinstance(e.event, RunStarted)} - {meta.cwd}
    if worked:  # a member in its team's worktree: the fork is a session of its own, in the workspace itself
        streams.stderr.write(
            f"warning: {session_id} worked in a worktree of its team's run ({printable(sorted(worked)[-1])}); the "
            f"fork works in {printable(meta.cwd)} itself, not in a worktree: its edits land there directly\n"
        )
    if args.json:
        out.write(json.dumps(meta.to_json(), indent=2) + "\n")
    else:
        out.write(
            f"forked {session_id} at event {meta.forked_at_sequence} into {meta.session_id} "
            f'({len(history)} messages)\ncontinue it with: zero sessions resume {meta.session_id} "..."\n'
        )
    return 0


def _export(store: SessionStore, session_id: str, args: SessionsOptions, out: TextIO) -> int:
    if args.as_script:
        from zero.cli.replay_cmd import is_script_file, write_script

        script = export_script(store, session_id)
        write_script(script, Path(args.out) if args.out else None, out, force=args.force)
        if args.out:
            assert script.recording is not None
            named = args.out if is_script_file(args.out) else f"./{args.out}"  # (a bare word is a session's id)
            out.write(
                f"wrote {args.out}: {_count(len(answered(script.turns)), 'model call')} of "
                f"{_count(len(script.recording.sessions), 'session')}\nreplay it offline with: zero replay {named}\n"
            )
        return 0
    if args.out:
        raise UsageError("-o FILE is for --as-script; the Markdown and JSONL exports go to stdout (> FILE)")
    ids = [n.meta.session_id for n in session_tree(store, session_id).walk()] if args.children else [session_id]
    if args.format == "jsonl":
        for sid in ids:
            for record in records_json(store.events(sid), sid):
                out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        return 0
    lines = list(Transcript(store=store, children=args.children, full=True, markdown=True).lines(session_id))
    out.write(f"# Session {session_id}\n")  # (once it is read: a damaged session exports nothing)
    for line in lines:
        out.write(line + "\n")
    return 0


def _remove(store: FileSessionStore, session_id: str, args: SessionsOptions, streams: Streams) -> int:
    rows, damaged = store.listing()  # (its subtree by the parents the readable sessions name: a damaged one goes too)
    by_id = {str(r["sessionId"]): r for r in rows}
    parent = str(by_id.get(session_id, {}).get("parentSessionId") or "")
    if parent in by_id:  # (a team's resume, a parent's transcript, would miss it)
        root = str(by_id[session_id].get("rootSessionId") or parent)
        raise UsageError(f"{session_id} is part of the run {root}: remove the whole run with zero sessions rm {root}")
    ids = [session_id, *_descendants(session_id, rows)]
    if running := [sid for sid in ids if store.held(sid)]:
        raise UsageError(f"{', '.join(running)} is still running; stop it first (or wait for it to end)")
    below = len(ids) - 1
    why = f" (damaged: {damaged[session_id].splitlines()[0]})" if session_id in damaged else ""
    question = f"remove {session_id}{why}" + (f" and its {_count(below, 'descendant')}?" if below else "?")
    if not confirm(question, streams, yes=args.yes, needs=f"removing {_count(len(ids), 'session')}"):
        streams.stderr.write("nothing removed\n")
        return 1
    removed = [sid for sid in ids if store.remove(sid)]
    if left := [sid for sid in ids if sid not in removed and store.path(sid).exists()]:
        raise SessionError(f"{', '.join(left)} started running meanwhile and was left; the rest is removed")
    if args.json:
        streams.stdout.write(json.dumps({"removed": removed}) + "\n")
    else:
        streams.stdout.write(f"removed {_count(len(removed), 'session')}\n")
    return 0


def _descendants(session_id: str, rows: list[Row]) -> list[str]:
    """The sessions below ``session_id``, parents before their children (a cycle of damaged links once)."""
    kids: dict[str, list[str]] = {}
    for row in rows:
        if parent := row.get("parentSessionId"):
            kids.setdefault(str(parent), []).append(str(row["sessionId"]))
    found: list[str] = []
    seen = {session_id}
    todo = [session_id]
    while todo:
        for kid in kids.get(todo.pop(0), []):
            if kid not in seen:
                seen.add(kid)
                found.append(kid)
                todo.append(kid)
    return found


def _prune(store: FileSessionStore, args: SessionsOptions, out: TextIO) -> int:
    age = _parse_age(args.older_than)
    cutoff = (datetime.now(UTC) - age).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = store.rows()
    by_root: dict[str, list[Row]] = {}
    for row in rows:
        by_root.setdefault(str(row.get("rootSessionId") or row["sessionId"]), []).append(row)
    # A whole run goes, or none of it: every session of the root finished, and the newest is old.
    doomed = [
        str(r["sessionId"])
        for group in by_root.values()
        if all(r.get("status") not in ("pending", "running") for r in group)
        and max(str(r.get("updatedAt", "")) for r in group) < cutoff
        for r in group
    ]

    def keep(meta: SessionMetadata) -> bool:  # as it is now that no run can start: resumed since the listing?
        return not meta.finished or meta.updated_at >= cutoff

    removed = doomed if args.dry_run else [sid for sid in doomed if store.remove(sid, keep=keep)]
    if args.json:
        out.write(json.dumps({"removed": removed, "dryRun": args.dry_run}) + "\n")
    else:
        verb = "would remove" if args.dry_run else "removed"
        out.write(f"{verb} {_count(len(removed), 'session')} older than {args.older_than}\n")
    return 0


def _count(n: int, thing: str) -> str:
    return f"{n:,} {thing}{'' if n == 1 else 's'}"


def _parse_age(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([dhms]?)\s*", text)
    if not match:
        raise UsageError(f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h, 90m or 45s")
    seconds = int(match.group(1)) * {"d": 86_400, "h": 3_600, "m": 60, "s": 1, "": 86_400}[match.group(2)]
    if not 0 < seconds <= MAX_AGE_DAYS * 86_400:
        raise UsageError(f"--older-than {text!r}: give an age above 0 and at most {MAX_AGE_DAYS}d (100 years)")
    return timedelta(seconds=seconds)


MAX_AGE_DAYS = 36_500

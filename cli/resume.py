"""``zero sessions resume``: which recorded session, in which workspace, continued as which agent."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from zero.cli.common import session_store
from zero.cli.config import RunSettings
from zero.cli.exec import Opener
from zero.cli.session_ids import resolve_session_id
from zero.errors import UsageError
from zero.orchestrator import BudgetGuard, Ledger
from zero.orchestrator.resume import charge, read_team
from zero.sessions import AgentSession, SessionMetadata, session_workspace
from zero.specialists import AgentContext, Placement, open_specialist, resume_agent

__all__ = ["resumed"]


def resumed(args: argparse.Namespace, workspace: Path, settings: RunSettings) -> Opener:
    """The opener of the session ``args.session_id`` names, checked before anything runs: it exists,
    it is not a team (``swarm resume`` runs those), and it belongs to ``workspace``."""
    store = session_store(writable=True)
    session_id = resolve_session_id(store, args.session_id, here=workspace if args.here else None)
    meta = store.metadata(session_id)
    if meta.session_kind == "team":
        raise UsageError(f"{session_id} is a team run: resume it with zero swarm resume {session_id}")
    session_workspace(meta, workspace)

    async def open_it(ctx: AgentContext) -> AgentSession:
        if not meta.specialist:  # a top-level agent (zero exec), or a fork of one
            return await resume_agent(
                ctx, session_id, permission_mode=settings.permission_mode, max_turns=settings.max_turns
            )
        spec = ctx.registry.specialists.get(meta.specialist)
        if spec is None:
            raise UsageError(
                f"{session_id} ran as the specialist {meta.specialist!r}, which is not defined any more "
                "(zero specialists list shows the ones there are)"
            )
        if meta.session_kind == "member" and meta.parent_session_id:
            ctx = _under_team_budget(ctx, meta)
        placement = Placement(
            kind=meta.session_kind or "child",
            parent_session_id=meta.parent_session_id,
            root_session_id=meta.root_session_id or session_id,
            depth=meta.depth,
            title=meta.title,
            team_name=meta.team_name,
            member_name=meta.member_name,
        )
        return await open_specialist(
            ctx,
            spec,
            placement,
            session_id=session_id,
            resume=True,
            permission_mode=settings.permission_mode,
            provider=None if args.provider else (meta.provider or None),
            model=args.model or meta.model_id or None,
            max_turns=settings.max_turns,
        )

    return open_it


def _under_team_budget(ctx: AgentContext, meta: SessionMetadata) -> AgentContext:
    """A member resumed alone spends from what its team's budget has left."""
    try:
        recorded = read_team(ctx.store, meta.parent_session_id)
    except UsageError:  # a run of a Zero that did not record its team: no budget to spend from
        return ctx
    ledger = charge(Ledger(recorded.budget, name="team"), recorded)
    return replace(ctx, guards=(*ctx.guards, BudgetGuard(ledger, ctx.prices)), max_depth=ctx.max_depth + 1)

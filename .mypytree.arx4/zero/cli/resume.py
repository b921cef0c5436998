"""``zero sessions resume``: which recorded session, in which workspace, continued as which agent."""

from __future__ import annotations

from pathlib import Path

from zero.cli.common import Opener, session_store
from zero.cli.config import RunSettings
from zero.cli.options import ResumeOptions
from zero.cli.session_ids import resolve_session_id
from zero.errors import UsageError
from zero.orchestrator import open_member
from zero.orchestrator.resume import member_owns, team_ledger
from zero.sessions import AgentSession, session_workspace
from zero.specialists import AgentContext, SpecialistOptions, open_specialist, resume_agent

__all__ = ["resumed"]


def resumed(args: ResumeOptions, workspace: Path, settings: RunSettings) -> Opener:
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
        options = SpecialistOptions(
            node=ctx.tree.recorded(meta),
            resume=True,
            permission_mode=settings.permission_mode,
            provider=None if args.run.provider else (meta.provider or None),
            model=args.run.model or meta.model_id or None,
            max_turns=settings.max_turns,
        )
        if meta.session_kind == "member" and meta.parent_session_id:  # it spends what its team has left
            team = meta.parent_session_id
            owns = member_owns(ctx.store, team, meta.member_name) if meta.member_name else None
            return await open_member(ctx, spec, options, ledger=team_ledger(ctx.store, team), owns=owns)
        return await open_specialist(ctx, spec, options)

    return open_it

"""``zero swarm run|validate|resume --executor ray``: a team's members on a Ray cluster (docs/TEAMS.md, "On a
Ray cluster"). Ray is imported here only, and only by a run that asks for it."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from zero.cli._streams import Streams
from zero.cli.common import open_context, session_store
from zero.cli.config import RunSettings
from zero.cli.options import RunOptions, SwarmOptions
from zero.errors import ConfigError
from zero.orchestrator import TeamPlan
from zero.sessions import SessionStore
from zero.specialists import AgentContext, SpecialistRegistry
from zero.tools import Redactor

if TYPE_CHECKING:
    from zero.orchestrator.ray_executor import RayExecutor

__all__ = ["NodeContext", "cluster", "on_ray", "wants_ray"]


def wants_ray(args: SwarmOptions, plan: TeamPlan) -> bool:
    """``--executor``, else the team file's ``[scheduler] executor``."""
    return (args.executor or plan.team.scheduler.executor) == "ray"


@contextmanager
def cluster(args: SwarmOptions, plan: TeamPlan) -> Iterator[SwarmOptions]:
    """This command joined to the cluster of ``--ray-address``, every member of ``plan`` placeable on it (else
    a ``TeamError`` naming the member and what no node has), before any model call; left at the end. It gives
    the options a node gets (a node reads the script itself: its path made absolute, which must mean the same
    file there: one machine, or a folder every node mounts)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray, an optional extra: pip install 'zero-agent[ray]'") from None
    from zero.orchestrator.ray_executor import check_placement, connect

    connect(args.ray_address)
    try:
        check_placement(plan)
        run = replace(args.run, script=os.path.abspath(args.run.script)) if args.run.script else args.run
        yield replace(args, run=run)
    finally:
        ray.shutdown()


@dataclass(frozen=True, kw_only=True)
class NodeContext:
    """How a member host on a node makes its members' context: this run's flags, settings, workspace and
    specialists, with the session store it is given (the run's session writer). Ray takes it to every node."""

    run: RunOptions
    settings: RunSettings
    workspace: Path
    registry: SpecialistRegistry

    def __call__(self, store: SessionStore) -> AbstractAsyncContextManager[AgentContext]:
        streams = Streams(sys.stdout, sys.stderr, sys.stdin)  # (a host's warnings go to Ray's worker logs)
        return open_context(self.run, self.settings, self.workspace, streams, self.registry, store=store)


@asynccontextmanager
async def on_ray(
    args: SwarmOptions,
    plan: TeamPlan,
    settings: RunSettings,
    workspace: Path,
    streams: Streams,
    registry: SpecialistRegistry,
) -> AsyncIterator[tuple[AgentContext, RayExecutor]]:
    """The run's context, its sessions owned by a session writer on this node, and the executor of its members."""
    from zero.orchestrator.ray_executor import RayExecutor, start_writer

    root = session_store(writable=True).root  # a run that cannot be recorded does not start
    store = start_writer(root, Redactor())
    run = args.run
    async with open_context(run, settings, workspace, streams, registry, store=store) as ctx:
        node = NodeContext(run=run, settings=settings, workspace=workspace, registry=registry)
        async with RayExecutor(ctx, node, store, node_retries=plan.team.scheduler.node_retries) as executor:
            executor.warm(plan)
            yield ctx, executor

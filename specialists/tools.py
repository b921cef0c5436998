"""The model-facing delegation tools: Task, TaskOutput and TaskStop."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from zero.tools import ArgsModel, BuiltinTool, ToolContext, ToolOutput
from zero.tools.base import Background, current_call_id

__all__ = ["Isolation", "Task", "TaskOutput", "TaskRunner", "TaskStop"]

Isolation = Literal["worktree", "none"]


class TaskRunner(Protocol):
    """What the Task tools drive: an agent's delegation machinery."""

    async def task(
        self,
        *,
        name: str | None,
        prompt: str,
        description: str | None,
        background: bool,
        resume: str | None,
        call_id: str,
        jobs: list[Background] | None = None,
        isolation: Isolation | None = None,
        output_schema: dict[str, Any] | str | None = None,
    ) -> ToolOutput: ...

    async def output(self, task_id: str, block: bool, wait_seconds: float) -> ToolOutput: ...

    async def stop(self, task_id: str) -> ToolOutput: ...


class TaskArgs(ArgsModel):
    name: str | None = Field(None, description="The specialist to run (with resume: the session's specialist).")
    prompt: str = Field(min_length=1, description="The complete, self-contained assignment for the specialist.")
    description: str | None = Field(None, description="A short label (3-8 words) for the task.")
    run_in_background: bool = Field(False, description="Return at once with a task_id; check it with TaskOutput.")
    resume: str | None = Field(None, description="Continue an earlier specialist session (its session_id).")
    isolation: Isolation | None = Field(
        None,
        description='"worktree": the specialist works in a git worktree of its own, branched from what you see '
        "now (your uncommitted edits included), and its changes come back as a branch to merge; "
        '"none": in your workspace. Default: as the specialist says, else "none".',
    )
    output_schema: dict[str, Any] | Literal["json"] | None = Field(
        None,
        description='A JSON Schema the specialist\'s result must match (or "json": any JSON value): it ends by '
        "submitting a result valid by it, and the report carries that result as JSON. Default: as the "
        "specialist says, else a text report.",
    )


class Task(BuiltinTool[TaskArgs]):
    """Its own effect is only to start an agent; what that agent may do is the narrower of its
    manifest and the caller's permission mode. So it counts as ``read``, and several Task calls
    of one turn run side by side."""

    name = "Task"
    description = (
        "Delegate a task to a specialist agent, which works in its own session with its own tools "
        "and returns a report (session_id first). Several Task calls in one turn run in parallel. "
        "Use resume with a session_id to continue a specialist's earlier session with its history."
    )
    side_effect = "read"
    args = TaskArgs

    def __init__(self, delegator: TaskRunner, names: Callable[[], Sequence[str]]):
        self.delegator = delegator
        self.names = names  # the specialists there are now (CreateSpecialist may add one during a session)

    @property
    def parameters(self) -> dict[str, Any]:
        # The schema says which specialists there are, as an enum, and that a name is needed, so a
        # model whose output a grammar constrains (llama.cpp, vLLM) can only make a valid call.
        # (A call that resumes a session without a name is still taken.)
        schema = copy.deepcopy(super().parameters)
        schema["properties"]["name"] = {
            "type": "string",
            "enum": list(self.names()),
            "description": "The specialist to run (with resume: the session's specialist).",
        }
        schema["required"] = ["name", "prompt"]
        return schema

    async def run(self, args: TaskArgs, ctx: ToolContext) -> ToolOutput:
        return await self.delegator.task(
            name=args.name,
            prompt=args.prompt,
            description=args.description,
            background=args.run_in_background,
            resume=args.resume,
            call_id=current_call_id.get(),
            jobs=ctx.background,
            isolation=args.isolation,
            output_schema=args.output_schema,
        )


class TaskOutputArgs(ArgsModel):
    task_id: str = Field(description="The task_id Task returned.")
    block: bool = Field(False, description="Wait until the task finishes (or the timeout passes).")
    timeout: float = Field(30, gt=0, le=1200, description="Seconds to wait when block is true.")


class TaskOutput(BuiltinTool[TaskOutputArgs]):
    name = "TaskOutput"
    description = "Check on a background task: its progress, or its report once it has finished."
    side_effect = "read"
    args = TaskOutputArgs

    def __init__(self, delegator: TaskRunner):
        self.delegator = delegator

    async def run(self, args: TaskOutputArgs, ctx: ToolContext) -> ToolOutput:
        return await self.delegator.output(args.task_id, args.block, args.timeout)


class TaskStopArgs(ArgsModel):
    task_id: str = Field(description="The task_id Task returned.")


class TaskStop(BuiltinTool[TaskStopArgs]):
    name = "TaskStop"
    description = "Stop a background task. It ends 'cancelled' and keeps its partial output."
    side_effect = "read"
    args = TaskStopArgs

    def __init__(self, delegator: TaskRunner):
        self.delegator = delegator

    async def run(self, args: TaskStopArgs, ctx: ToolContext) -> ToolOutput:
        return await self.delegator.stop(args.task_id)

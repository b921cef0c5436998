"""update_plan: the agent's visible checklist."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from zero.tools.base import ArgsModel, BuiltinTool, ToolContext, ToolOutput

__all__ = ["UpdatePlan"]

_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "completed"] = "pending"


class UpdatePlanArgs(ArgsModel):
    steps: list[PlanStep] = Field(description="The whole plan, in order; at most one step in_progress.")
    explanation: str | None = Field(None, description="Why the plan changed.")


class UpdatePlan(BuiltinTool[UpdatePlanArgs]):
    name = "update_plan"
    description = "Record or update your step-by-step plan. Send the whole plan each time."
    side_effect = "read"
    args = UpdatePlanArgs

    async def run(self, args: UpdatePlanArgs, ctx: ToolContext) -> ToolOutput:
        ctx.plan[:] = [{"step": s.step, "status": s.status} for s in args.steps]
        lines = [f"{_MARK[s.status]} {s.step}" for s in args.steps]
        done = sum(s.status == "completed" for s in args.steps)
        head = f"Plan updated ({done}/{len(args.steps)} done)"
        return ToolOutput(text="\n".join([head + (f": {args.explanation}" if args.explanation else ""), *lines]))

"""The Tool protocol and the context a tool call runs in."""

from __future__ import annotations

import functools
import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, get_args, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from zero.errors import ToolError
from zero.tools.workspace import Workspace

__all__ = [
    "ArgsModel",
    "Background",
    "BuiltinTool",
    "ShellSettings",
    "SideEffect",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "current_call_id",
    "side_effect_of",
]

SideEffect = Literal["read", "write", "shell", "network", "config"]
"""What a call may do; ``config``: write what Zero itself runs later (a specialist's manifest), asked about
in every mode that asks, and made unasked only in ``unsafe``."""

current_call_id: ContextVar[str] = ContextVar("current_call_id", default="")
"""The id of the tool call being run, for tools that record it (e.g. Task)."""


@dataclass(slots=True, kw_only=True)
class ToolOutput:
    """What a tool returns: text for the model, the files it changed, and a warning for the user
    (``(code, message)``, said once per run)."""

    text: str
    is_error: bool = False
    changed_files: tuple[str, ...] = ()
    warning: tuple[str, str] | None = None


class Background(Protocol):
    """Something a tool left running until the run ends (a shell job)."""

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ShellSettings:
    """What the user's setup says about shell commands: the folders they may never write, wherever those
    are (Zero's data and config folders), and the secret variables they get on purpose."""

    protected: tuple[Path, ...] = ()
    env_passthrough: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """Where a tool call runs: the workspace, the session, the permission mode, and run-scoped state."""

    workspace: Workspace
    session_id: str = ""
    permission_mode: str = "auto"
    plan: list[dict[str, str]] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    background: list[Background] = field(default_factory=list)
    shell: ShellSettings = field(default_factory=ShellSettings)

    async def end_background(self) -> None:
        """The run is over: stop what its tools left running, the last started first."""
        jobs, self.background = self.background, []
        for job in reversed(jobs):
            await job.aclose()


def side_effect_of(tool: Tool, arguments: dict[str, Any]) -> SideEffect:
    """What this call of ``tool`` may do (a tool may say it per call: bash outside its sandbox reaches the network)."""
    per_call = getattr(tool, "side_effect_of", None)
    return per_call(arguments) if callable(per_call) else tool.side_effect


@runtime_checkable
class Tool(Protocol):
    """A capability the model can call. ``side_effect`` drives the permission policy."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def side_effect(self) -> SideEffect: ...

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments."""
        ...

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run the tool. Raises ``ToolError`` with a message for the model."""
        ...


class ArgsModel(BaseModel):
    """Base of tool-argument models: unknown arguments are errors, not silently ignored, and a flag is a JSON
    boolean (pydantic would take ``"yes"``, ``"off"`` or ``1`` for one: a model that wrote ``"no"`` did not
    mean ``true``, and is told to write a boolean)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _strict_flags(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        flag = field is not None and (field.annotation is bool or bool in get_args(field.annotation))
        if flag and value is not None and not isinstance(value, bool):
            raise PydanticCustomError(
                "bool_type", "input should be true or false (a JSON boolean), not {value}", {"value": json.dumps(value)}
            )
        return value


A = TypeVar("A", bound=ArgsModel)


@functools.cache
def _schema(model: type[ArgsModel]) -> dict[str, Any]:
    """The JSON schema of an arguments model, made once per model (it is asked for every run)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


class BuiltinTool(Generic[A]):
    """A tool whose arguments are a pydantic model, validated before ``run``."""

    name: ClassVar[str]
    description: ClassVar[str]
    side_effect: ClassVar[SideEffect]
    args: type[A]

    @property
    def parameters(self) -> dict[str, Any]:
        return _schema(self.args)

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await self.run(self.parse(arguments), ctx)

    def parse(self, arguments: dict[str, Any]) -> A:
        """The arguments as ``run`` takes them; a ``ToolError`` saying what is wrong with them."""
        try:
            return self.args.model_validate(arguments)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in e.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from e

    async def run(self, args: A, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError

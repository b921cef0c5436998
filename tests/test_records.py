"""Records are built by name: every dataclass of Zero with more than two fields takes them as keywords only,
so a field added, removed or moved is a type error at every caller, never a value in the wrong place."""

from __future__ import annotations

import dataclasses
import inspect

from support.package import every_module


def test_records_of_more_than_two_fields_take_keywords_only() -> None:
    positional = [
        f"{module.__name__}.{name}"
        for module in every_module()
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
        if len(fields := [f for f in dataclasses.fields(cls) if f.init]) > 2 and not all(f.kw_only for f in fields)
    ]
    assert positional == []

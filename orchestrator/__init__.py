"""Orchestration of teams: the team file, dependency graph, scheduler, budget ledger and live view."""

__all__: list[str] = []

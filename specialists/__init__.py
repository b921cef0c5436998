"""Specialists: TOML manifests, discovery, the Task tools and child-session runs."""

__all__: list[str] = []

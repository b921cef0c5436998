"""Built-in specialist manifests and example teams (package data)."""

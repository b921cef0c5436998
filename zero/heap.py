"""The garbage collector's settings for a run of Zero: few, large young collections, start-up's heap frozen."""

from __future__ import annotations

import gc

__all__ = ["COLLECT_AFTER", "settle_collector"]

COLLECT_AFTER = (100_000, 50, 100)
"""The collector's thresholds for a run (Python's are 700, 10, 10): a young collection after 100,000 new
objects, not 700. An agent makes a few hundred objects per stream chunk and nearly all die young, freed by
their count; at 700 the collector ran 1,738 times in a team of 2,000 members and took 15 % of the CPU
(3.3 s of 21.9 s), at 100,000 it ran 5 times (0.2 s), for the same memory (bench/bench_swarm.py)."""


def settle_collector() -> None:
    """Take what start-up made (imported modules, manifests, the plan) out of the garbage collector's sight (a
    long run no longer rescans it in every full collection: in a swarm about 0.2 ms of CPU per model call),
    and collect young objects in larger batches (``COLLECT_AFTER``)."""
    gc.freeze()
    gc.set_threshold(*COLLECT_AFTER)

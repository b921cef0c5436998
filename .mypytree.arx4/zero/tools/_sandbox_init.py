"""Starts the first process of a shell command: ``python -I -S _sandbox_init.py ...`` (see ``_sandbox_run``).

Standard library only, and none of Zero: it starts without site packages, in ~20 ms. Its modules
(``zero.tools._sandbox_*``) are imported from this folder without running the package's
``__init__``, and from their cached bytecode; this script itself is compiled at every start, so it
stays this small.
"""

from __future__ import annotations

import os
import sys
import types

if __name__ == "__main__":
    for name, path in (("zero", []), ("zero.tools", [os.path.dirname(os.path.abspath(__file__))])):
        package = sys.modules[name] = types.ModuleType(name)
        package.__path__ = path
    from zero.tools._sandbox_run import main

    os._exit(main(sys.argv[1:]))  # it writes unbuffered: nothing to flush, no interpreter to tear down

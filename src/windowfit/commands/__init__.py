"""The ``windowfit`` subcommands, one module each.

Each module has ``register(subparsers)``, which adds its parser and sets ``run`` to a
function taking the parsed arguments and returning the exit code. Modules are imported
only when the command line is built, so a command's optional dependencies load only when
that command runs.
"""

from __future__ import annotations

#: Module names under ``windowfit.commands``, in the order ``--help`` lists them.
COMMANDS = ["fit", "tokens", "demo", "replay", "serve_sim", "proxy"]

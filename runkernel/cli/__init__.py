"""The ``runkernel`` command (``runkernel.cli:main``, or ``python -m runkernel.cli``):
parsing and exit codes (``entry``, which lists every command in ``COMMANDS``), what the
commands share (``text``), the commands on traces and the spec (``trace_commands``), on a
store (``commands``), those that start and drive Runs (``run_commands``), ``db``, the web console
(``ui``, which imports the ``ui`` extra only when it runs) and ``crashtest``. A new
command is a module with a ``register`` function and a line in ``COMMANDS``.

The top room: it may import anything of the library below it (``runkernel.adapters``,
``runkernel.specs``, ``runkernel.kernel``, ``runkernel.integrations``); only the
``simulate`` and ``crashtest`` commands may import ``runkernel.testing``, lazily (inside
the function)."""

from runkernel.cli.entry import main as main

__all__ = ["main"]

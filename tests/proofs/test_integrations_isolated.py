"""The core never imports an integration's framework: every runkernel module outside
``runkernel.integrations`` (found on disk, not by importing packages) imports without
Pydantic AI or the OpenAI Agents SDK loading."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib, pathlib, sys
import runkernel
root = pathlib.Path(runkernel.__file__).parent
names = [".".join(("runkernel", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
         for p in sorted(root.rglob("*.py")) if "integrations" not in p.parts]
skipped = []
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as error:  # a missing extra's module (the ui's Starlette) is skipped
        if (error.name or "").startswith("runkernel"):
            raise
        skipped.append(name)
for name in runkernel.__all__:
    getattr(runkernel, name)
frameworks = ("pydantic_ai", "agents")
loaded = sorted(m for m in sys.modules if m in frameworks or m.startswith(tuple(f + "." for f in frameworks)))
print(len(names), "modules;", "skipped for a missing extra:", skipped, "frameworks loaded:", loaded)
assert not loaded, loaded
"""


def test_no_core_module_loads_pydantic_ai() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr

"""runkernel: a formal state-machine kernel for durable AI-agent Runs.

``runkernel.kernel`` is the pure core, ``runkernel.specs`` the executable spec and the
trace checker, ``runkernel.adapters`` the stores and the reference runtime.
"""

__version__ = "0.1.0"

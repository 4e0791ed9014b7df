"""runkernel's benchmarks: ``python -m bench`` writes ``bench/RESULTS.md``.

``rows.py`` is the table of measures and goals, ``measures.py`` how each side is
measured, ``subject.py`` the only module that calls into runkernel, ``peers.py`` the
peers and limits (LangGraph, orjson and msgspec from the optional ``bench`` extra).
``deep.py`` is separate: the long verification runs that CI does not make.
"""

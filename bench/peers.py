"""The peers and limits runkernel is measured against.

LangGraph (``langchain.agents.create_agent`` on ``SqliteSaver`` or ``InMemorySaver``),
orjson and msgspec come from the optional ``bench`` extra; without it their measures
raise ``PeerMissing`` and their rows say "peer not installed". Raw sqlite3 and the
``json`` module are the limits and always present.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import subject


class PeerMissing(Exception):
    """An optional peer package is not installed."""


def module(name: str, package: str) -> Any:
    """An optional peer's module; ``PeerMissing`` when its package is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise PeerMissing(f"{package} not installed (pip install -e .[bench])") from None


def version(package: str) -> str:
    """An installed distribution's version, or 'not installed'."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


PEER_PACKAGES = (
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "langchain",
    "langchain-core",
    "orjson",
    "msgspec",
    "python-statemachine",
    "dbos",
)


# --- LangGraph ------------------------------------------------------------------------


def _scripted_chat_model(steps: int) -> Any:
    """A chat model that asks for one ``lookup`` call per step, then answers."""
    chat_models = module("langchain_core.language_models.chat_models", "langchain-core")
    messages = module("langchain_core.messages", "langchain-core")
    outputs = module("langchain_core.outputs", "langchain-core")

    base: Any = chat_models.BaseChatModel

    class ScriptedChatModel(base):  # type: ignore[misc]
        made: int = 0
        planned: int = steps

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

        def _generate(self, prompt: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            step = self.made
            self.made = step + 1
            if step < self.planned:
                reply = messages.AIMessage(
                    content="",
                    tool_calls=[{"name": subject.TOOL_NAME, "args": subject.tool_arguments(step), "id": f"c{step}"}],
                )
            else:
                reply = messages.AIMessage(content=subject.FINAL_TEXT)
            return outputs.ChatResult(generations=[outputs.ChatGeneration(message=reply)])

    return ScriptedChatModel()


def _lookup_tool() -> Any:
    tools = module("langchain_core.tools", "langchain-core")

    def lookup(n: int) -> str:
        """Look the answer of step n up."""
        return subject.tool_result(n)

    return tools.tool(lookup)


def langgraph_sqlite_saver(path: Path, synchronous: str) -> tuple[Any, sqlite3.Connection]:
    """LangGraph's SQLite saver on a connection with runkernel's pragmas."""
    saver_module = module("langgraph.checkpoint.sqlite", "langgraph-checkpoint-sqlite")
    connection = sqlite3.connect(str(path), check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous}")
    saver = saver_module.SqliteSaver(connection)
    saver.setup()
    return saver, connection


def langgraph_memory_saver() -> Any:
    """LangGraph's in-memory saver."""
    return module("langgraph.checkpoint.memory", "langgraph").InMemorySaver()


def langgraph_agent(saver: Any, steps: int) -> Callable[[str], int]:
    """LangGraph's prebuilt agent on ``saver``; calling it runs one thread, durably."""
    agents = module("langchain.agents", "langchain")
    messages = module("langchain_core.messages", "langchain-core")
    agent = agents.create_agent(_scripted_chat_model(steps), [_lookup_tool()], checkpointer=saver)

    def run(thread_id: str) -> int:
        result = agent.invoke(
            {"messages": [messages.HumanMessage(content=subject.PROMPT)]},
            {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * steps + 10},
            durability="sync",
        )
        return len(result["messages"])

    return run


# --- statemachine, codecs, raw SQLite ---------------------------------------------------------


def orjson_module() -> Any:
    """orjson, the fastest bare JSON encoder here."""
    return module("orjson", "orjson")


def msgspec_json() -> Any:
    """msgspec's JSON module."""
    return module("msgspec.json", "msgspec")


class RawSqlite:
    """The limit: one INSERT and COMMIT of the same bytes on a bare connection."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.connection = sqlite3.connect(str(path), isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(f"PRAGMA synchronous={synchronous}")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS lines (k TEXT NOT NULL, v INTEGER NOT NULL, line TEXT NOT NULL, "
            "PRIMARY KEY (k, v)) WITHOUT ROWID"
        )
        self.next = 0

    def commit(self, line: str) -> None:
        """One durable transaction writing ``line``."""
        self.connection.execute("BEGIN IMMEDIATE")
        self.connection.execute("INSERT INTO lines (k, v, line) VALUES (?, ?, ?)", ("t", self.next, line))
        self.connection.execute("COMMIT")
        self.next += 1

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def strict_json_loads(line: bytes) -> Any:
    """``json.loads`` that refuses duplicate keys, the baseline of check-trace."""
    return json.loads(line, object_pairs_hook=_no_duplicates)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("duplicate key")
    return found

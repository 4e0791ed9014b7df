"""One app name, checked (issue 35, item 2): a durable agent's app is named once, on the
capability or the runner; ``worker_app`` and ``serve`` take it from there; a worker app
given another name (``app="support"`` with ``worker_app(name="suport")``, whose crashed
Runs no worker would ever drive) is refused at once with one line naming both, and so is
a worker app or ``serve`` without any name. Both frameworks, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runkernel.integrations._common import IntegrationError


def _pai(tmp_path: Path, app: str | None) -> tuple[Any, Any]:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai_app import build

    return build(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "record.jsonl", "happy", app=app)


def _oa(tmp_path: Path, app: str | None) -> tuple[Any, Any]:
    pytest.importorskip("agents")
    from openai_agents_app import build

    return build(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "record.jsonl", "happy", app=app)


BUILDERS = {"pydantic_ai": _pai, "openai_agents": _oa}


@pytest.mark.parametrize("framework", sorted(BUILDERS))
def test_a_misspelt_worker_app_name_is_refused_naming_both(framework: str, tmp_path: Path) -> None:
    agent, durable = BUILDERS[framework](tmp_path, "support")
    with pytest.raises(IntegrationError) as refused:
        durable.worker_app(agent, name="suport")
    said = str(refused.value)
    print(said)
    assert len(said.splitlines()) == 1 and "'support'" in said and "'suport'" in said


@pytest.mark.parametrize("framework", sorted(BUILDERS))
def test_the_worker_app_takes_the_one_name_and_may_repeat_it(framework: str, tmp_path: Path) -> None:
    agent, durable = BUILDERS[framework](tmp_path, "support")
    assert durable.worker_app(agent).name == "support"
    assert durable.worker_app(agent, name="support").name == "support"


@pytest.mark.parametrize("framework", sorted(BUILDERS))
def test_without_an_app_name_serve_is_refused_and_worker_app_needs_one(framework: str, tmp_path: Path) -> None:
    agent, durable = BUILDERS[framework](tmp_path, None)
    with pytest.raises(IntegrationError, match="has no app name"):
        durable.serve(agent)
    with pytest.raises(IntegrationError, match="has no app name"):
        durable.worker_app(agent)
    assert durable.worker_app(agent, name="given").name == "given"  # the worker names it, once

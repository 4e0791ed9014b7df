"""The console's web application: Starlette routes over one store URL, pages rendered
by Jinja2 with autoescaping (committed data is hostile input: a ``<script>`` in a
message, a tool name or an id is text), one small script for live updates and no
JavaScript build step.

Every route lives under the console's access path (``/<token>/``, see
``runkernel.ui.security`` for why the credential is a path and not a cookie); pages link
with ``base``, and a form's ``back`` is a path of the console without it. Each request
opens the store, reads (or queues one command) and closes it, so a page
always shows the latest commits and no connection is shared between threads. Writing
routes (resume, reconcile, fork) exist only without ``read_only``; they call the CLI's own
code (``queue_resume``, ``find_indeterminate``, ``record_reconciliation`` and ``fork``), so a
command the CLI refuses is refused here with the same rule, and nothing is queued.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from runkernel.adapters.drive.fork import fork
from runkernel.adapters.drive.inbox import AlreadyAnswered, AlreadyQueued, queue_resume
from runkernel.adapters.stores.contract import RECONCILE_OUTCOMES, Reconciliation, Store
from runkernel.adapters.stores.damage import check_snapshot
from runkernel.adapters.stores.export import export_lines
from runkernel.adapters.stores.inspect_view import find_indeterminate
from runkernel.adapters.stores.registry import open_store, redacted
from runkernel.errors import ForkRefused, UnknownRun
from runkernel.kernel.protocol import Approve, Deny, ProvideInput, ResumeCommand, ResumePayload
from runkernel.kernel.rules import Rejection
from runkernel.kernel.values import WaitKind
from runkernel.ui.security import Guard, base_path, csrf_refusal, csrf_value
from runkernel.ui.views import (
    FORMS_BY_WAIT,
    STATES,
    RunFilter,
    pending_waits,
    run_detail,
    runs_page,
    unreconciled_calls,
)

_HERE = Path(__file__).parent
#: the answers the forms send (FORMS_BY_WAIT's values)
ACTIONS = ("approve", "deny", "input")
#: the Host names a console answers when none are given: its loopback names
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

#: every notice a page shows after a form, by its key: fixed texts whose only fields are
#: a command number and a name from a fixed list (``?notice=`` never shows other text)
NOTICES = {
    "queued": "queued command {command} ({action}); a worker applies it",
    "already-queued": "already queued as command {command} ({action}); nothing new queued",
    "recorded": "recorded {outcome} for the Indeterminate call",
    "forked": "forked from version {version} of its source; a worker of its app drives it",
}


def notice_text(query: Mapping[str, str]) -> str | None:
    """The banner for a page's query: a known notice with valid fields, else none."""
    key = query.get("notice")
    if key in ("queued", "already-queued"):
        command, action = query.get("command", ""), query.get("action", "")
        if command.isascii() and command.isdigit() and len(command) <= 18 and action in ACTIONS:
            return NOTICES[key].format(command=int(command), action=action)
    elif key == "recorded":
        outcome = query.get("outcome", "")
        if outcome in RECONCILE_OUTCOMES:
            return NOTICES[key].format(outcome=outcome)
    elif key == "forked":
        version = query.get("version", "")
        if _count(version):
            return NOTICES[key].format(version=int(version))
    return None


def _count(text: str) -> bool:
    """A positive count of at most 18 ASCII digits (a command number, a version)."""
    return text.isascii() and text.isdigit() and len(text) <= 18 and int(text) > 0


class Console:
    """The console over one store: its pages and, unless read-only, its forms."""

    def __init__(self, store_url: str, token: str, *, read_only: bool = False, hosts: frozenset[str] | None = None) -> None:
        self.store_url = store_url
        self.token = token
        self.read_only = read_only
        #: the access path every route lives under
        self.base = base_path(token)
        self.guard = Guard(token, LOOPBACK_HOSTS if hosts is None else hosts)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,  # every value is escaped, whatever the template's name
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["json"] = _json_text

    @contextlib.contextmanager
    def store(self, *, write: bool = False) -> Iterator[Store]:
        """The store for one request: read-only unless the request writes."""
        store = open_store(self.store_url, create=False, read_only=not write)
        try:
            yield store
        finally:
            store.close()

    def page(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        body = self.templates.get_template(template).render(
            store=redacted(self.store_url),
            read_only=self.read_only,
            csrf=csrf_value(self.token),
            base=self.base,
            **values,
        )
        return HTMLResponse(body, status_code=status)

    # --- pages ------------------------------------------------------------------------

    def runs(self, request: Request) -> Response:
        query = request.query_params
        state = query.get("state") or None
        if state is not None and state not in STATES:
            return self.page(request, "message.html", 400, title="Bad filter", text=f"state must be one of {', '.join(STATES)}")
        where = RunFilter(state, query.get("app") or None, query.get("thread") or None)
        with self.store() as store:
            page = runs_page(store, where, query.get("after") or None)
        return self.page(request, "runs.html", where=where, page=page, states=STATES)

    def run(self, request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        with self.store() as store:
            snapshot = store.run(run_id)
            if snapshot is None:
                return self.page(request, "message.html", 404, title="No such Run", text=f"no committed run {run_id!r}")
            check_snapshot(snapshot, store.commits(snapshot.thread_id))
            detail = run_detail(store, snapshot)
        return self.page(
            request,
            "run.html",
            run_id=run_id,
            d=detail,
            forms=FORMS_BY_WAIT,
            outcomes=RECONCILE_OUTCOMES,
            notice=notice_text(request.query_params),
        )

    def trace(self, request: Request) -> Response:
        """The Run's Thread as a runkernel/2 trace (what ``runkernel export`` prints)."""
        run_id = request.query_params.get("run", "")
        with self.store() as store:
            thread_id = store.thread_of(run_id)
            if thread_id is None:
                return self.page(request, "message.html", 404, title="No such Run", text=f"no committed run {run_id!r}")
            text = "".join(line + "\n" for line in export_lines(store, thread_id, redact=False))
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in thread_id)
        return Response(
            text,
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{safe_name}.jsonl"'},
        )

    def approvals(self, request: Request) -> Response:
        with self.store() as store:
            waits, next_after = pending_waits(store, request.query_params.get("after") or None)
            unreconciled = unreconciled_calls(store)
        return self.page(
            request,
            "approvals.html",
            waits=waits,
            next_after=next_after,
            unreconciled=unreconciled,
            outcomes=RECONCILE_OUTCOMES,
            forms=FORMS_BY_WAIT,
            notice=notice_text(request.query_params),
        )

    # --- forms ------------------------------------------------------------------------

    async def resume(self, request: Request) -> Response:
        form = await self.guard.checked_form(request)
        if form is None:
            return csrf_refusal()
        run_id, ticket_id, action = (str(form.get(k, "")) for k in ("run_id", "ticket_id", "action"))
        back = _local(str(form.get("back", "/approvals")))
        payload: tuple[WaitKind, ResumePayload]
        if action == "approve":
            payload = WaitKind.APPROVAL, Approve()
        elif action == "deny":
            payload = WaitKind.APPROVAL, Deny(str(form.get("reason", "")).strip() or None)
        elif action == "input":
            payload = WaitKind.INPUT, ProvideInput(str(form.get("input", "")))
        else:
            return self.page(request, "message.html", 400, title="Refused", text=f"unknown action {action!r}")
        if not run_id or not ticket_id:
            return self.page(request, "message.html", 400, title="Refused", text="the form names no Run or ticket")
        with self.store(write=True) as store:
            result = queue_resume(store, ResumeCommand(run_id, ticket_id, payload[0], payload[1]))
        if isinstance(result, AlreadyAnswered):
            text = f"{result}; a wait takes one answer"
            return self.page(request, "message.html", 409, title="Refused, nothing queued", text=text, back=back)
        if isinstance(result, Rejection):
            return self.page(request, "message.html", 409, title="Refused, nothing queued", text=str(result), back=back)
        if isinstance(result, AlreadyQueued):
            return self.see(back, notice="already-queued", command=str(result.entry_id), action=action)
        return self.see(back, notice="queued", command=str(result), action=action)

    async def reconcile(self, request: Request) -> Response:
        form = await self.guard.checked_form(request)
        if form is None:
            return csrf_refusal()
        operation_id = str(form.get("operation_id", ""))
        outcome = str(form.get("outcome", ""))
        note = str(form.get("note", "")).strip() or None
        back = _local(str(form.get("back", "/")))
        if outcome not in RECONCILE_OUTCOMES:
            return self.page(request, "message.html", 400, title="Refused", text=f"outcome must be one of {', '.join(RECONCILE_OUTCOMES)}", back=back)
        with self.store(write=True) as store:
            found = find_indeterminate(store, operation_id)
            if found is None:
                text = f"no Indeterminate call has operation id {operation_id!r}; nothing recorded"
                return self.page(request, "message.html", 409, title="Refused, nothing recorded", text=text, back=back)
            store.record_reconciliation(Reconciliation(operation_id, outcome, note))
        return self.see(back, notice="recorded", outcome=outcome)

    async def fork(self, request: Request) -> Response:
        """"Fork from here": a new Thread from the Run's committed state at a version of
        its timeline (``runkernel fork``'s own code: refused the same way, nothing written)."""
        form = await self.guard.checked_form(request)
        if form is None:
            return csrf_refusal()
        run_id, at = str(form.get("run_id", "")), str(form.get("at", ""))
        back = f"/run?id={quote(run_id, safe='')}"
        if not run_id or not _count(at):
            return self.page(request, "message.html", 400, title="Refused", text="the form names no Run or version", back=back)
        with self.store(write=True) as store:
            try:
                made = fork(store, run_id, at=int(at), abandon_open_calls=form.get("abandon") == "yes")
            except (ForkRefused, UnknownRun) as refused:
                return self.page(request, "message.html", 409, title="Refused, nothing written", text=str(refused), back=back)
        return self.see(f"/run?id={quote(made.run_id, safe='')}", notice="forked", version=at)

    def see(self, back: str, **notice: str) -> Response:
        """Back to the console's page the form was on (``back``: its path without the
        access path), with a notice of the fixed list."""
        separator = "&" if "?" in back else "?"
        return RedirectResponse(f"{self.base}{back}{separator}{urlencode(notice)}", status_code=303)

    def application(self) -> Starlette:
        """The ASGI application."""
        routes: list[Route | Mount] = [
            Route("/", self.runs),  # the Runs list
            Route("/run", self.run),  # ?id=RUN: a run id may hold any character, "/" too
            Route("/trace", self.trace),  # ?run=RUN
            Route("/approvals", self.approvals),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ]
        if not self.read_only:
            routes += [
                Route("/actions/resume", self.resume, methods=["POST"]),
                Route("/actions/reconcile", self.reconcile, methods=["POST"]),
                Route("/actions/fork", self.fork, methods=["POST"]),
            ]
        return Starlette(
            routes=[Mount(self.base, routes=routes)],
            middleware=[Middleware(BaseHTTPMiddleware, dispatch=self.guard)],
        )


def _local(back: str) -> str:
    """A path of this console, never another site (``//host``) or a ``javascript:`` URL."""
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/"


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def create_app(store_url: str, token: str, *, read_only: bool = False, hosts: frozenset[str] | None = None) -> Starlette:
    """The console's ASGI application over ``store_url``, guarded by ``token``."""
    return Console(store_url, token, read_only=read_only, hosts=hosts).application()

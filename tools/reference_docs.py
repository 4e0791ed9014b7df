"""Write the documentation's generated reference pages from the code.

    python tools/reference_docs.py          # rewrite docs/reference/{cli,rules,errors}.md
    python tools/reference_docs.py --check  # exit 1 if one is stale (tests/proofs/test_docs.py)

* ``cli.md``: every command, its usage, options and exit codes, from the parser;
* ``rules.md``: every rule id a refusal or ``check-trace`` prints, with an example made
  by the code itself (``check-trace`` on the catalogued illegal trace of a commit rule;
  ``decide`` refusing an input for an input rule);
* ``errors.md``: the error tree of ``runkernel.errors``, from its classes' docstrings.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runkernel import errors  # noqa: E402
from runkernel.cli.entry import COMMANDS, build_parser  # noqa: E402
from runkernel.testing import Builder  # noqa: E402
from runkernel.kernel import (  # noqa: E402
    Approve,
    DeadlinePassed,
    Deny,
    EndCause,
    EndCauseKind,
    EndRequest,
    GateVerdict,
    InferenceResult,
    ProposedCall,
    ProvideInput,
    Rejection,
    RequireWait,
    ResumeCommand,
    Rule,
    WaitKind,
)
from runkernel.specs.checker import check_file  # noqa: E402
from runkernel.specs.rule_notes import (  # noqa: E402
    CALL_MACHINE,
    CONCURRENCY,
    INVARIANTS,
    RULE_NOTES,
    RUN_MACHINE,
    invariants_named,
)

REFERENCE = ROOT / "docs" / "reference"
ILLEGAL = ROOT / "tests" / "data" / "traces" / "illegal"

EXIT_CODES = (
    ("0", "success (`check-trace`: every file legal; `crashtest`, `simulate`: every check passed)"),
    ("1", "a check failed (`check-trace`: an illegal line), a refusal, or the store failed (locked, full, read-only, unreachable)"),
    ("2", "bad usage or input: an unknown option, a URL that names no store, a file that is not a store or not a trace"),
    ("130", "interrupted by Ctrl-C (`simulate` prints its partial report first)"),
    ("141", "standard output is a closed pipe"),
    ("143", "`simulate` stopped by SIGTERM (its partial report printed)"),
)


# --- the CLI ----------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.option_strings and action.nargs != 0:
            names += f" `{action.metavar or action.dest.upper()}`"
        help_text = (action.help or "").replace("```", "").replace("|", "\\|").replace("\n", " ")
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            help_text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
        if action.required and action.option_strings:
            help_text += " (required)"
        rows.append(f"| {names} | {help_text} |")
    return rows


def _command(name: str, parser: argparse.ArgumentParser, level: str) -> list[str]:
    out = [f"{level} `runkernel {name}`", ""]
    if parser.description:
        out += [textwrap.fill(parser.description.strip(), 88), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _options(parser)
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    if parser.epilog:
        out += [textwrap.fill(parser.epilog.strip(), 88), ""]
    for sub_name, sub in _subparsers(parser).items():
        out += _command(f"{name} {sub_name}", sub, level + "#")
    return out


def cli_reference() -> str:
    parser = build_parser()
    commands = _subparsers(parser)
    out = [
        "# Command line",
        "",
        "Generated from the parser by `python tools/reference_docs.py`; do not edit by hand.",
        "Every command is `runkernel COMMAND`; `runkernel COMMAND --help` prints the same.",
        "",
        "## Exit codes",
        "",
        "| code | meaning |",
        "|---|---|",
        *(f"| {code} | {meaning} |" for code, meaning in EXIT_CODES),
        "",
        "A failure is one line on standard error, `runkernel COMMAND: what went wrong`; a",
        "password in a store URL is shown as `***`.",
        "",
        "## Commands",
        "",
        "| command | what it does |",
        "|---|---|",
        *(f"| [`{name}`](#runkernel-{name}) | {help_text} |" for name, help_text, _ in COMMANDS),
        "",
    ]
    for name, _, _ in COMMANDS:
        out += _command(name, commands[name], "###")
    return "\n".join(out).rstrip() + "\n"


# --- rules ------------------------------------------------------------------------------


def _awaiting(kind: WaitKind = WaitKind.APPROVAL, expires_at: str | None = None) -> Builder:
    call = ProposedCall("call-1", "pay", {"amount": 40}, "op-1")
    return Builder("thread-1").start("run-1").feed(
        InferenceResult("paying", (call,), "batch-1"),
        GateVerdict("call-1", RequireWait(kind, "ticket-1", expires_at=expires_at)),
    )


def _approve(ticket: str = "ticket-1", run: str = "run-1", kind: WaitKind = WaitKind.APPROVAL) -> ResumeCommand:
    return ResumeCommand(run, ticket, kind, Approve())


def _input_examples() -> dict[Rule, tuple[str, Rejection]]:
    """For each input rule: what was sent, and ``decide``'s refusal of it."""
    waiting = _awaiting()
    approved = waiting.feed(_approve())
    ended = waiting.feed(EndRequest(EndCause(EndCauseKind.CANCELLED)))
    running = Builder("thread-1").start("run-1")
    examples: list[tuple[Rule, str, Builder, object]] = [
        (Rule.RUN_NOT_AWAITING, "an approval to a Run that is Running", running, _approve()),
        (Rule.TICKET_MISMATCH, "an approval naming another ticket", waiting, _approve("ticket-9")),
        (Rule.WAIT_KIND_MISMATCH, "an input for an approval wait", waiting,
         ResumeCommand("run-1", "ticket-1", WaitKind.INPUT, ProvideInput("x"))),
        (Rule.PAYLOAD_TYPE, "input given to an approval wait", waiting,
         ResumeCommand("run-1", "ticket-1", WaitKind.APPROVAL, ProvideInput("x"))),
        (Rule.ALREADY_APPLIED, "the same approval, again, after it was applied", approved, _approve()),
        (Rule.STALE_COMMAND, "a deny for a ticket an approval already answered", approved,
         ResumeCommand("run-1", "ticket-1", WaitKind.APPROVAL, Deny("no"))),
        (Rule.RUN_ENDED, "an approval to a cancelled Run", ended, _approve()),
        (Rule.WRONG_RUN, "an approval naming another Run", waiting, _approve(run="run-2")),
        (Rule.UNEXPECTED_INPUT, "a model's answer while a call waits for approval", waiting,
         InferenceResult("hello")),
        (Rule.NOT_EXPIRED, "a deadline that passed for an approval with no deadline", waiting,
         DeadlinePassed("ticket-1", "2026-12-01T00:00:00Z")),
    ]
    return {rule: (sent, built.refused(event)) for rule, sent, built, event in examples}  # type: ignore[arg-type]


def _commit_example(rule: Rule) -> str | None:
    """``check-trace``'s report on the catalogued illegal trace of ``rule``."""
    path = ILLEGAL / f"{rule.value}.jsonl"
    if not path.exists():
        return None
    return check_file(path).report(f"{rule.value}.jsonl")


SPEC_SECTIONS = {
    RUN_MACHINE: "the Run machine",
    CALL_MACHINE: "the Tool-call machine",
    CONCURRENCY: "the concurrency rule",
}


def _note(rule: Rule) -> list[str]:
    """A rule's explanation and its links: the invariants it keeps (defined at the end of
    the page) and the table of ``docs/spec.md`` it checks."""
    note = RULE_NOTES.get(rule)
    if note is None:
        raise SystemExit(f"rule {rule.value!r} has no note in runkernel/specs/rule_notes.py")
    links = [f"[{name}](#{name.lower()})" for name in note.invariants]
    where = []
    if links:
        where.append(f"Keeps {', '.join(links)}")
    if note.spec:
        where.append(f"checks [{SPEC_SECTIONS[note.spec]}](../spec.md#{note.spec})")
    return [note.text + (f" {'; '.join(where)}." if where else ""), ""]


def rules_reference() -> str:
    inputs = _input_examples()
    out = [
        "# Rules",
        "",
        "Generated from the code by `python tools/reference_docs.py`; do not edit by hand.",
        "Every refusal names one of these rules: a commit the judge (`validate_commit`) refuses,",
        "which `check-trace` reports as `FILE:LINE: RULE: message`, or an input `decide`",
        "refuses (a resume, a command, an answer at the wrong time), which `runkernel resume`",
        "prints as `refused: RULE: message`. A refusal changes nothing. Each rule says what it",
        "keeps: an [invariant](#invariants) (I1–I15 of the kernel, W1–W6 of workers and",
        "leases, defined at the end of this page) and the table of [the machines](../spec.md)",
        "it checks.",
        "",
        "## Commits",
        "",
        "Each example is `check-trace` on a trace whose last line breaks the rule (the",
        "catalogue in `tests/data/traces/illegal/`).",
        "",
    ]
    mentioned = " ".join(" ".join(note.invariants) for note in RULE_NOTES.values())
    for rule in Rule:
        if rule in inputs or rule is Rule.JSON_VALUE:
            continue
        example = _commit_example(rule)
        mentioned += f" {example or ''}"
        out += [f"### `{rule.value}`", "", *_note(rule)]
        out += ["```text", example, "```", ""] if example else ["(no example trace)", ""]
    out += [
        "## Inputs",
        "",
        "Each example is `decide` refusing what was sent to a Run whose call `call-1`",
        "waits for approval under ticket `ticket-1` (or as the example says).",
        "",
    ]
    for rule, (sent, refusal) in inputs.items():
        mentioned += f" {refusal}"
        out += [f"### `{rule.value}`", "", *_note(rule), f"Sent: {sent}.", "", "```text", f"refused: {refusal}", "```", ""]
    out += [
        "## Values",
        "",
        f"### `{Rule.JSON_VALUE.value}`",
        "",
        "A store refuses, before judging it, a commit holding a value that JSON cannot",
        "carry exactly (a lone surrogate in a string, a float that is not finite); a trace",
        "cannot hold one, so `check-trace` reports such a line as not a trace (exit 2).",
        "",
        "## Invariants",
        "",
        "What the rules above keep, with what the stores, recovery and the workers keep",
        "(W1–W6, [Workers and leases](../how-to/worker.md)); [Concepts](../concepts.md) says",
        "which test or proof checks each.",
        "",
    ]
    unknown = sorted(invariants_named(mentioned) - INVARIANTS.keys())
    if unknown:
        raise SystemExit(f"rules.md names undefined invariants: {unknown}")
    for name, text in INVARIANTS.items():
        out += [f"### {name}", "", text, ""]
    return "\n".join(out).rstrip() + "\n"


# --- errors -----------------------------------------------------------------------------


def errors_reference() -> str:
    root = errors.RunkernelError
    names = [n for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    classes = [getattr(errors, n) for n in names]

    def children(parent: type) -> list[type]:
        return [c for c in classes if parent in c.__bases__]

    out = [
        "# Errors",
        "",
        "Generated from `runkernel.errors` by `python tools/reference_docs.py`; do not edit by",
        "hand. Every error runkernel raises is a `RunkernelError`, on one of its branches:",
        "`UsageError` (the caller's mistake: fix the call), `PeerError` (a model, tool or",
        "host broke the protocol), `StoreError` (the store failed or refused), and",
        "`KernelBug` (runkernel's own fault: please report it). Import them from",
        "`runkernel.errors`.",
        "",
    ]

    def walk(cls: type, depth: int) -> None:
        nonlocal out
        doc = inspect.getdoc(cls) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        out.append(f"{'  ' * depth}- **`{cls.__name__}`** ({bases}): {first}")
        for child in sorted(children(cls), key=lambda c: c.__name__):
            walk(child, depth + 1)

    walk(root, 0)
    listed = {line.split("`")[1] for line in out if line.lstrip().startswith("- **`")}
    missing = sorted(set(names) - listed)
    if missing:
        out += ["", "Also in `runkernel.errors`:", ""]
        for name in missing:
            cls = getattr(errors, name)
            doc = " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())
            out.append(f"- **`{name}`**: {doc}")
    return "\n".join(out).rstrip() + "\n"


PAGES: dict[str, Callable[[], str]] = {
    "cli.md": cli_reference,
    "rules.md": rules_reference,
    "errors.md": errors_reference,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for name, make in PAGES.items():
        path = REFERENCE / name
        text = make()
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"stale: {', '.join(stale)}: run python tools/reference_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the example traces under ``tests/data/traces``.

    python tests/data/traces/make_examples.py

Legal traces are driven through the kernel's own ``decide`` (plus a few hand-made
commits that other runtimes may legally emit, e.g. finalizing a batch in a commit of
its own). Each illegal trace is a legal prefix followed by one mutated line that
breaks exactly one commit-log rule. Every file is checked with the real checker
before it is written, so a generated example can never claim a rule it does not hit.
The ``.jsonl`` files and ``manifest.json`` are committed data: the tests read them,
not this script. Output is deterministic (no clock, no randomness).

The examples are built in ``examples_run_rules.py`` and ``examples_call_rules.py`` (one
per commit-log rule), ``examples_illegal_variants.py`` and ``examples_realistic_legal.py``,
all with the ``Log`` of ``example_log.py``; this script checks and writes them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from example_log import Example, Line
from examples_call_rules import (
    ex_attempt,
    ex_batch_identity,
    ex_batch_new,
    ex_call_edge,
    ex_executing_first,
    ex_call_order,
    ex_call_waits_with_run,
    ex_edge_condition,
    ex_finalize,
    ex_inference_open_batch,
    ex_publish,
    ex_run_end_closes,
    ex_terminal_immutable,
)
from examples_concurrent_calls import CONCURRENT_LEGAL, CONCURRENT_VARIANTS
from examples_delegations import DELEGATION_LEGAL, DELEGATION_RULES, DELEGATION_VARIANTS
from examples_forks import ex_fork
from examples_hooks import HOOKS_LEGAL, HOOKS_VARIANTS
from examples_illegal_variants import VARIANTS
from examples_resume import (
    RESUME_LEGAL,
    RESUME_VARIANTS,
    ex_resume_digest,
    ex_resume_edge,
    ex_resume_payload,
)
from examples_realistic_legal import BIG
from examples_run_rules import (
    ex_after_ended,
    ex_app_version,
    ex_awaiting_end,
    ex_first_commit,
    ex_identity,
    ex_one_active_run,
    ex_resume,
    ex_run_edge,
    ex_step,
    ex_ticket_reused,
    ex_ticket_shape,
    ex_version,
)
from runkernel.specs.checker import Verdict, check_lines

HERE = Path(__file__).resolve().parent

RULE_EXAMPLES: dict[str, Callable[[], Example]] = {
    "identity": ex_identity,
    "version-contiguous": ex_version,
    "first-commit-running": ex_first_commit,
    "one-active-run": ex_one_active_run,
    "nothing-after-ended": ex_after_ended,
    "app-version-on-activation": ex_app_version,
    "step-counts-inference": ex_step,
    "run-edge": ex_run_edge,
    "ticket-matches-wait": ex_ticket_shape,
    "ticket-never-reused": ex_ticket_reused,
    "resume-matches-ticket": ex_resume,
    "resume-payload-fits-wait": ex_resume_payload,
    "resume-digest-is-jcs-sha256": ex_resume_digest,
    "resume-edge-per-payload": ex_resume_edge,
    "awaiting-ends-by-cancel-stop-failure": ex_awaiting_end,
    "call-edge": ex_call_edge,
    "edge-condition": ex_edge_condition,
    "attempt-increments-by-one": ex_attempt,
    "attempt-starts-by-executing": ex_executing_first,
    "batch-complete-and-requested": ex_batch_new,
    "batch-identity-stable": ex_batch_identity,
    "calls-one-at-a-time-in-order": ex_call_order,
    "no-inference-with-open-batch": ex_inference_open_batch,
    "finalize-when-all-terminal": ex_finalize,
    "publish-one-result-per-call": ex_publish,
    "run-end-closes-calls": ex_run_end_closes,
    "terminal-result-immutable": ex_terminal_immutable,
    "call-waits-with-run": ex_call_waits_with_run,
    "fork-carries-source-state": ex_fork,
    **DELEGATION_RULES,
}


# --- writing ------------------------------------------------------------------------


def encode(lines: Sequence[Line]) -> bytes:
    return b"".join(
        json.dumps(line, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        for line in lines
    )


def judge(data: bytes) -> tuple[Verdict, int, str]:
    finding = check_lines(data.splitlines())
    return finding.verdict, finding.line, finding.rule


def build() -> tuple[dict[str, bytes], dict[str, bytes], dict[str, dict[str, Any]]]:
    """All files and the manifest; raises if an example does not say what it claims."""
    legal: dict[str, bytes] = {}
    illegal: dict[str, bytes] = {}
    manifest: dict[str, dict[str, Any]] = {}

    def add_illegal(name: str, lines: list[Line], rule: str, why: str) -> None:
        data = encode(lines)
        verdict, line, found = judge(data)
        if (verdict, line, found) != (Verdict.ILLEGAL, len(lines), rule):
            raise AssertionError(
                f"illegal/{name}: expected {rule} at line {len(lines)}, got {verdict.name} "
                f"{found} at line {line}"
            )
        illegal[name] = data
        manifest[name] = {"line": len(lines), "rule": rule, "why": why}

    for rule, builder in RULE_EXAMPLES.items():
        good, bad, why = builder()
        legal[f"{rule}.jsonl"] = encode(good)
        add_illegal(f"{rule}.jsonl", bad, rule, why)
    for name, variant in {**VARIANTS, **RESUME_VARIANTS, **HOOKS_VARIANTS, **DELEGATION_VARIANTS,
                          **CONCURRENT_VARIANTS}.items():
        lines, rule, why = variant()
        add_illegal(f"{name}.jsonl", lines, rule, why)
    for name, make in {**BIG, **RESUME_LEGAL, **HOOKS_LEGAL, **DELEGATION_LEGAL, **CONCURRENT_LEGAL}.items():
        legal[f"{name}.jsonl"] = encode(make())
    for name, data in legal.items():
        verdict, line, found = judge(data)
        if verdict is not Verdict.LEGAL:
            raise AssertionError(f"legal/{name}: {verdict.name} {found} at line {line}")
    return legal, illegal, manifest


def main(argv: Sequence[str] = ()) -> int:
    strict = "--strict" in argv
    try:
        legal, illegal, manifest = build()
    except AssertionError as error:
        print(f"make_examples: {error}", file=sys.stderr)
        if strict:
            return 1
        raise
    for folder, files in (("legal", legal), ("illegal", illegal)):
        target = HERE / folder
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.glob("*.jsonl"):
            if stale.name not in files:
                stale.unlink()
        for name, data in sorted(files.items()):
            (target / name).write_bytes(data)
    (HERE / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {len(legal)} legal and {len(illegal)} illegal traces to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

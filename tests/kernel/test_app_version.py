"""A Run's app version (``app_version``): recorded once, on its activation, beside its
app; read back by both trace readers; absent on traces made before versions existed;
and refused by the judge anywhere else (``app-version-on-activation``)."""

from __future__ import annotations

import json

import attrs

from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.codec_typed import typed_commit_of_text
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY
from runkernel.kernel.protocol import Activate, InferenceResult
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.validate_edge import judge_commit
from runkernel.kernel.values import Role

GO = (Message(Role.USER, "go"),)


def _activation(app: str | None, version: str | None) -> ThreadCommit:
    decision = decide(None, Activate("t", "r", 0, GO, app, app_version=version))
    assert not isinstance(decision, Rejection)
    assert decision.commit is not None
    return decision.commit


def test_activation_commits_the_version_and_both_readers_read_it() -> None:
    commit = _activation("shop", "v2")
    assert commit.app_version == "v2"
    line = commit_to_json(commit)
    assert line["app"] == "shop" and line["app_version"] == "v2"
    text = json.dumps(line)
    assert commit_from_json(json.loads(text)).app_version == "v2"
    typed = typed_commit_of_text(text)
    assert typed is not None and typed.app_version == "v2"


def test_a_trace_without_versions_reads_as_before() -> None:
    line = commit_to_json(_activation("shop", None))
    assert "app_version" not in line
    assert commit_from_json(line).app_version is None
    typed = typed_commit_of_text(json.dumps(line))
    assert typed is not None and typed.app_version is None


def test_a_version_without_an_app_is_refused() -> None:
    commit = attrs.evolve(_activation(None, None), app_version="v1")
    verdict = validate_commit(None, None, commit, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.APP_VERSION


def test_only_the_activation_records_a_version() -> None:
    first = _activation("shop", "v1")
    accepted = validate_commit(None, None, first, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(accepted, Accepted)
    step = decide(accepted.run, InferenceResult("thinking"), history=NO_HISTORY)
    assert not isinstance(step, Rejection) and step.commit is not None
    head = ThreadHead("t", 1, "r")
    # the kernel's own next commit is legal, by both judges
    assert isinstance(judge_commit(head, accepted.run, step.commit, NO_HISTORY, ticket_seen=NO_TICKETS_SEEN), Accepted)
    relabelled = attrs.evolve(step.commit, app_version="v2")
    for verdict in (
        validate_commit(head, accepted.run, relabelled, NO_HISTORY, ticket_seen=NO_TICKETS_SEEN),
        # the store's shorter path (the edge decide named) sends it to the full judge
        judge_commit(head, accepted.run, relabelled, NO_HISTORY, ticket_seen=NO_TICKETS_SEEN),
    ):
        assert isinstance(verdict, Rejection), verdict
        assert verdict.rule is Rule.APP_VERSION
        assert "after its first commit" in verdict.message

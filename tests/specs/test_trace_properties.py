"""Property tests of traces, driven by the random host in ``kernel_driver.py`` (drawn
through ``strategies.py``): legal traces pass the checker and round-trip through JSON,
and every mutation of ``trace_mutations.py`` is reported at the line and with the rule
where the trace becomes illegal, in drawn traces and in the scripted one.

Run with the ``ci`` profile by default; ``HYPOTHESIS_PROFILE=deep`` explores more.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver_history import History
from runkernel.kernel.codec import commit_from_json
from runkernel.specs.checker import Verdict, check_commits, check_lines
from scripted_trace import scripted_trace
from strategies import histories
from trace_mutations import MUTATIONS, Context, encode, to_lines


# --- traces --------------------------------------------------------------------------------


@given(histories())
def test_legal_traces_pass_the_checker_and_round_trip(history: History) -> None:
    objects = encode(history.commits)
    finding = check_lines(to_lines(objects))
    assert finding.verdict is Verdict.LEGAL, finding.report("trace")
    assert finding.commits == len(history.commits)
    for commit, obj in zip(history.commits, objects):
        assert commit_from_json(json.loads(json.dumps(obj))) == commit


@given(history=histories(max_threads=2, max_runs=3), data=st.data())
def test_illegal_mutations_of_random_traces_are_reported_where_they_become_illegal(
    history: History, data: st.DataObject
) -> None:
    context = Context.of(history.commits)
    for name, mutation in MUTATIONS.items():
        sites = list(mutation(context))
        if not sites:
            continue
        site = data.draw(st.sampled_from(sites), label=name)
        finding = check_lines(to_lines(site.mutate(context.lines)))
        assert finding.verdict is Verdict.ILLEGAL, f"{name}: {finding.report('mutated')}"
        assert (finding.line, finding.rule) == (site.line, site.rule.value), (
            f"{name}: expected line {site.line} {site.rule.value}, got {finding.report('mutated')}"
        )


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_illegal_mutation_of_a_scripted_trace_is_reported_where_it_becomes_illegal(
    name: str,
) -> None:
    commits = scripted_trace()
    assert check_commits(commits).verdict is Verdict.LEGAL
    context = Context.of(commits)
    sites = list(MUTATIONS[name](context))
    assert sites, f"the scripted trace offers no place for {name}"
    for site in sites:
        finding = check_lines(to_lines(site.mutate(context.lines)))
        assert finding.verdict is Verdict.ILLEGAL, finding.report("mutated")
        assert (finding.line, finding.rule) == (site.line, site.rule.value), finding.report("mutated")


def test_mutation_catalogue_is_large_enough() -> None:
    assert len(MUTATIONS) >= 12
    assert len({mutation for mutation in MUTATIONS.values()}) == len(MUTATIONS)

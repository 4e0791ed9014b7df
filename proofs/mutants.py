"""A test of the tests: plant each known bug in a copy of the code and show that the one
detector named for it catches it.

Each mutant is a single textual replacement (the original text must occur exactly
once, so a refactoring that moves it makes this script fail loudly instead of
silently testing nothing). Each detector runs alone against the mutated copy, with no
Hypothesis shrinking and stopping at the first failure, with a 600-second hang guard
(detectors take seconds; the guard is far above that so load never decides). Before
the mutants, every detector must pass on the unmutated copy; otherwise a "catch" would
mean nothing.

    python proofs/mutants.py [--only NAME] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attrs import frozen

ROOT = Path(__file__).resolve().parent.parent
#: Wall-clock hang guard per detector run: detectors take 1-20 s on the 2-core CI
#: machine under load; a catch or a pass is decided by the detector, never by this.
TIMEOUT = 600.0


@frozen
class Detector:
    """One command that must pass on clean code and fail on its mutants."""

    name: str
    argv: tuple[str, ...]
    baseline_runs_here: bool = True
    #: text the output must hold for a failure to count as a catch (not a crash)
    catch_marker: str = "failed"


STATEFUL = Detector(
    "stateful test (memory store)",
    ("-m", "pytest", "tests/drive/test_stateful_runtime.py", "-k", "Memory", "-x", "-q", "-p", "no:cacheprovider"),
)
MODEL_CHECKER = Detector(
    "model checker (CI bound)",
    ("proofs/model_check.py", "--profile", "ci"),
    # the CI bound takes minutes to exhaust on clean code; CI runs it on its own
    baseline_runs_here=False,
    catch_marker="verdict: VIOLATION",
)

MODEL_CHECKER_GROUPS = Detector(
    "model checker (groups bound)",
    ("proofs/model_check.py", "--profile", "groups"),
    catch_marker="verdict: VIOLATION",
)


def unit(test_id: str, only: str | None = None) -> Detector:
    """One test (every case of it, or those pytest's ``-k ONLY`` selects: a test run over
    several hosts names the host that must catch the mutant)."""
    select = ("-k", only) if only is not None else ()
    name = test_id.split("::")[-1] + (f" [{only}]" if only is not None else "")
    return Detector(f"unit test {name}", ("-m", "pytest", test_id, *select, "-x", "-q", "-p", "no:cacheprovider"))


WRONG_KIND_UNIT = unit("tests/kernel/test_decide_units.py::test_a_resume_with_the_wrong_wait_kind_is_rejected")
EXECUTING_UNIT = unit("tests/kernel/test_decide_units.py::test_recovery_never_turns_executing_into_requested")
SETTLED_TEST = "tests/drive/test_inbox_settlement.py::test_a_host_that_dies_right_after_applying_a_command_leaves_it_settled"
SETTLE_UNIT = unit(SETTLED_TEST, only="pull")
CANCEL_UNIT = unit("tests/kernel/test_decide_units.py::test_cancelling_an_awaiting_run_closes_the_waiting_call")
PUSH_BATCH_UNIT = unit(
    "tests/drive/test_push_driver.py::test_a_tool_batch_runs_in_call_order_and_publishes_every_result"
)
PUSH_HISTORY_UNIT = unit("tests/drive/test_push_driver.py::test_text_without_an_end_starts_another_step")
SLOPPY_TICKET_UNIT = unit("tests/kernel/test_resume_judge.py::test_a_resume_naming_a_sloppily_equal_ticket_is_illegal")
COMMITTED_POLICY_UNIT = unit(
    "tests/kernel/test_resume_judge.py::test_recover_reads_the_committed_policy_not_the_workers_configuration"
)
GROUP_ROUND_UNIT = unit("tests/drive/test_group_gate_hosts.py::test_every_gate_answer_on_every_member_position[allow-d1-pull]")
GROUP_STATE_UNIT = unit(
    "tests/drive/test_group_gate.py::test_the_judge_refuses_a_member_waiting_while_another_starts_in_the_same_commit"
)
SQLITE_LEASE_RACE_UNIT = unit(
    "tests/stores/test_lease_race.py::test_processes_taking_one_runs_lease_at_one_instant_are_granted_it_once"
)
RENEWED_TOGETHER_UNIT = unit(
    "tests/stores/test_store_conformance.py::TestRunkernelStores::"
    "test_leases_renewed_together_are_those_still_held_and_none_is_revived",
    only="memory",
)
RENEWAL_ROUNDS_UNIT = unit(
    "tests/worker/test_leases_together.py::test_the_leases_of_every_run_in_flight_are_renewed_together", only="sqlite"
)
MEMORY_LEASE_RACE_UNIT = unit(
    "tests/stores/test_lease_race.py::test_threads_taking_one_runs_lease_at_one_instant_are_granted_it_once"
)
PUSH_LEASE_LOSS_UNIT = unit(
    "tests/drive/test_push_driver_lease_loss.py::"
    "test_a_push_driver_whose_lease_is_lost_after_its_executing_commit_hands_out_no_run_call"
)
LOST_COMMIT_TEST = "tests/drive/test_lost_commit_stops.py::test_a_host_whose_executing_commit_loses_to_another_host_starts_nothing"
PUSH_LOST_COMMIT_UNIT = unit(LOST_COMMIT_TEST, only="sync or async")
PULL_LOST_COMMIT_UNIT = unit(LOST_COMMIT_TEST, only="pull")
STAGING_REUSED_UNIT = unit(
    "tests/drive/test_hooks_after_a_failed_commit.py::test_a_host_reused_after_a_failed_commit_runs_the_hook_again",
    only="pull",
)
REACTION_REUSED_UNIT = unit(
    "tests/drive/test_hooks_after_a_failed_commit.py::"
    "test_a_runtime_reused_after_a_lost_result_commits_the_reaction_of_the_attempt_it_commits"
)
PUSH_SETTLED_AFTER_UNIT = unit(SETTLED_TEST, only="sync or async")
PUSH_SETTLED_BEFORE_UNIT = unit(
    "tests/drive/test_inbox_settlement.py::"
    "test_a_command_whose_applying_commit_fails_stays_pending_and_is_applied_by_the_next_pick_up"
)
COMMITTED_RETRIES_UNIT = unit(
    "tests/drive/test_committed_retries.py::test_a_pull_mode_continuation_retries_as_the_batch_committed"
)

PG_LOST_ACK_WRITER_UNIT = unit(
    "tests/stores/test_postgres_lost_ack.py::"
    "test_a_lost_acknowledgement_adopts_the_identical_commit_only_if_this_writer_wrote_it[another worker]"
)
PG_RESEND_WRITER_UNIT = unit(
    "tests/stores/test_postgres_lost_ack.py::"
    "test_an_identical_commit_landing_between_the_lookup_and_the_resend_is_a_conflict[another worker]"
)
LOST_REPLY_EPOCH_UNIT = unit(
    "tests/stores/test_store_conformance.py::"
    "test_a_retry_after_a_lost_reply_adopts_the_identical_commit_only_if_this_writer_wrote_it"
    "[sqlite-this worker id at a later epoch]"
)
TICKET_SEEN_REQUIRED_UNIT = unit("tests/specs/test_ticket_reuse.py::test_validate_commit_has_no_default_for_the_used_tickets")
TICKET_SEEN_ASKED_UNIT = unit("tests/specs/test_ticket_reuse.py::test_validate_commit_refuses_a_ticket_its_ticket_seen_knows")
TRACE_JUDGE_TICKETS_UNIT = unit(
    "tests/specs/test_ticket_reuse.py::test_the_trace_judge_refuses_the_reused_ticket_when_fed_commits"
)
STORE_TICKETS_UNIT = unit(
    "tests/stores/test_store_conformance.py::TestRunkernelStores::test_a_ticket_of_an_earlier_run_of_the_thread_is_never_reused"
)
STORE_CONTRACT = "tests/stores/test_store_conformance.py::TestRunkernelStores::"
OWN_HISTORY_UNIT = unit(STORE_CONTRACT + "test_a_run_is_judged_with_its_own_history", only="memory")
SETTLE_PENDING_UNIT = unit(STORE_CONTRACT + "test_a_commit_settles_only_a_command_still_pending", only="sqlite")
COMPACTION_UNIT = unit(STORE_CONTRACT + "test_compaction_deletes_only_the_runs_settled_refusals", only="sqlite")
SORTED_THREADS_UNIT = unit(STORE_CONTRACT + "test_thread_ids_are_every_thread_sorted", only="memory")
ONE_ANSWER_UNIT = unit(STORE_CONTRACT + "test_a_wait_takes_one_pending_answer", only="memory")
NEAR_TICKET_UNIT = unit("tests/kernel/test_decide_units.py::test_decide_refuses_a_ticket_id_that_only_nearly_matches")
CHECK_TRACE_EXIT_UNIT = unit(
    "tests/cli/test_cli_hardening.py::test_check_trace_exits_with_the_worst_verdict_of_its_files_in_every_order"
)
FAST_PATH_TEXT_UNIT = unit("tests/kernel/test_resume_judge.py::test_the_fast_path_on_non_ascii_text_is_rfc8785s_form_and_digest")
ASTRAL_KEYS_UNIT = unit("tests/kernel/test_resume_judge.py::test_keys_outside_the_bmp_leave_the_fast_path_and_sort_by_utf16")
BAD_POLICY_STRING_UNIT = unit("tests/integrations/test_tool_policies.py::test_a_driver_refuses_a_bad_policy_string_naming_the_tool")
REPLAY_STRING_UNIT = unit("tests/integrations/test_tool_policies.py::test_a_replay_string_commits_replay_and_the_call_is_run_again")
ONE_CALL_RETRIES_UNIT = unit("tests/integrations/test_tool_policies.py::test_replay_in_one_call_sets_every_field")
SERVE_LEASE_UNIT = unit(
    "tests/integrations/test_serve_recovery.py::test_an_app_killed_mid_tool_finishes_its_run_when_it_starts_again",
    "sqlite and pydantic_ai",
)
UNTOUCHED_UNIT = unit(
    "tests/integrations/test_openai_agents_untouched.py::"
    "test_a_shared_tool_runs_plain_and_durable_and_nothing_of_the_users_changes"
)
CONVERSATION_BUSY_UNIT = unit(
    "tests/integrations/test_conversation_busy.py::test_a_conversation_held_by_a_waiting_run_refuses_a_new_one_naming_it"
)
ERROR_TREE_UNIT = unit("tests/kernel/test_errors.py::test_every_exception_runkernel_defines_is_in_the_tree_under_one_branch")
ERROR_BRANCH_UNIT = unit("tests/kernel/test_errors.py::test_each_public_error_is_on_the_branch_of_whose_fault_it_is")
ABSTRACT_BRANCH_UNIT = unit("tests/kernel/test_errors.py::test_the_root_and_the_branches_cannot_be_raised")
LAYERS_UNIT = unit("tests/proofs/test_layers.py::test_imports_only_go_down_and_make_no_circle")
TYPE_CHECKING_CIRCLE_UNIT = unit("tests/proofs/test_layers.py::test_a_planted_circle_is_found[type-checking-import]")
UNKNOWN_NAME_UNIT = unit("tests/proofs/test_public_api.py::test_every_public_name_resolves_to_its_module_object")
STATUS_EPOCH_UNIT = unit(
    "tests/drive/test_fencing_protocol.py::test_check_status_carries_the_epoch_and_ask_status_passes_it"
)
MESSAGE_METADATA_UNIT = unit("tests/drive/test_push_driver.py::test_message_metadata[sync]")
ONE_RUN_CALL_UNIT = unit(
    "tests/kernel/test_vocabulary.py::test_a_pull_mode_tool_runs_the_run_call_a_push_mode_host_is_handed"
)
PUBLIC_IMPORTS_UNIT = unit("tests/proofs/test_public_imports.py::test_users_copy_only_public_imports[examples/demo_app.py]")
STALE_HEAD_UNIT = unit(
    "tests/stores/test_postgres_race.py::test_a_writer_commits_again_after_another_writer_moved_its_thread"
)
TESTING_AFTER_WRITE_UNIT = unit(
    "tests/drive/test_testing.py::test_a_crash_before_the_write_leaves_nothing_and_one_after_it_leaves_the_commit_durable"
)
TESTING_POSITION_UNIT = unit("tests/drive/test_testing.py::test_a_crashing_store_names_each_commit_point_as_the_runtime_does")
TESTING_AFTER_EFFECT_UNIT = unit(
    "tests/drive/test_testing.py::test_a_crash_after_the_effect_lets_the_tool_run_and_commits_nothing_of_its_outcome"
)
CRASH_INSIDE_TOOL_UNIT = unit(
    "tests/drive/test_runtime_tool_raises.py::test_an_injected_crash_inside_a_tool_is_still_the_runtimes_death"
)
TESTING_BUILDER_HISTORY_UNIT = unit(
    "tests/drive/test_testing.py::test_the_builder_keeps_the_runs_history_so_decide_sees_used_tickets"
)
TESTING_BUILDER_JUDGE_UNIT = unit(
    "tests/drive/test_testing.py::test_the_builder_takes_a_hand_made_commit_only_if_the_judge_accepts_it"
)
TESTING_IMPORTERS_UNIT = unit(
    "tests/drive/test_testing.py::test_no_library_module_imports_runkernel_testing_but_the_simulate_and_crashtest_commands_lazily"
)
SYNC_SHELL_GENERATED_UNIT = unit(
    "tests/drive/test_async_to_sync.py::test_the_checked_in_sync_modules_are_generated_from_the_async_ones"
)
ASYNC_LOOP_UNIT = unit(
    "tests/worker/test_worker_async_loop.py::"
    "test_every_drive_of_an_async_app_runs_on_the_workers_one_loop_until_stop_closes_it"
)
ASYNC_LOOP_SHUTDOWN_UNIT = unit(
    "tests/worker/test_worker_async_loop.py::test_a_shutdown_during_a_drive_lets_it_finish_on_its_loop_then_closes_the_loop[stop]"
)
TRANSIENT_SUCCESS_UNIT = unit(
    "tests/drive/test_transient_model_errors.py::test_a_transient_model_error_commits_nothing_and_the_call_succeeds_after_three[memory]"
)
TRANSIENT_CAP_UNIT = unit("tests/drive/test_transient_model_errors.py::test_the_last_attempt_ends_the_run_failed_with_its_error[sqlite]")
NON_TRANSIENT_UNIT = unit("tests/drive/test_transient_model_errors.py::test_a_non_transient_model_error_ends_the_run_failed_at_once[memory]")
MODEL_COUNT_RESET_UNIT = unit("tests/drive/test_transient_model_errors.py::test_the_count_restarts_at_each_model_call[memory]")
BACKOFF_CANCEL_UNIT = unit(
    "tests/drive/test_transient_model_errors.py::test_a_cancel_queued_during_the_backoff_is_applied_before_the_model_is_called_again[memory]"
)
BACKOFF_LEASE_UNIT = unit(
    "tests/drive/test_transient_model_errors.py::"
    "test_a_worker_keeps_and_renews_the_lease_of_a_run_backing_off_and_drives_another_meanwhile[sqlite]"
)
STALE_ASIDE_UNIT = unit(
    "tests/drive/test_transient_model_errors.py::test_a_run_set_aside_whose_lease_lapsed_is_picked_up_afresh_not_resumed[memory]"
)
PUSH_BACKOFF_LEASE_UNIT = unit("tests/drive/test_transient_model_errors.py::test_a_push_driver_renews_its_lease_when_it_hands_a_retried_infer[memory-async]")
STREAM_FAILURE_UNIT = unit("tests/drive/test_transient_model_errors.py::test_an_error_the_streams_checkpoint_raised_under_the_model_is_no_model_error")
DEFAULT_TRANSIENT_UNIT = unit(
    "tests/drive/test_transient_model_errors.py::test_the_default_predicate_takes_timeouts_dropped_connections_and_retryable_statuses[WithStatus429-True]"
)
ASYNC_TO_SYNC_REWRITE_UNIT = unit(
    "tests/drive/test_async_to_sync.py::test_the_rewrite_drops_async_resolves_async_blocks_and_renames"
)
OUTAGE_TOLD_ONCE_UNIT = unit("tests/worker/test_worker_account.py::test_an_outage_is_told_once_and_its_backoff_is_capped")
SQLITE_LOCK_OUTAGE_UNIT = unit(
    "tests/worker/test_worker_account.py::test_a_sqlite_lock_held_past_the_busy_timeout_is_one_outage_ridden_out",
    only="one-slot",
)

def example(name: str) -> Detector:
    """The illegal example trace ``name`` must be reported at its line with its rule."""
    return unit(f"tests/specs/test_trace_examples.py::test_illegal_example_is_reported_at_its_line_and_rule[{name}.jsonl]")


@frozen
class Mutant:
    """A planted bug: replace ``old`` by ``new`` in ``path``."""

    name: str
    path: str
    old: str
    new: str
    detector: Detector


MUTANTS: tuple[Mutant, ...] = (
    # concurrent ordinary calls (the groups bound, issue 34)
    Mutant(
        "a group member starts before its own Executing commit",
        "runkernel/kernel/gate.py",
        "    return settle(state, batch, policies, follow_up=tuple(follow))\n",
        "    planned = settle(state, batch, policies, follow_up=tuple(follow))\n"
        "    return Decision(planned.state, tuple(follow) + tuple(e for e in planned.effects if e not in follow))\n",
        MODEL_CHECKER_GROUPS,
    ),
    Mutant(
        "a group's results are published out of call order",
        "runkernel/kernel/effects_plan.py",
        "        for c in batch.calls\n    )\n",
        "        for c in (reversed(batch.calls) if batch.calls[0].policy and batch.calls[0].policy.concurrent else batch.calls)\n    )\n",
        MODEL_CHECKER_GROUPS,
    ),
    Mutant(
        "a group call waits while its group runs",
        "runkernel/kernel/decide.py",
        "    if isinstance(outcome, ToolScheduled) and call.policy_or(policies.for_tool(call.tool)).concurrent:\n",
        "    if False:\n",
        unit("tests/kernel/test_concurrent_calls.py::test_a_concurrent_call_never_schedules_a_wait"),
    ),
    Mutant(
        "a group call's recovery is decided by another call's policy",
        "runkernel/kernel/recover.py",
        "        recovery = call.policy_or(policies.for_tool(call.tool)).recovery\n        match recovery.mode:\n",
        "        first = next(c for c in batch.calls if isinstance(c.status, CallExecuting))\n"
        "        recovery = first.policy_or(policies.for_tool(first.tool)).recovery\n        match recovery.mode:\n",
        MODEL_CHECKER_GROUPS,
    ),
    Mutant(
        "the driver hands a group's first call out alone",
        "runkernel/adapters/drive/core.py",
        "                        starts = [effect, *later_starts(decision.effects, index)]\n",
        "                        starts = [effect]\n",
        unit("tests/drive/test_concurrent_calls_drive.py::test_the_pull_runtime_runs_the_groups_tools_together"),
    ),
    Mutant(
        "the pull runtime runs a group's tools one after another",
        "runkernel/adapters/drive/runtime_group.py",
        "        if not self.together:\n",
        "        if True:\n",
        unit("tests/drive/test_concurrent_calls_drive.py::test_the_pull_runtime_runs_the_groups_tools_together"),
    ),
    Mutant(
        "a drive that dies leaves its group's tools running",
        "runkernel/adapters/drive/runtime_drive.py",
        "            self.together.settle()  # the tools it started end before its failure is raised\n",
        "            pass\n",
        unit(
            "tests/drive/test_concurrent_calls_drive.py::"
            "test_a_drive_that_dies_while_its_group_runs_first_waits_for_the_tools_it_started"
        ),
    ),
    Mutant(
        "a stopping worker lets a Run go while its group's tools run",
        "runkernel/adapters/drive/runtime_drive.py",
        "        return isinstance(self._next, Hand) and self.together.runs_any(self._next.action)\n",
        "        return False\n",
        unit(
            "tests/worker/test_group_wind_down.py::"
            "test_a_stopping_worker_commits_every_group_call_already_started_and_starts_nothing[memory]"
        ),
    ),
    Mutant(
        "a command is applied while a group's calls run",
        "runkernel/adapters/drive/core.py",
        "            running = unanswered(self.handed_together, state)\n            if running:",
        "            running = ()\n            if running:",
        unit("tests/drive/test_concurrent_calls_drive.py::test_a_cancel_queued_while_the_group_runs_waits_for_every_member"),
    ),
    Mutant(
        "a call a RunCalls lists again is started again",
        "runkernel/adapters/drive/actions.py",
        "        known = {(c.call_id, c.attempt) for c in previous.calls} if isinstance(previous, RunCalls) else set()\n",
        "        known: set[tuple[str, int]] = set()\n",
        unit(
            "tests/drive/test_concurrent_calls_drive.py::"
            "test_a_push_host_answers_the_group_in_any_order_and_starts_each_attempt_once[sync]"
        ),
    ),
    Mutant(
        "the gate is asked after a group member started",
        "runkernel/kernel/gate.py",
        "    if rest:\n        return Decision(state, (RunGate(rest[0], held),))\n",
        "    if rest:\n        started = _start_group(state, batch, (call.call_id,), policies)\n"
        "        return Decision(started.state, started.effects + (RunGate(rest[0]),))\n",
        MODEL_CHECKER_GROUPS,
    ),
    Mutant(
        "a stream checkpoint becomes the committed reply",
        "runkernel/adapters/drive/runtime_drive.py",
        "        return Inferred(reply.content, calls, None if calls else reply.end, None, staging.staged)\n",
        "        content = reply.content if calls or action.partial is None else action.partial\n"
        "        return Inferred(content, calls, None if calls else reply.end, None, staging.staged)\n",
        STATEFUL,
    ),
    Mutant(
        "recovery turns Executing into Requested",
        "runkernel/kernel/recover.py",
        "                lost = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)\n",
        "                lost = CallRequested()  # type: ignore[assignment]\n",
        EXECUTING_UNIT,
    ),
    Mutant(
        "the executor runs before Executing is committed",
        "runkernel/kernel/planning.py",
        "    effects: tuple[Effect, ...] = (Commit(commit),) + tuple(follow_up)\n",
        "    effects: tuple[Effect, ...] = tuple(follow_up) + (Commit(commit),)\n",
        STATEFUL,
    ),
    Mutant(
        "inference runs while a batch is open",
        "runkernel/kernel/recover.py",
        "    if batch is None:\n        return RecoveryRow.RUNNING_NO_OPEN_BATCH\n",
        "    if batch is None or not any(\n"
        "        isinstance(c.status, (CallExecuting, CallAwaiting)) for c in batch.calls\n"
        "    ):\n        return RecoveryRow.RUNNING_NO_OPEN_BATCH\n",
        MODEL_CHECKER,
    ),
    Mutant(
        "a resume is accepted with the wrong wait kind",
        "runkernel/kernel/resume.py",
        "    if command.kind is not ticket.wait:\n"
        "        return Rejection(\n"
        "            Rule.WAIT_KIND_MISMATCH,\n"
        "            f\"the run waits for {ticket.wait.value!r}, the command is {command.kind.value!r}\",\n"
        "        )\n"
        "    if not isinstance(command.payload, PAYLOADS_BY_WAIT[ticket.wait]):\n",
        "    if not isinstance(command.payload, PAYLOADS_BY_WAIT[command.kind]):\n",
        WRONG_KIND_UNIT,
    ),
    Mutant(
        "recovery overwrites a terminal result",
        "runkernel/kernel/recover.py",
        "                moved, unknown = moved.replace_call(attrs.evolve(call, status=lost)), True\n",
        "                moved, unknown = attrs.evolve(moved, calls=tuple(attrs.evolve(c, status=lost) for c in moved.calls)), True\n",
        MODEL_CHECKER,
    ),
    Mutant(
        "a replay attempt reuses its attempt number",
        "runkernel/kernel/recover.py",
        "                    runs.append((call, attempt + 1))\n",
        "                    runs.append((call, attempt))\n",
        STATEFUL,
    ),
    Mutant(
        "a cancelled Run leaves an Awaiting call open",
        "runkernel/kernel/effects_plan.py",
        "            return CallIndeterminate(status.attempt, reason)\n",
        "            return status\n",
        CANCEL_UNIT,
    ),
    Mutant(
        "a non-replay tool is re-executed after a crash",
        "runkernel/kernel/recover.py",
        "            case RecoveryMode.REPLAY:\n",
        "            case RecoveryMode.REPLAY | RecoveryMode.INDETERMINATE:\n",
        STATEFUL,
    ),
    Mutant(
        "the push driver hands out RunCall before its Executing commit",
        "runkernel/adapters/drive/core.py",
        "                    case Commit():\n",
        "                    case Commit() if any(isinstance(e, Execute) for e in decision.effects):\n"
        "                        pass\n"
        "                    case Commit():\n",
        PUSH_BATCH_UNIT,
    ),
    Mutant(
        "the push driver drops an acknowledged commit's messages",
        "runkernel/adapters/drive/core.py",
        "        self.history.extend(commit.messages)\n",
        "        pass\n",
        PUSH_HISTORY_UNIT,
    ),
    Mutant(
        "an inbox command is settled after its commit, not in it",
        "runkernel/adapters/drive/core.py",
        "        settle = None if self.entry is None else Settlement(self.entry.entry_id, \"applied\")\n"
        "        stored: RunSnapshot = yield Append(commit, settle, self.state, self.entry, quiet)\n"
        "        self.entry = None\n",
        "        stored: RunSnapshot = yield Append(commit, None, self.state, None, quiet)\n"
        "        if self.entry is not None:\n"
        "            yield Settle(self.entry, \"applied\")\n"
        "        self.entry = None\n",
        SETTLE_UNIT,
    ),
    Mutant(
        "the judge lets a denied call go on executing",
        "runkernel/kernel/validate_resume.py",
        "        if not executes:\n",
        "        if False:\n",
        example("resume-edge-per-payload"),
    ),
    Mutant(
        "the judge does not check the resumed digest",
        "runkernel/kernel/validate_resume.py",
        "    if not hmac.compare_digest(digest.encode(\"utf-8\", \"surrogatepass\"), expected.encode(\"ascii\")):\n",
        "    if False:\n",
        example("resume-digest-is-jcs-sha256"),
    ),
    Mutant(
        "ticket ids compare case-folded and trimmed",
        "runkernel/kernel/validate_resume.py",
        "    return hmac.compare_digest(a.encode(\"utf-8\", \"surrogatepass\"), b.encode(\"utf-8\", \"surrogatepass\"))\n",
        "    return hmac.compare_digest(a.strip().lower().encode(), b.strip().lower().encode())\n",
        SLOPPY_TICKET_UNIT,
    ),
    Mutant(
        "recovery reads the worker's policy instead of the committed one",
        "runkernel/kernel/recover.py",
        "        recovery = call.policy_or(policies.for_tool(call.tool)).recovery\n",
        "        recovery = policies.for_tool(call.tool).recovery\n",
        COMMITTED_POLICY_UNIT,
    ),
    Mutant(
        "a group member the gate allowed starts before the gate round is over",
        "runkernel/kernel/gate.py",
        "    if rest:\n        return Decision(state, (RunGate(rest[0], held),))\n",
        "    if rest:\n        return _start_group(state, batch, held, policies)\n",
        GROUP_ROUND_UNIT,
    ),
    Mutant(
        "the judge lets a group member wait while another member runs",
        "runkernel/kernel/validate_calls.py",
        "            not (executing and waiting),\n",
        "            True,\n",
        GROUP_STATE_UNIT,
    ),
    Mutant(
        "the SQLite store reads a Run's lease before its write transaction",
        "runkernel/adapters/stores/sqlite/leases.py",
        "            db.execute(\"BEGIN IMMEDIATE\")\n"
        "            try:\n"
        "                written = act(self._lease_rows(run_ids) if run_ids else {}, self._clock())\n",
        "            rows = self._lease_rows(run_ids) if run_ids else {}\n"
        "            db.execute(\"BEGIN IMMEDIATE\")\n"
        "            try:\n"
        "                written = act(rows, self._clock())\n",
        SQLITE_LEASE_RACE_UNIT,
    ),
    Mutant(
        "leases renewed together revive a lease that expired or was released",
        "runkernel/adapters/stores/leases.py",
        "        if row is not None and row.valid_at(now) and row.lease.writer == lease.writer:\n",
        "        if row is not None and row.lease.writer == lease.writer:\n",
        RENEWED_TOGETHER_UNIT,
    ),
    Mutant(
        "a worker's renewal rounds renew nothing",
        "runkernel/adapters/worker/together.py",
        "            renewed = self.store.renew_leases(due, self.leases.duration)\n",
        "            renewed = self.store.renew_leases([], self.leases.duration)\n",
        RENEWAL_ROUNDS_UNIT,
    ),
    Mutant(
        "the memory store reads a Run's lease outside its lock",
        "runkernel/adapters/stores/memory.py",
        "        with self._lock:\n"
        "            lease = acquired(run_id, self._leases.get(run_id), worker_id, duration, self._clock())\n",
        "        row = self._leases.get(run_id)\n"
        "        with self._lock:\n"
        "            lease = acquired(run_id, row, worker_id, duration, self._clock())\n",
        MEMORY_LEASE_RACE_UNIT,
    ),
    Mutant(
        "a lost acknowledgement adopts another writer's identical commit",
        "runkernel/adapters/stores/postgres/store.py",
        "                if sent and stored[:2] == (sent[-1][1], None if lease is None else lease.writer):\n",
        "                if sent and stored[0] == sent[-1][1]:\n",
        PG_LOST_ACK_WRITER_UNIT,
    ),
    Mutant(
        "a resend after a lost connection adopts an identical commit before its writer is compared",
        "runkernel/adapters/stores/postgres/store.py",
        "        if not mine or writer != (None if lease is None else lease.writer):\n"
        "            return None\n"
        "        if lost and sent:\n",
        "        if lost and sent and mine:\n"
        "            self.adopted_after_lost_ack += 1\n"
        "            return sent[-1][0]\n"
        "        if not mine or writer != (None if lease is None else lease.writer):\n"
        "            return None\n"
        "        if lost and sent:\n",
        PG_RESEND_WRITER_UNIT,
    ),
    Mutant(
        "a retried commit is recognized by worker id, not by its lease epoch",
        "runkernel/adapters/stores/leases.py",
        "        and stored_writer == lease.writer\n",
        "        and stored_writer is not None and stored_writer.worker_id == lease.worker_id\n",
        LOST_REPLY_EPOCH_UNIT,
    ),
    Mutant(
        "the push driver hands out RunCall without re-checking its lease",
        "runkernel/adapters/drive/store_ops.py",
        "            action = attrs.evolve(action, lease_epoch=self.leases.before_executor(action.run_id).epoch)\n",
        "            action = attrs.evolve(action, lease_epoch=self.leases.held(action.run_id).epoch)  # type: ignore[union-attr]\n",
        PUSH_LEASE_LOSS_UNIT,
    ),
    Mutant(
        "the push driver carries on after its commit lost to another writer",
        "runkernel/adapters/drive/store_ops.py",
        "            stored = self._write(op.commit, op.prev is None, op.settle) if self.leases is None else self._leased_append(op)\n",
        "            try:\n"
        "                stored = self._write(op.commit, op.prev is None, op.settle) if self.leases is None else self._leased_append(op)\n"
        "            except CommitConflict:\n"
        "                stored = self.store.run(op.commit.run_id)  # another writer got there: carry on from its state\n",
        PUSH_LOST_COMMIT_UNIT,
    ),
    Mutant(
        "the pull runtime carries on after its commit lost to another writer",
        "runkernel/adapters/drive/store_ops.py",
        "            stored = self._write(op.commit, op.prev is None, op.settle) if self.leases is None else self._leased_append(op)\n",
        "            try:\n"
        "                stored = self._write(op.commit, op.prev is None, op.settle) if self.leases is None else self._leased_append(op)\n"
        "            except CommitConflict:\n"
        "                stored = self.store.run(op.commit.run_id)  # another writer got there: carry on from its state\n",
        PULL_LOST_COMMIT_UNIT,
    ),
    Mutant(
        "a runtime reuses a hook's uncommitted staging in its next drive",
        "runkernel/adapters/drive/runtime_drive.py",
        "        staging = ports.hooks.before_inference(action.run_id, action.step, action.staged)\n",
        "        answers = ports.__dict__.setdefault(\"_staging_by_step\", {})  # the hooks run once per Step\n"
        "        if (action.run_id, action.step) not in answers:\n"
        "            answers[(action.run_id, action.step)] = ports.hooks.before_inference(action.run_id, action.step, action.staged)\n"
        "        staging = answers[(action.run_id, action.step)]\n",
        STAGING_REUSED_UNIT,
    ),
    Mutant(
        "a runtime reuses a lost attempt's AfterTool reaction",
        "runkernel/adapters/drive/runtime_ports.py",
        "        reaction = self.hooks.after_tool(action.run_id, action.call_id, action.attempt, reply)\n",
        "        reactions = self.__dict__.setdefault(\"_reactions\", {})  # AfterTool runs once per call\n"
        "        if (action.run_id, action.call_id) not in reactions:\n"
        "            reactions[(action.run_id, action.call_id)] = self.hooks.after_tool(action.run_id, action.call_id, action.attempt, reply)\n"
        "        reaction = reactions[(action.run_id, action.call_id)]\n",
        REACTION_REUSED_UNIT,
    ),
    Mutant(
        "the push driver settles an inbox command after its commit, not in it",
        "runkernel/adapters/drive/core.py",
        "        settle = None if self.entry is None else Settlement(self.entry.entry_id, \"applied\")\n"
        "        stored: RunSnapshot = yield Append(commit, settle, self.state, self.entry, quiet)\n",
        "        stored: RunSnapshot = yield Append(commit, None, self.state, None, quiet)\n"
        "        if self.entry is not None:\n"
        "            yield Settle(self.entry, \"applied\")\n",
        PUSH_SETTLED_AFTER_UNIT,
    ),
    Mutant(
        "the push driver settles an inbox command before its commit, not in it",
        "runkernel/adapters/drive/core.py",
        "        settle = None if self.entry is None else Settlement(self.entry.entry_id, \"applied\")\n"
        "        stored: RunSnapshot = yield Append(commit, settle, self.state, self.entry, quiet)\n",
        "        if self.entry is not None:\n"
        "            yield Settle(self.entry, \"applied\")\n"
        "        stored: RunSnapshot = yield Append(commit, None, self.state, None, quiet)\n",
        PUSH_SETTLED_BEFORE_UNIT,
    ),
    Mutant(
        "retries follow the worker's configuration instead of the committed policy",
        "runkernel/kernel/decide.py",
        "            retry = call.policy_or(policies.for_tool(call.tool)).retry\n",
        "            retry = policies.for_tool(call.tool).retry\n",
        COMMITTED_RETRIES_UNIT,
    ),
    Mutant(
        "the judge accepts a resumed event on a commit that is not a resume",
        "runkernel/kernel/validate.py",
        "            not resumed,\n            Rule.RESUME,\n",
        "            True,\n            Rule.RESUME,\n",
        example("resume-matches-ticket--resumed-on-a-running-commit"),
    ),
    Mutant(
        "the judge accepts a resumed event on a Run's activation",
        "runkernel/kernel/validate.py",
        "        not _resumed_events(commit.events),\n",
        "        True,\n",
        example("resume-matches-ticket--resumed-on-the-activation"),
    ),
    Mutant(
        "the judge takes every commit leaving Awaiting for a resume",
        "runkernel/kernel/validate.py",
        "    if source is RunPhase.AWAITING and target is RunPhase.RUNNING:\n",
        "    if source is RunPhase.AWAITING:\n",
        example("resume-matches-ticket--resumed-on-the-cancel-of-an-awaiting-run"),
    ),
    Mutant(
        "validate_commit silently accepts a reused ticket when ticket_seen is omitted",
        "runkernel/kernel/validate.py",
        "    ticket_seen: TicketSeen,\n) -> Accepted | Rejection:\n",
        "    ticket_seen: TicketSeen = NO_TICKETS_SEEN,\n) -> Accepted | Rejection:\n",
        TICKET_SEEN_REQUIRED_UNIT,
    ),
    Mutant(
        "a Run judged alone re-enters Awaiting on a ticket its own history used",
        "runkernel/kernel/validate.py",
        "            not history.ticket_used(ticket_id),\n",
        "            True,\n",
        unit("tests/specs/test_judge_explains.py::test_a_run_judged_alone_refuses_a_ticket_its_own_history_used"),
    ),
    Mutant(
        "validate_commit ignores the used tickets it is given",
        "runkernel/kernel/validate.py",
        "                not ticket_seen(ticket_id),\n",
        "                True,\n",
        TICKET_SEEN_ASKED_UNIT,
    ),
    Mutant(
        "the trace judge asks only open Runs for used tickets",
        "runkernel/specs/checker.py",
        "            ticket_seen=self._ticket_seen,\n",
        "            ticket_seen=lambda t: any(h.ticket_used(t) for h in self.histories.values()),\n",
        TRACE_JUDGE_TICKETS_UNIT,
    ),
    Mutant(
        "the memory store asks only the Run's own history for used tickets",
        "runkernel/adapters/stores/memory.py",
        "                self._tickets.__contains__,\n",
        "                self._stored_history(commit.run_id).ticket_used,\n",
        STORE_TICKETS_UNIT,
    ),
    Mutant(
        "the SQLite store asks only the Run's own history for used tickets",
        "runkernel/adapters/stores/sqlite/store.py",
        "self.history(commit.run_id), self._ticket_known, line)",
        "self.history(commit.run_id), self.history(commit.run_id).ticket_used, line)",
        STORE_TICKETS_UNIT,
    ),
    Mutant(
        "the memory store judges every append with NO_HISTORY, not the Run's own history",
        "runkernel/adapters/stores/memory.py",
        "                self._stored_history(commit.run_id),\n",
        "                NO_HISTORY,\n",
        OWN_HISTORY_UNIT,
    ),
    Mutant(
        "a commit's settlement rewrites a command already settled",
        "runkernel/adapters/stores/sql/statements.py",
        "WHERE entry_id = ? AND state = 'pending'\",",
        "WHERE entry_id = ?\",",
        SETTLE_PENDING_UNIT,
    ),
    Mutant(
        "compaction deletes a Run's applied commands too",
        "runkernel/adapters/stores/sql/statements.py",
        " AND state = 'settled' AND outcome LIKE 'refused%'\"",
        " AND state = 'settled'\"",
        COMPACTION_UNIT,
    ),
    Mutant(
        "the memory store lists its Threads in commit order, not sorted",
        "runkernel/adapters/stores/memory.py",
        "        return sorted(self._heads)\n",
        "        return list(self._heads)\n",
        SORTED_THREADS_UNIT,
    ),
    Mutant(
        "the memory store queues a second answer to a wait",
        "runkernel/adapters/stores/memory.py",
        "            if ticket is not None:\n",
        "            if False:\n",
        ONE_ANSWER_UNIT,
    ),
    Mutant(
        "the kernel's resume compares ticket ids case-folded and trimmed",
        "runkernel/kernel/resume.py",
        "    if not hmac.compare_digest(ticket.ticket_id.encode(), command.ticket_id.encode()):\n",
        "    if ticket.ticket_id.strip().lower() != command.ticket_id.strip().lower():\n",
        NEAR_TICKET_UNIT,
    ),
    Mutant(
        "the kernel's resume matches ticket ids by prefix",
        "runkernel/kernel/resume.py",
        "    if not hmac.compare_digest(ticket.ticket_id.encode(), command.ticket_id.encode()):\n",
        "    if not (ticket.ticket_id.startswith(command.ticket_id) or command.ticket_id.startswith(ticket.ticket_id)):\n",
        NEAR_TICKET_UNIT,
    ),
    Mutant(
        "the kernel's approval deadline compares ticket ids case-folded and trimmed",
        "runkernel/kernel/resume.py",
        "    if not hmac.compare_digest(ticket.ticket_id.encode(), event.ticket_id.encode()):\n",
        "    if ticket.ticket_id.strip().lower() != event.ticket_id.strip().lower():\n",
        NEAR_TICKET_UNIT,
    ),
    Mutant(
        "check-trace exits with its first file's verdict",
        "runkernel/cli/trace_commands.py",
        "            worst = max(worst, finding.verdict)\n",
        "            worst = finding.verdict if name == args.files[0] else worst\n",
        CHECK_TRACE_EXIT_UNIT,
    ),
    Mutant(
        "check-trace exits with its last file's verdict",
        "runkernel/cli/trace_commands.py",
        "            worst = max(worst, finding.verdict)\n",
        "            worst = finding.verdict\n",
        CHECK_TRACE_EXIT_UNIT,
    ),
    Mutant(
        "the canonical fast path escapes non-ASCII text",
        "runkernel/kernel/canonical.py",
        "ensure_ascii=False).encode(\"utf-8\")",
        "ensure_ascii=True).encode(\"utf-8\")",
        FAST_PATH_TEXT_UNIT,
    ),
    Mutant(
        "the canonical fast path escapes U+2028 as JavaScript-safe JSON does",
        "runkernel/kernel/canonical.py",
        "ensure_ascii=False).encode(\"utf-8\")",
        "ensure_ascii=False).replace(\"\\u2028\", \"\\\\u2028\").encode(\"utf-8\")",
        FAST_PATH_TEXT_UNIT,
    ),
    Mutant(
        "the canonical fast path takes keys outside the BMP",
        "runkernel/kernel/canonical.py",
        "max(key) > \"\\uffff\"",
        "max(key) > \"\\U0010ffff\"",
        ASTRAL_KEYS_UNIT,
    ),
    Mutant(
        "a misspelt policy string silently becomes the safe default",
        "runkernel/kernel/policies.py",
        "    if named is None:\n"
        "        raise BadToolPolicy(tool, policy)\n"
        "    return named\n",
        "    return named or SAFE_DEFAULT\n",
        BAD_POLICY_STRING_UNIT,
    ),
    Mutant(
        "the string \"replay\" stands for another policy",
        "runkernel/kernel/policies.py",
        "        \"replay\": ToolPolicy.replay(),\n",
        "        \"replay\": ToolPolicy.indeterminate(),\n",
        REPLAY_STRING_UNIT,
    ),
    Mutant(
        "a Run of an app driven in process holds no lease: the embedded worker may drive it too",
        "runkernel/integrations/_common.py",
        "    return None if app is None else LeaseKeeper(store, default_worker_id(), duration=duration)\n",
        "    return None\n",
        SERVE_LEASE_UNIT,
    ),
    Mutant(
        "the durable runner wraps the user's own function tool in place",
        "runkernel/integrations/openai_agents/_binding.py",
        "    wrapped = copy.copy(tool)\n",
        "    wrapped = tool\n",
        UNTOUCHED_UNIT,
    ),
    Mutant(
        "ConversationBusy names the conversation instead of the Run that holds it",
        "runkernel/integrations/_common.py",
        "else ConversationBusy(thread_id, active)\n",
        "else ConversationBusy(thread_id, thread_id)\n",
        CONVERSATION_BUSY_UNIT,
    ),
    Mutant(
        "the one-call form's retries count every attempt, not those after the first",
        "runkernel/kernel/policies.py",
        "    return RetryPolicy(retries + 1)\n",
        "    return RetryPolicy(max(retries, 1))\n",
        ONE_CALL_RETRIES_UNIT,
    ),
    Mutant(
        "an error runkernel raises on purpose is outside the error tree",
        "runkernel/errors.py",
        "class NotATrace(PeerError):\n",
        "class NotATrace(Exception):\n",
        ERROR_TREE_UNIT,
    ),
    Mutant(
        "an error is under no branch of whose fault it is",
        "runkernel/errors.py",
        "class UnknownRun(UsageError):\n",
        "class UnknownRun(RunkernelError):\n",
        ERROR_BRANCH_UNIT,
    ),
    Mutant(
        "a branch of the error tree can be raised itself",
        "runkernel/errors.py",
        "frozenset({RunkernelError, UsageError, PeerError, StoreError, LeaseError})",
        "frozenset({RunkernelError, UsageError, PeerError, LeaseError})",
        ABSTRACT_BRANCH_UNIT,
    ),
    Mutant(
        "the errors module names a kernel type for its annotations (a circle through every room)",
        "runkernel/errors.py",
        "import enum\nfrom typing import Protocol\n",
        "import enum\nfrom typing import TYPE_CHECKING, Protocol\n\n"
        "if TYPE_CHECKING:\n    from runkernel.kernel.rules import Rule\n",
        LAYERS_UNIT,
    ),
    Mutant(
        "the layer check leaves TYPE_CHECKING imports out of its circles",
        "tests/proofs/test_layers.py",
        "            edges[name].add(target)\n",
        "            if not imp.type_only:\n                edges[name].add(target)\n",
        TYPE_CHECKING_CIRCLE_UNIT,
    ),
    Mutant(
        "runkernel answers a name it does not export (an old name resolves silently)",
        "runkernel/__init__.py",
        "        raise AttributeError(f\"module {__name__!r} has no attribute {name!r}\")\n",
        "        return None\n",
        UNKNOWN_NAME_UNIT,
    ),
    Mutant(
        "the push driver asks a reconnect tool's status without the lease epoch",
        "runkernel/adapters/drive/driver_sync.py",
        "            reply = status(action.operation_id, action.lease_epoch)\n",
        "            reply = status(action.operation_id, None)\n",
        STATUS_EPOCH_UNIT,
    ),
    Mutant(
        "the driver drops the host's message metadata",
        "runkernel/adapters/drive/reports.py",
        "            messages.append(message if metadata is None else attrs.evolve(message, metadata=metadata))\n",
        "            messages.append(message)\n",
        MESSAGE_METADATA_UNIT,
    ),
    Mutant(
        "the pull runtime rebuilds the model's CallRequests without their operation ids",
        "runkernel/adapters/drive/runtime_drive.py",
        "        calls = tuple(reply.calls)\n",
        "        calls = tuple(type(call)(call.tool, call.arguments, call.call_id) for call in reply.calls)\n",
        ONE_RUN_CALL_UNIT,
    ),
    Mutant(
        "an example imports a private module",
        "examples/demo_app.py",
        "from runkernel.kernel import ToolCall\n",
        "from runkernel.kernel.state import ToolCall\n",
        PUBLIC_IMPORTS_UNIT,
    ),
    Mutant(
        "a PostgreSQL store trusts its cached head after a conflict",
        "runkernel/adapters/stores/postgres/store.py",
        "                if unread:\n                    # judged against this store's own last write",
        "                if False:\n                    # judged against this store's own last write",
        STALE_HEAD_UNIT,
    ),
    Mutant(
        "the crashing store dies 'after the write' before writing",
        "runkernel/testing/crash.py",
        "        stored = append_to(self.store, commit, settle, lease=lease, release=release, trace_context=trace_context)\n",
        "        if self.plan.crash_here(Boundary.AFTER_WRITE, position):\n"
        "            raise self.failure(Boundary.AFTER_WRITE, position)\n"
        "        stored = append_to(self.store, commit, settle, lease=lease, release=release, trace_context=trace_context)\n",
        TESTING_AFTER_WRITE_UNIT,
    ),
    Mutant(
        "the crashing store names every commit an activation",
        "runkernel/testing/crash.py",
        "        position = position_of(self.store.run(commit.run_id), commit)\n",
        "        position = position_of(None, commit)\n",
        TESTING_POSITION_UNIT,
    ),
    Mutant(
        "a crash 'after a tool's effect' comes before the effect",
        "runkernel/testing/crash.py",
        "        try:\n"
        "            return self.tool.run(invocation)\n"
        "        finally:\n"
        "            if self.plan.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):\n"
        "                raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)\n",
        "        if self.plan.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):\n"
        "            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)\n"
        "        return self.tool.run(invocation)\n",
        TESTING_AFTER_EFFECT_UNIT,
    ),
    Mutant(
        "a simulated crash is an Exception the runtime turns into a tool outcome",
        "runkernel/testing/crash.py",
        "class SimulatedCrash(BaseException):\n",
        "class SimulatedCrash(Exception):\n",
        CRASH_INSIDE_TOOL_UNIT,
    ),
    Mutant(
        "the test-data builder feeds decide without the Run's history",
        "runkernel/conformance/runs.py",
        "            decision = step(built.state, event, built.policies, built.history)\n",
        "            decision = step(built.state, event, built.policies)\n",
        TESTING_BUILDER_HISTORY_UNIT,
    ),
    Mutant(
        "the test-data builder keeps a hand-made commit the judge refused",
        "runkernel/conformance/runs.py",
        '        assert isinstance(verdict, Accepted), f"hand-made commit refused: {verdict}"\n',
        "        if not isinstance(verdict, Accepted):\n"
        "            return attrs.evolve(self, commits=self.commits + (commit,))\n",
        TESTING_BUILDER_JUDGE_UNIT,
    ),
    Mutant(
        "the CLI imports the simulator when it is imported",
        "runkernel/cli/simulate.py",
        "if TYPE_CHECKING:\n    from runkernel.testing.simulation.simulate import Report\n",
        "from runkernel.testing.simulation.simulate import Report\n",
        TESTING_IMPORTERS_UNIT,
    ),
    Mutant(
        "the generated sync shell is edited by hand (it no longer waits between status asks)",
        "runkernel/adapters/drive/driver_sync.py",
        "                time.sleep(interval)\n",
        "                pass\n",
        SYNC_SHELL_GENERATED_UNIT,
    ),
    Mutant(
        "the async-to-sync generator leaves await in the sync code",
        "tools/async_to_sync.py",
        '        if token.string == "await" or (token.string == "async" and following.string in ("def", "with", "for")):\n',
        '        if token.string == "async" and following.string in ("def", "with", "for"):\n',
        ASYNC_TO_SYNC_REWRITE_UNIT,
    ),
    Mutant(
        "an async app gets a fresh event loop per drive",
        "runkernel/adapters/worker/app_loop.py",
        "            self._runner.run(drive)\n",
        "            asyncio.run(drive)\n",
        ASYNC_LOOP_UNIT,
    ),
    Mutant(
        "shutdown closes the async app's loop under the drive running on it",
        "runkernel/adapters/worker/app_loop.py",
        "        if self._running.acquire(blocking=False):\n",
        "        if self._running.acquire(blocking=False) or True:\n",
        ASYNC_LOOP_SHUTDOWN_UNIT,
    ),
    Mutant(
        "a transient model error ends the Run at once (a commit where there must be none)",
        "runkernel/adapters/drive/core.py",
        "        retry = settings.transient(error) and failures < settings.model_attempts\n",
        "        retry = False\n",
        TRANSIENT_SUCCESS_UNIT,
    ),
    Mutant(
        "the cap of model attempts is off by one",
        "runkernel/adapters/drive/core.py",
        "        retry = settings.transient(error) and failures < settings.model_attempts\n",
        "        retry = settings.transient(error) and failures <= settings.model_attempts\n",
        TRANSIENT_CAP_UNIT,
    ),
    Mutant(
        "a non-transient model error is retried like a transient one",
        "runkernel/adapters/drive/core.py",
        "        retry = settings.transient(error) and failures < settings.model_attempts\n",
        "        retry = failures < settings.model_attempts\n",
        NON_TRANSIENT_UNIT,
    ),
    Mutant(
        "the count of model attempts is not reset by a successful inference",
        "runkernel/adapters/drive/core.py",
        "                self.model_failures = 0\n",
        "                pass\n",
        MODEL_COUNT_RESET_UNIT,
    ),
    Mutant(
        "after a backoff the model is called again before a queued command is applied",
        "runkernel/adapters/drive/runtime_drive.py",
        "            op = self._send(Poll())  # a command queued during the wait goes first\n",
        "            pass\n",
        BACKOFF_CANCEL_UNIT,
    ),
    Mutant(
        "a worker releases the lease of a Run backing off",
        "runkernel/adapters/worker/set_aside.py",
        "            if run_id not in self.drives:\n                self.leases.release(run_id)\n",
        "            self.leases.release(run_id)\n",
        BACKOFF_LEASE_UNIT,
    ),
    Mutant(
        "a worker does not renew the lease of a Run backing off",
        "runkernel/adapters/worker/set_aside.py",
        "                self.leases.for_commit(run_id)\n",
        "                pass\n",
        BACKOFF_LEASE_UNIT,
    ),
    Mutant(
        "a worker retries a model call at once instead of setting the Run aside",
        "runkernel/adapters/worker/loop.py",
        "            if drive.pause is not None:\n",
        "            if False:\n",
        BACKOFF_LEASE_UNIT,
    ),
    Mutant(
        "a worker goes on with a Run set aside whose lease lapsed meanwhile",
        "runkernel/adapters/worker/loop.py",
        "        if resumed and (held is None or held.epoch != lease.epoch):\n",
        "        if False:\n",
        STALE_ASIDE_UNIT,
    ),
    Mutant(
        "a push driver does not renew its lease before the host waits out a backoff",
        "runkernel/adapters/drive/store_ops.py",
        "                    self.leases.for_commit(op.run_id)  # renewed if its renewal is due\n",
        "                    pass\n",
        PUSH_BACKOFF_LEASE_UNIT,
    ),
    Mutant(
        "the default predicate misses a rate limit (HTTP 429)",
        "runkernel/adapters/drive/model_errors.py",
        "_TRANSIENT_STATUS = frozenset({408, 409, 429})\n",
        "_TRANSIENT_STATUS = frozenset({408, 409})\n",
        DEFAULT_TRANSIENT_UNIT,
    ),
    Mutant(
        "a failure of the stream's checkpoint under the model is taken for a model error",
        "runkernel/adapters/drive/runtime_drive.py",
        "            if stream.failed:\n",
        "            if False:\n",
        STREAM_FAILURE_UNIT,
    ),
    Mutant(
        "a store outage is told again at every failed retry",
        "runkernel/adapters/worker/outage.py",
        "        if self._since is None:\n            self._since = self._monotonic()\n",
        "        if True:\n            self._since = self._monotonic()\n",
        OUTAGE_TOLD_ONCE_UNIT,
    ),
    Mutant(
        "the outage backoff is not capped",
        "runkernel/adapters/worker/outage.py",
        "        return min(self.max_delay, self.first_delay * (1 << min(self._retries, 30)))\n",
        "        return self.first_delay * (1 << min(self._retries, 30))\n",
        OUTAGE_TOLD_ONCE_UNIT,
    ),
    Mutant(
        "a drive cut short by a store outage counts as a failed drive",
        "runkernel/adapters/worker/account.py",
        "        if isinstance(seen, StoreUnavailable):\n            return seen\n",
        "        if False:\n            return seen\n",
        SQLITE_LOCK_OUTAGE_UNIT,
    ),
    Mutant(
        "the codec drops a hold's request when it reads a wait back (export loses the prompt)",
        "runkernel/kernel/codec_typed.py",
        "                wait.request,\n",
        "                None,\n",
        unit("tests/cli/test_operator_views.py::test_check_trace_ignores_the_requests_value"),
    ),
    Mutant(
        "the store accepts by its named edge a later commit that names a fork source",
        "runkernel/kernel/validate_edge.py",
        "        or commit.forked_from is not None\n",
        "",
        unit("tests/kernel/test_named_edge.py::test_a_later_commit_naming_a_fork_source_is_refused_under_every_claim"),
    ),
    Mutant(
        "the store takes a commit's named edge on trust (the named call's move is never judged)",
        "runkernel/kernel/validate_edge.py",
        "    check_call_move(old, new, ending=False, resuming=False)  # its status changed: checked above\n",
        "    pass  # the named edge taken on trust\n",
        unit("tests/kernel/test_named_edge.py::test_every_catalogued_mutation_gets_the_full_judges_verdict_under_every_claim"),
    ),
    Mutant(
        "a quiet commit keeps the lease (the worker releases it in a transaction of its own)",
        "runkernel/adapters/drive/core.py",
        "        quiet = isinstance(commit.disposition, (Awaiting, Ended))\n",
        "        quiet = False\n",
        unit("tests/drive/test_drive_transactions.py::test_a_drive_costs_its_commits_plus_one_durable_transaction"),
    ),
    Mutant(
        "SQLite: a commit that changes its Run's state keeps the old state in the Run's row",
        "runkernel/adapters/stores/sqlite/store.py",
        "                same_state = summary.state == state_name(before)\n",
        "                same_state = True\n",
        unit("tests/stores/test_sqlite_pages.py::test_a_commit_writes_only_the_rows_it_changes"),
    ),
    Mutant(
        "SQLite: a commit of the active Run never moves the Thread's row, not even when it ends the Run",
        "runkernel/adapters/stores/sqlite/heads.py",
        "    return not (before_active == run_id and after_active == run_id)\n",
        "    return before_active != run_id\n",
        unit("tests/stores/test_sqlite_heads.py::test_db_migrate_takes_a_sqlite_store_from_8_to_9"),
    ),
    Mutant(
        "SQLite: a commit asked to release its lease keeps it",
        "runkernel/adapters/stores/sqlite/store.py",
        "                db.execute(RELEASE_IN_COMMIT, (True, lease.run_id, lease.worker_id, lease.epoch))\n",
        "                pass  # the release forgotten\n",
        unit("tests/stores/test_store_conformance.py::TestRunkernelStores::test_a_commit_that_releases_its_lease_gives_it_up_in_the_same_write"),
    ),
    Mutant(
        "PostgreSQL: a lease taken over in one statement keeps the old epoch",
        "runkernel/adapters/stores/postgres/sql.py",
        '    f"epoch = CASE WHEN NOT l.released AND l.expires_at > {NOW} THEN l.epoch ELSE l.epoch + 1 END, "\n',
        '    f"epoch = CASE WHEN NOT l.released AND l.expires_at > {NOW} THEN l.epoch ELSE l.epoch END, "\n',
        unit("tests/stores/test_postgres_store.py::TestPostgresStore::test_epochs_rise_with_every_take_over_and_after_a_release"),
    ),
    Mutant(
        "a child's pick-up answers its first look at the inbox from before its owed cancel was queued",
        "runkernel/adapters/drive/core.py",
        "        self.inbox_look = list(picked.pending) if picked.parent is None else None\n",
        "        self.inbox_look = list(picked.pending)\n",
        unit(
            "tests/worker/test_push_driver_delegations_hosts.py::"
            "test_a_child_of_a_parent_that_ended_before_its_cancels_is_cancelled_when_picked_up"
        ),
    ),
    Mutant(
        "PostgreSQL: a commit's look at the inbox outlives a command this store put",
        "runkernel/adapters/stores/postgres/store.py",
        "        self._echo.forget()  # a write (a command put or settled, a lease given up) may change it\n",
        "        pass\n",
        unit("tests/stores/test_folded_reads.py::test_a_write_of_the_store_after_its_commit_voids_the_commit_s_look"),
    ),
    Mutant(
        "PostgreSQL: a commit's look at the inbox answers for another version",
        "runkernel/adapters/stores/postgres/echo.py",
        "        if seen is None or seen[:2] != (run_id, version):\n",
        "        if seen is None or seen[0] != run_id:\n",
        unit("tests/stores/test_folded_reads.py::test_the_look_after_a_commit_is_what_the_commit_saw_once"),
    ),
    Mutant(
        "PostgreSQL: a history answer read before the store's own commit is used after it",
        "runkernel/adapters/stores/postgres/store.py",
        "        self._memo.clear()\n",
        "        pass\n",
        unit(
            "tests/stores/test_commit_echo.py::"
            "test_a_history_answer_read_before_the_store_s_own_commit_is_not_used_after_it"
        ),
    ),
    Mutant(
        "PostgreSQL: the lease's time left at the commit is taken as its time left now (W1)",
        "runkernel/adapters/stores/postgres/echo.py",
        "        return None if elapsed >= FRESH else seen[3] - elapsed\n",
        "        return None if elapsed >= FRESH else seen[3]\n",
        unit("tests/stores/test_commit_echo.py::test_a_worker_stalled_past_its_lease_after_its_commit_starts_nothing"),
    ),
    Mutant(
        "PostgreSQL: a commit's figure for its lease is used however long ago the commit was sent (W1)",
        "runkernel/adapters/stores/postgres/echo.py",
        "        return None if elapsed >= FRESH else seen[3] - elapsed\n",
        "        return seen[3] - elapsed\n",
        unit(
            "tests/stores/test_commit_echo.py::"
            "test_a_commit_s_figure_for_its_lease_is_less_the_time_since_and_only_while_fresh"
        ),
    ),
    Mutant(
        "PostgreSQL: the ending commit's compaction answers for a refusal settled after it",
        "runkernel/adapters/stores/postgres/echo.py",
        "        self._inbox = self._lease = self._compacted = None\n",
        "        self._inbox = self._lease = None\n",
        unit("tests/stores/test_commit_echo.py::test_a_refusal_settled_after_the_end_is_still_compacted"),
    ),
    Mutant(
        "PostgreSQL: the pick-up read with a lease take answers more than the operation after it",
        "runkernel/adapters/drive/lease_keeper.py",
        "        picked, self._picked = self._picked, None\n",
        "        picked = self._picked\n",
        unit("tests/stores/test_folded_reads.py::test_a_pick_up_read_with_a_take_answers_only_the_store_operation_after_it"),
    ),
    Mutant(
        "PostgreSQL: a commit's figure for its lease starts an executor while it is under the margin (W1)",
        "runkernel/adapters/drive/lease_keeper.py",
        "        if left is not None and left >= self.margin:\n",
        "        if left is not None and left > 0:\n",
        unit(
            "tests/drive/test_lease_margin_end_to_end.py::"
            "test_a_runtime_starts_no_tool_while_its_lease_has_less_left_than_the_margin[postgres]"
        ),
    ),
    Mutant(
        "the lease check before an executor asks the store for no safety margin (W1)",
        "runkernel/adapters/drive/lease_keeper.py",
        "            return self.store.check_lease(lease, self.margin)\n",
        "            return self.store.check_lease(lease, 0.0)\n",
        unit(
            "tests/drive/test_lease_margin_end_to_end.py::"
            "test_a_push_driver_hands_out_no_run_call_while_its_lease_has_less_left_than_the_margin[sync-sqlite]"
        ),
    ),
    Mutant(
        "the pull runtime takes an Executing commit the store failed for landed and starts the tool (I5)",
        "runkernel/adapters/drive/runtime_drive.py",
        "            following = self._send(self.ports.perform(op))\n"
        "            if isinstance(op, _EFFECTS):\n",
        "            from runkernel.adapters.stores.contract import StoreUnavailable\n"
        "            from runkernel.kernel.validate import successor\n"
        "            try:\n"
        "                answer = self.ports.perform(op)\n"
        "            except StoreUnavailable:\n"
        "                if not isinstance(op, Append):\n"
        "                    raise\n"
        "                answer = successor(op.prev, op.commit)  # taken to have landed: carry on\n"
        "            following = self._send(answer)\n"
        "            if isinstance(op, _EFFECTS):\n",
        unit(
            "tests/drive/test_unavailable_executing_commit.py::"
            "test_a_runtime_whose_executing_commit_is_lost_to_an_unavailable_store_never_runs_the_tool[sqlite-unleased]"
        ),
    ),
    Mutant(
        "PostgreSQL: history answers kept before a pick-up answer for the commit after it",
        "runkernel/adapters/stores/postgres/store.py",
        "            self._judge_against((run_id, self._head(thread_id, version, active), snapshot))\n",
        "            self._written = (run_id, self._head(thread_id, version, active), snapshot)\n",
        unit(
            "tests/stores/test_history_memo_pick_up.py::"
            "test_a_history_answer_kept_before_another_writer_moved_the_thread_is_not_used_after_a_pick_up[read_pick_up]"
        ),
    ),
    Mutant(
        "a recovered wait's notification drops the request committed with it",
        "runkernel/kernel/recover.py",
        "        return Decision(state, (NotifyWait(state.state.ticket, waiting.status.wait),))\n",
        "        return Decision(state, (NotifyWait(state.state.ticket, attrs.evolve(waiting.status.wait, request=None)),))\n",
        unit(
            "tests/drive/test_recovered_wait_request.py::"
            "test_a_runtime_that_recovers_a_wait_notifies_its_host_of_the_committed_request[sqlite]"
        ),
    ),
    Mutant(
        "a fork carrying an Executing non-replay call",
        "runkernel/kernel/fork.py",
        "            calls.append(call.with_status(CallIndeterminate(status.attempt, IndeterminateReason.OUTCOME_UNKNOWN)))\n",
        "            calls.append(call)\n",
        unit("tests/kernel/test_fork_properties.py::test_a_fork_at_every_version_is_legal_or_refused_by_the_rule"),
    ),
    Mutant(
        "a worker driving an incompatible version",
        "runkernel/adapters/stores/sql/queries.py",
        '    "(CAST(? AS text) IS NULL OR r.app_version IS NULL OR r.app_version = CAST(? AS text) OR EXISTS ("\n',
        '    "(CAST(? AS text) IS NULL OR r.app_version IS NOT NULL OR r.app_version = CAST(? AS text) OR EXISTS ("\n',
        unit("tests/worker/test_rolling_deploy.py::test_old_and_new_workers_each_drive_only_what_they_may"),
    ),
    Mutant(
        "upgrade-check passes an open call whose tool the new app lacks",
        "runkernel/adapters/worker/upgrade.py",
        "        elif declared is None:\n",
        "        elif declared is None and not open_calls:\n",
        unit("tests/worker/test_upgrade_decision.py::test_an_open_call_whose_tool_is_gone_blocks_naming_the_call_and_the_tool"),
    ),
    Mutant(
        "upgrade-check --accept records a version while a Run is blocked",
        "runkernel/adapters/worker/upgrade.py",
        "    if blocked:\n",
        "    if blocked and not report.checked_versions:\n",
        unit("tests/cli/test_upgrade_check.py::test_accept_is_refused_when_a_run_is_blocked_and_nothing_is_written"),
    ),
)


def copy_tree(destination: Path) -> Path:
    target = destination / "repo"
    ignore = shutil.ignore_patterns(
        ".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".hypothesis", "*.egg-info", "*.sqlite*", ".tox"
    )
    shutil.copytree(ROOT, target, ignore=ignore)
    return target


def run(detector: Detector, tree: Path, timeout: float) -> tuple[str, float]:
    """'passed', 'failed' (exit 1 with the detector's marker), 'broken' (any other
    failure: a crash of the detector is not a catch) or 'timeout', and the seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["HYPOTHESIS_PROFILE"] = "mutant"
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, *detector.argv],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started
    seconds = time.monotonic() - started
    if result.returncode == 0:
        return "passed", seconds
    if result.returncode == 1 and detector.catch_marker in result.stdout:
        return "failed", seconds
    tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
    print(f"    {detector.name} exited {result.returncode}: {' | '.join(tail)}")
    return "broken", seconds


def imports_from(tree: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", "import runkernel, sys; sys.stdout.write(runkernel.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return Path(out).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only the mutant whose name contains this text")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help=f"hang guard in seconds per detector run (default {TIMEOUT:.0f})")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only is None or args.only in m.name]
    if not chosen:
        print(f"mutants: no mutant matches {args.only!r}", file=sys.stderr)
        return 2
    failures = 0
    with tempfile.TemporaryDirectory(prefix="runkernel-mutants-") as scratch:
        clean = copy_tree(Path(scratch) / "clean")
        where = imports_from(clean)
        if not where.is_relative_to(clean.resolve()):
            print(f"mutants: the copy imports runkernel from {where}, not the copy", file=sys.stderr)
            return 2
        print("baseline: every detector passes on the unmutated code")
        for detector in dict.fromkeys(m.detector for m in chosen):
            if not detector.baseline_runs_here:
                print(f"  {detector.name:<58} (checked by its own CI step)")
                continue
            outcome, seconds = run(detector, clean, max(args.timeout, 120.0))
            print(f"  {detector.name:<58} {outcome:<8} {seconds:6.1f}s")
            failures += outcome != "passed"
        if failures:
            print("mutants: a detector fails on clean code; its catches would mean nothing", file=sys.stderr)
            return 1
        print("\nmutants: each planted bug must be caught by its named detector")
        for index, mutant in enumerate(chosen):
            tree = copy_tree(Path(scratch) / f"m{index}")
            source = tree / mutant.path
            text = source.read_text(encoding="utf-8")
            if text.count(mutant.old) != 1:
                print(f"  {mutant.name}: the text to mutate occurs {text.count(mutant.old)} times in {mutant.path}")
                failures += 1
                continue
            source.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
            outcome, seconds = run(mutant.detector, tree, args.timeout)
            caught = outcome == "failed"
            failures += not caught
            verdict = "caught" if caught else f"SURVIVED ({outcome})"
            print(f"  {mutant.name:<50} {mutant.detector.name:<40} {verdict:<18} {seconds:6.1f}s")
            shutil.rmtree(tree, ignore_errors=True)
    caught_count = len(chosen) - failures
    print(f"\n{caught_count} of {len(chosen)} mutants caught")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

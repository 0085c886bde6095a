//! The conformance suite of the store contract: written once, run against every backend (SQLite and
//! PostgreSQL), as River's `riverdrivertest` is for its drivers.
//!
//! Layout:
//! - [`Fixture`]: what a backend provides, one fresh, isolated database per test case.
//! - [`support`]: the [`support::Harness`] every case drives (a store and its manual clock) and
//!   small helpers (workflow definitions, snapshots of everything a store holds).
//! - [`cases`]: one module per store operation; each case is an `async fn(fixture)` that panics
//!   when the behaviour it names is broken.
//! - [`conformance_suite!`]: expands to one `#[tokio::test]` per case, so that each case is a test
//!   of its own for `cargo nextest` (run in its own process, reported by name).
//!
//! A backend's test file is one line plus its fixture:
//!
//! ```ignore
//! shiftboss_store_conformance::conformance_suite!(SqliteFixture::new());
//! ```
//!
//! The expression is evaluated once per test, inside the async test body, so it may `.await`
//! (a PostgreSQL fixture creates its schema asynchronously).
//!
//! Time: every case runs on a [`shiftboss_store::ManualClock`] and moves it by hand; nothing
//! sleeps. A change to the store contract comes with a change to this suite.

pub mod cases;
pub mod support;

use shiftboss_store::{Clock, Store};
use std::future::Future;

/// One test's database. It owns whatever makes the database private to the test (a temp dir, a
/// schema) and drops it at the end.
///
/// `open` may be called more than once: each call gives a second, independent handle
/// (connection, pool) onto the SAME database, the way two scheduler processes share one store.
pub trait Fixture: Send + Sync + 'static {
    type Store: Store;

    /// A new handle onto this fixture's database whose lease decisions use `clock`.
    /// Panics if the database cannot be opened: the test cannot go on.
    fn open(&self, clock: Clock) -> impl Future<Output = Self::Store> + Send;
}

/// Expands to one `#[tokio::test]` per conformance case, grouped in modules named like the case
/// modules (`submit::same_key_twice_returns_the_same_task`, ...). `$fixture` is an expression that
/// makes a fresh [`Fixture`]; it is evaluated in each test, in an async context, in the caller's
/// scope (so it may name items of the calling file and `.await`).
///
/// The calling crate needs `tokio` with the `macros` and `rt-multi-thread` features.
#[macro_export]
macro_rules! conformance_suite {
    ($fixture:expr) => {
        $crate::conformance_suite!(@modules $fixture;
            submit {
                writes_task_first_step_and_received_event,
                same_key_twice_returns_the_same_task_and_adds_nothing,
                bad_input_changes_nothing,
            }
            submit_batch {
                a_batch_writes_each_task_as_a_submission_does_in_order,
                a_conflicting_key_rejects_the_whole_batch,
                an_invalid_task_is_named_by_its_index_and_nothing_is_written,
                a_batch_of_control_steps_runs_to_the_end,
            }
            handoff {
                claims_after_the_submissions_take_their_steps_as_a_claim_does,
                a_refused_batch_claims_nothing,
            }
            register {
                same_definition_twice_is_unchanged,
                same_version_with_other_content_conflicts,
                invalid_definition_is_invalid_input,
                get_workflow_returns_the_latest_or_the_named_version,
            }
            claim {
                claims_highest_priority_first_then_oldest_due,
                does_not_claim_before_due_at,
                respects_limit_and_agents,
                sets_the_lease_and_carries_what_the_agent_needs,
                reclaim_grows_the_token_and_keeps_the_idempotency_key,
            }
            concurrency {
                two_handles_never_claim_the_same_step,
                reads_see_one_snapshot_while_another_handle_writes,
            }
            replies {
                completed_replies_run_a_workflow_to_completion,
                permanent_error_fails_the_step_and_the_task_with_alerts,
                a_second_reply_on_the_same_lease_is_rejected,
                reply_to_an_unknown_step_is_rejected,
                a_mixed_batch_is_recorded_as_each_reply_alone,
                a_batch_whose_decides_fork_start_a_child_and_compensate,
                an_identical_repeat_of_an_applied_reply_is_acknowledged,
                a_postponed_step_is_claimed_again_after_its_delay_with_no_failure_counted,
            }
            fencing {
                late_reply_with_the_old_token_is_rejected,
                reply_after_expiry_before_reclaim_is_rejected,
            }
            expire {
                requires_a_live_leader_term,
                follows_the_interval_list_then_gives_up,
                counts_each_expiry_once,
                leaves_unexpired_steps_alone_and_respects_limit,
                uses_the_deployment_policy_per_agent,
            }
            release {
                returns_only_that_instances_steps_at_once,
                gives_up_at_the_threshold,
            }
            leader {
                first_caller_gets_term_one_and_renewal_keeps_it,
                another_holder_takes_over_after_the_ttl,
                resign_hands_over_at_once_and_the_old_term_is_refused,
            }
            resubmit {
                only_a_step_in_error_can_be_resubmitted,
                resubmitted_step_runs_and_the_task_completes,
            }
            cancel {
                cancels_live_steps_and_fences_the_holder,
                completed_or_unknown_tasks_cannot_be_cancelled,
            }
            query {
                get_task_and_find_by_key,
                list_tasks_filters_and_pages_newest_first,
                summarize_counts,
            }
            control {
                switch_fork_and_loop_run_to_completion,
                a_failed_branch_cancels_its_siblings_and_fences_their_holders,
                a_sub_workflow_runs_a_child_whose_output_flows_back,
                a_failed_child_fails_its_parent_and_a_cancelled_parent_cancels_its_child,
                a_wait_ends_by_signal_or_by_time,
                terminate_ends_the_task_with_its_output,
                a_reply_to_a_control_step_is_rejected,
            }
            vocabulary {
                a_start_workflow_step_starts_a_task_of_its_own_and_goes_on,
                a_failure_workflow_starts_in_the_failing_transaction,
                a_delayed_step_is_due_after_its_delay_and_a_chosen_agent_claims_it,
                an_optional_step_fails_and_the_task_goes_on_with_its_variables,
                a_fork_each_runs_a_pass_per_item_and_joins_them,
            }
            compensation {
                a_failed_task_is_compensated_newest_first,
                a_compensation_that_fails_for_good_fails_the_task_with_an_alert,
                cancelling_under_a_compensating_policy_undoes_completed_steps,
                an_operator_compensates_a_failed_task_that_was_not_undone,
            }
            operator {
                pause_holds_new_work_and_resume_releases_it,
                terminate_ends_at_once_and_fences_the_holder,
                retry_reruns_the_failed_step_and_the_task_completes,
                rerun_from_a_step_runs_it_and_what_followed_again,
                step_keys_are_made_from_the_work_and_a_rerun_makes_new_ones,
                skip_counts_a_step_as_done_and_fences_its_holder,
                bad_commands_are_invalid_input_or_not_found,
                cancel_and_resubmit_validate_actor_and_reason,
                pause_holds_retries_that_fall_due_while_paused,
                error_text_is_stored_without_nul,
            }
            policies {
                a_domain_step_goes_only_to_its_domain_until_the_fallback,
                concurrency_and_rate_limits_hold_across_claims,
                heartbeats_extend_the_response_timeout_up_to_the_step_timeout,
                a_silent_agent_is_expired_at_its_response_timeout,
                on_timeout_fail_task_and_alert_only,
                an_unclaimed_attempt_times_out_by_its_policy,
                the_total_timeout_bounds_every_attempt_and_retry,
                a_tasks_domains_place_its_steps_and_its_childrens,
            }
            reconcile {
                requires_a_live_leader_term,
                a_task_past_its_timeout_fails_and_compensates,
                a_compensating_task_is_not_timed_out,
                leaves_live_and_finished_tasks_alone,
                racing_replies_and_reconciler_never_schedule_a_step_twice,
            }
            buckets {
                tasks_and_steps_carry_the_bucket_of_their_key,
                claims_take_only_the_buckets_asked_for,
                heartbeats_list_the_live_schedulers,
            }
            jobs {
                enqueue_writes_a_one_step_task_due_at_its_time_in_its_bucket,
                a_failed_attempt_follows_the_interval_list_to_the_letter_then_gives_up,
                a_unique_key_gives_back_the_same_job_live_or_archived,
                bad_jobs_are_refused_and_change_nothing,
                claims_filter_jobs_by_handler_and_bucket,
                list_jobs_searches_by_handler_state_time_and_reason,
                bulk_resubmit_counts_first_then_sends_given_up_jobs_back,
            }
            next {
                a_short_claim_reports_when_its_next_step_falls_due,
                a_short_claim_reports_the_fallback_of_another_domains_step,
                a_sweep_reports_the_next_complete_by_and_due_time,
                a_reconcile_pass_reports_the_next_wait_or_deadline,
            }
            archive {
                requires_a_live_leader_term,
                the_archiver_leaves_live_work_and_recent_finishes_alone,
                a_parent_moves_with_its_children_and_history_is_purged_after_keep,
                an_operator_archives_one_finished_task_at_once,
            }
            paging {
                list_tasks_by_key_prefix_and_time_ranges,
                list_tasks_includes_history_on_request,
                task_events_come_a_page_at_a_time_live_or_archived,
                list_tasks_by_correlation_id_and_children_inherit_it,
            }
            bulk {
                a_dry_run_counts_and_the_action_cancels_each_task_reporting_refusals,
                resubmit_and_retry_run_steps_in_error_again,
                the_limit_caps_the_tasks_and_failures_are_listed_up_to_a_bound,
            }
            queues {
                each_agent_types_queue_is_counted,
            }
            tokens {
                create_find_list_and_revoke,
                a_live_name_is_taken_and_a_revoked_one_is_free,
                bad_tokens_are_invalid_input_and_change_nothing,
            }
            webhooks {
                a_task_subscription_gets_every_message_in_order_with_its_content,
                standing_subscriptions_filter_by_workflow_and_kind,
                claims_are_leased_and_fenced_and_outcomes_apply_once,
                a_claim_from_a_floor_passes_over_what_is_due_before_it,
                failures_retry_die_and_are_redelivered_and_receivers_are_heard,
                a_task_channel_rests_with_its_archived_task_and_goes_with_its_purge,
                the_backlog_counts_up_to_a_cap_and_names_the_earliest_due,
                a_restored_job_wakes_its_resting_channel,
                a_restored_task_sends_no_message_again_for_its_old_events,
            }
            stream {
                every_event_once_in_id_order_with_filters,
                new_events_follow_and_archived_ones_stay_readable,
            }
            cursors {
                a_cursor_is_kept_and_only_moves_forward,
            }
            rates {
                events_are_counted_by_kind_between_reads,
            }
            stalled {
                running_tasks_without_progress_oldest_first_not_those_that_wait,
            }
            worker_notes {
                a_heartbeats_progress_is_kept_and_handed_to_the_next_attempt,
                log_lines_are_step_events_in_order,
                documents_are_kept_by_kind_and_name,
            }
            workers {
                workers_are_recorded_per_agent_type_and_forgotten_when_unseen,
            }
        );
    };
    (@modules $fixture:expr; $( $module:ident { $( $case:ident ),* $(,)? } )*) => {
        $(
            mod $module {
                // The fixture expression names items of the calling file.
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $case() {
                        $crate::cases::$module::$case($fixture).await;
                    }
                )*
            }
        )*
    };
}

#!/usr/bin/env python3
"""Conductor's Python SDK (conductor-python, from PyPI) against shiftboss's Conductor API.

Run by crates/shiftboss/tests/conductor_sdk.rs against a real `shiftboss serve` that declares the
agent types `greet`, `shout` and `slow` remote. The SDK is used as a team on Conductor uses it,
unchanged: a key and secret traded at POST /api/token, the metadata client registering task and
workflow definitions, the workflow client starting (and starting and waiting), reading,
searching, terminating and removing workflows, the bulk client pausing and terminating several,
the worker runner (TaskHandler) completing tasks (one worker handing each task back once with
TaskInProgress, to be polled again after its callback), and the task client for a lease extension with
progress and log lines, the task's log, and a stale update, which must be refused and change
nothing.

Environment: CONDUCTOR_SERVER_URL (the serve's base URL + /api), SHIFTBOSS_KEY_ID and
SHIFTBOSS_KEY_SECRET (an API token's name and secret). Exits 0 when every check held; prints
the first that did not and exits 1.
"""

import os
import sys
import time

from conductor.client.automator.task_handler import TaskHandler
from conductor.client.http.api.workflow_bulk_resource_api import WorkflowBulkResourceApi
from conductor.client.configuration.configuration import Configuration
from conductor.client.configuration.settings.authentication_settings import AuthenticationSettings
from conductor.client.context.task_context import TaskInProgress, get_task_context
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.task_result import TaskResult
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.http.models.workflow_task import WorkflowTask
from conductor.client.http.rest import ApiException
from conductor.client.orkes_clients import OrkesClients
from conductor.client.worker.worker import Worker

GREETING = "sdk_greeting"
SLOW = "sdk_slow"
DEADLINE = 60.0


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def greet(name: str) -> dict:
    return {"greeting": f"hello {name}"}


def shout(text: str):
    # Each task's first poll hands it back for a second (TaskInProgress: an IN_PROGRESS update with
    # callbackAfterSeconds), as a worker whose job is still running at a service does: the server
    # hands it out again after that, with no failure counted.
    ctx = get_task_context()
    if ctx.get_poll_count() < 2:
        return TaskInProgress(callback_after_seconds=1, output={"stage": "queued"})
    # Polled again, the task carries the outputData its first poll kept.
    return {"message": text.upper() + "!", "seen": ctx.task.output_data}


def wait_for(what, probe, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        v = probe()
        if v:
            return v
        time.sleep(0.05)
    check(False, f"{what} within {deadline}s")


def register(metadata):
    metadata.register_task_def(TaskDef(name="greet", retry_count=2, timeout_seconds=60,
                                       response_timeout_seconds=30))
    metadata.register_task_def(TaskDef(name="shout", retry_count=2, timeout_seconds=60,
                                       response_timeout_seconds=30))
    # A short response window, retried at once: a claim that goes unanswered lapses in a second
    # and the task is handed out again.
    metadata.register_task_def(TaskDef(name="slow", retry_count=5, timeout_seconds=60, timeout_policy="RETRY",
                                       response_timeout_seconds=1, retry_logic="FIXED",
                                       retry_delay_seconds=0))
    check(metadata.get_task_def("slow").response_timeout_seconds == 1, "the task definition reads back")

    greeting = WorkflowDef(name=GREETING, version=1, description="greet, then shout", tasks=[
        WorkflowTask(name="greet", task_reference_name="greet_ref", type="SIMPLE",
                     input_parameters={"name": "${workflow.input.name}"}),
        WorkflowTask(name="shout", task_reference_name="shout_ref", type="SIMPLE",
                     input_parameters={"text": "${greet_ref.output.greeting}"}),
    ], output_parameters={"message": "${shout_ref.output.message}"}, timeout_seconds=0)
    metadata.register_workflow_def(greeting, overwrite=True)
    slow = WorkflowDef(name=SLOW, version=1, tasks=[
        WorkflowTask(name="slow", task_reference_name="slow_ref", type="SIMPLE",
                     input_parameters={"n": "${workflow.input.n}"}),
    ], timeout_seconds=0)
    metadata.register_workflow_def(slow, overwrite=True)
    got = metadata.get_workflow_def(GREETING, version=1)
    check(got.name == GREETING and [t.task_reference_name for t in got.tasks] == ["greet_ref", "shout_ref"],
          "the workflow definition reads back")
    names = {w.name for w in metadata.get_all_workflow_defs()}
    check({GREETING, SLOW} <= names, "both workflow definitions are listed")


def stale_update_refused(workflows, tasks):
    """A claim that lapsed and was taken again: the old taskId's update is refused (409) and the
    workflow ends with the new claim's output."""
    wf = workflows.start_workflow(StartWorkflowRequest(name=SLOW, version=1, input={"n": 1}))
    first = wait_for("the slow task polled", lambda: tasks.batch_poll_tasks("slow", "stale-1", 1, 200))[0]
    check(first.workflow_instance_id == wf and first.status == "IN_PROGRESS", "a polled task names its workflow")
    # Answer nothing: the lease lapses after a second, the supervisor takes the step back, and the
    # next poll gets it under a new claim.
    second = wait_for("the slow task polled again after its lease lapsed",
                      lambda: tasks.batch_poll_tasks("slow", "stale-2", 1, 500), deadline=30)[0]
    check(second.task_id != first.task_id and second.poll_count == first.poll_count + 1,
          "the retried claim has a new taskId and one more poll")
    late = TaskResult(task_id=first.task_id, workflow_instance_id=wf, worker_id="stale-1",
                      status="COMPLETED", output_data={"who": "late"})
    try:
        tasks.update_task(late)
        check(False, "the stale update is refused")
    except ApiException as e:
        check(e.status == 409, f"the stale update is refused with 409 (got {e.status})")
    # A lease extension that says how far it got, with a log line: the workflow lists the task's
    # outputData as that progress while it runs.
    beat = TaskResult(task_id=second.task_id, workflow_instance_id=wf, worker_id="stale-2", status="IN_PROGRESS",
                      extend_lease=True, output_data={"done": 1, "of": 2})
    beat.log("halfway through")
    tasks.update_task(beat)
    running = workflows.get_workflow(wf, include_tasks=True).tasks[0]
    check(running.status == "IN_PROGRESS" and running.output_data == {"done": 1, "of": 2},
          f"the task's progress reads back while it runs: {running.output_data}")
    tasks.add_task_log(second.task_id, "a line on its own")
    now = TaskResult(task_id=second.task_id, workflow_instance_id=wf, worker_id="stale-2",
                     status="COMPLETED", output_data={"who": "current"})
    now.log("finished")
    check(tasks.update_task(now) == second.task_id, "the current claim's update is accepted")
    lines = [l.log for l in tasks.get_task_logs(second.task_id)]
    check(lines == ["halfway through", "a line on its own", "finished"], f"the task's log lines, in order: {lines}")
    done = wait_for("the slow workflow completes",
                    lambda: (w := workflows.get_workflow(wf, include_tasks=True)).status == "COMPLETED" and w)
    check(done.output == {"who": "current"}, f"the workflow's output is the current claim's: {done.output}")
    # Removed to history at once (still read back), then gone from the live tables.
    workflows.delete_workflow(wf, archive_workflow=True)
    check(workflows.get_workflow(wf, include_tasks=False).status == "COMPLETED", "a removed workflow still reads")
    try:
        workflows.delete_workflow(wf)
        check(False, "removing it again finds nothing live")
    except ApiException as e:
        check(e.status == 404, f"removing it again is 404 (got {e.status})")
    # Heartbeat for a claim that ended: refused too.
    try:
        tasks.update_task(TaskResult(task_id=second.task_id, workflow_instance_id=wf, status="IN_PROGRESS",
                                     extend_lease=True))
        check(False, "a heartbeat for an ended claim is refused")
    except ApiException as e:
        check(e.status == 409, "a heartbeat for an ended claim is refused with 409")


def main():
    url = os.environ["CONDUCTOR_SERVER_URL"]
    auth = AuthenticationSettings(key_id=os.environ["SHIFTBOSS_KEY_ID"],
                                  key_secret=os.environ["SHIFTBOSS_KEY_SECRET"])
    config = Configuration(server_api_url=url, authentication_settings=auth)
    clients = OrkesClients(configuration=config)
    metadata = clients.get_metadata_client()
    workflows = clients.get_workflow_client()
    tasks = clients.get_task_client()

    register(metadata)
    stale_update_refused(workflows, tasks)

    # Started before any worker runs: they wait as SCHEDULED.
    ids = {}
    for i in range(5):
        req = StartWorkflowRequest(name=GREETING, version=1, input={"name": f"n{i}"},
                                   correlation_id=f"corr-{i}", idempotency_key=f"sdk-greet-{i}", priority=i)
        ids[workflows.start_workflow(req)] = f"n{i}"
    again = workflows.start_workflow(StartWorkflowRequest(name=GREETING, version=1, input={"name": "n0"},
                                                          idempotency_key="sdk-greet-0",
                                                          idempotency_strategy="RETURN_EXISTING"))
    check(again in ids and ids[again] == "n0", "starting again with the same idempotency key gives the same id")
    try:
        workflows.start_workflow(StartWorkflowRequest(name=GREETING, version=1, input={"name": "n0"},
                                                      idempotency_key="sdk-greet-0", idempotency_strategy="FAIL"))
        check(False, "starting again with idempotencyStrategy FAIL is refused")
    except ApiException as e:
        check(e.status == 409, "starting again with idempotencyStrategy FAIL is refused with 409")
    first = workflows.get_workflow(again, include_tasks=True)
    check(first.status == "RUNNING" and first.tasks[0].status == "SCHEDULED"
          and first.tasks[0].reference_task_name == "greet_ref", "a started workflow is RUNNING with its first task SCHEDULED")

    handler = TaskHandler(workers=[Worker("greet", greet, poll_interval=50), Worker("shout", shout, poll_interval=50)],
                          configuration=config, scan_for_annotated_workers=False, monitor_processes=False)
    handler.start_processes()
    try:
        for wf, name in ids.items():
            done = wait_for(f"workflow {wf} completes",
                            lambda: (w := workflows.get_workflow(wf, include_tasks=True)).status == "COMPLETED" and w)
            check(done.output == {"message": f"HELLO {name}!".upper()}, f"workflow {wf}'s output: {done.output}")
            check([t.status for t in done.tasks] == ["COMPLETED", "COMPLETED"], f"workflow {wf}'s tasks completed")
            shouted = done.tasks[1]
            check(shouted.output_data.get("seen") == {"stage": "queued"},
                  f"workflow {wf}'s shout, polled again, carried the outputData its first poll kept: {shouted.output_data}")
            check(shouted.poll_count == 2 and shouted.retry_count == 0,
                  f"workflow {wf}'s shout was polled again after its callback, no retry counted: "
                  f"pollCount {shouted.poll_count}, retryCount {shouted.retry_count}")
        # Start and wait: the answer is the workflow once it has completed.
        run = workflows.execute_workflow(StartWorkflowRequest(name=GREETING, version=1, input={"name": "ex"}),
                                         request_id="req-1", wait_for_seconds=20)
        check(run.status == "COMPLETED" and run.output == {"message": "HELLO EX!"} and run.request_id == "req-1",
              f"execute_workflow answers the completed run: {run.status} {run.output}")
    finally:
        handler.stop_processes()

    found = workflows.search(start=0, size=100, query=f"workflowType = {GREETING} AND status = COMPLETED")
    # This SDK reads a search's `results` (its model has no totalHits; the server sends it too).
    hits = {r.workflow_id: r for r in found.results}
    check(set(hits) >= set(ids) and all(r.status == "COMPLETED" and r.workflow_type == GREETING for r in hits.values()),
          f"search finds the completed workflows ({len(hits)} results)")

    # Found again by their correlation ids, with Conductor's lookups.
    by_corr = workflows.get_by_correlation_ids(GREETING, ["corr-1", "corr-2", "corr-none"], include_completed=True)
    check(len(by_corr["corr-1"]) == 1 and by_corr["corr-1"][0].correlation_id == "corr-1"
          and len(by_corr["corr-2"]) == 1 and by_corr["corr-none"] == [],
          f"workflows found by correlation id: { {k: len(v) for k, v in by_corr.items()} }")
    running_only = workflows.get_by_correlation_ids(GREETING, ["corr-1"])
    check(running_only["corr-1"] == [], "without includeClosed, a completed workflow is not listed")

    # Terminate one that no worker serves now.
    wf = workflows.start_workflow(StartWorkflowRequest(name=SLOW, version=1, input={"n": 2}))
    workflows.pause_workflow(wf)
    check(workflows.get_workflow(wf, include_tasks=False).status == "PAUSED", "a paused workflow reads PAUSED")
    workflows.resume_workflow(wf)
    workflows.terminate_workflow(wf, reason="sdk check")
    check(workflows.get_workflow(wf, include_tasks=True).status == "TERMINATED", "a terminated workflow reads TERMINATED")

    # The bulk forms: two pause, an unknown id is reported, not fatal; then both terminate.
    bulk = WorkflowBulkResourceApi(clients.get_workflow_client().api_client)
    pair = [workflows.start_workflow(StartWorkflowRequest(name=SLOW, version=1, input={"n": n})) for n in (3, 4)]
    paused = bulk.pause_workflow(pair + ["999999999"])
    check(sorted(paused.bulk_successful_results) == sorted(pair) and "999999999" in paused.bulk_error_results,
          f"bulk pause: {paused.bulk_successful_results} {paused.bulk_error_results}")
    check(all(workflows.get_workflow(w, include_tasks=False).status == "PAUSED" for w in pair), "both read PAUSED")
    ended = bulk.terminate(pair, reason="bulk check")
    check(sorted(ended.bulk_successful_results) == sorted(pair), f"bulk terminate: {ended.bulk_error_results}")
    check(all(workflows.get_workflow(w, include_tasks=False).status == "TERMINATED" for w in pair),
          "both read TERMINATED")
    print("all checks held", flush=True)


if __name__ == "__main__":
    main()

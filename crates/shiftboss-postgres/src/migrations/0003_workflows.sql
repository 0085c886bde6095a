-- Workflows (issue 4): control steps, compensation, child tasks, operator states, step policies.
-- The same columns, indexes and tables as the SQLite store's 0003_workflows.sql. PostgreSQL changes
-- a CHECK in place: the constraints are dropped and added again under the names 0001 gave them.

ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('running', 'paused', 'compensating', 'completed', 'failed', 'cancelled', 'compensated',
                     'terminated'));
-- A sub-workflow's child task points at its parent and the parent's step that waits for it. A
-- parent is always created before its children, so its id is lower: locking tasks in ascending
-- id order locks a parent before its child.
ALTER TABLE tasks ADD COLUMN parent_task_id BIGINT REFERENCES tasks (id);
ALTER TABLE tasks ADD COLUMN parent_step TEXT;
ALTER TABLE tasks ADD COLUMN depth INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0);
-- The workflow's timeout, as a time: past it, the reconciler fails the task.
ALTER TABLE tasks ADD COLUMN deadline_at BIGINT;
CREATE INDEX tasks_by_parent ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;
CREATE INDEX tasks_deadline ON tasks (deadline_at)
    WHERE deadline_at IS NOT NULL AND state IN ('running', 'paused', 'compensating');
-- The reconciler looks for live tasks that have not changed for a while, oldest first.
CREATE INDEX tasks_stale ON tasks (updated_at) WHERE state IN ('running', 'compensating');

-- What a step row is: an agent call, or a control step (never claimed: it is never pending).
ALTER TABLE steps ADD COLUMN kind TEXT NOT NULL DEFAULT 'agent'
    CHECK (kind IN ('agent', 'switch', 'fork', 'do_while', 'sub_workflow', 'wait', 'terminate'));
-- For a compensation: the instance it undoes.
ALTER TABLE steps ADD COLUMN compensates TEXT;
-- Isolation groups: claimed only by schedulers serving the domain until fallback_at, if set.
ALTER TABLE steps ADD COLUMN domain TEXT;
ALTER TABLE steps ADD COLUMN fallback_at BIGINT;
-- When the current claim began: heartbeats move complete-by on, never past claimed_at + timeout.
ALTER TABLE steps ADD COLUMN claimed_at BIGINT;
ALTER TABLE steps ADD COLUMN response_timeout_ms BIGINT;
ALTER TABLE steps ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'retry'
    CHECK (on_timeout IN ('retry', 'fail_task', 'alert_only'));

-- A lease exists exactly while an agent step is Processing (P13). A control step in Processing (an
-- open fork, a loop, a wait, a running sub-workflow) is held by nobody: it never has a lease.
ALTER TABLE steps DROP CONSTRAINT steps_check;
ALTER TABLE steps ADD CONSTRAINT steps_lease_check
    CHECK (kind <> 'agent' OR ((state = 'processing') = (locked_by IS NOT NULL AND complete_by IS NOT NULL)));
ALTER TABLE steps ADD CONSTRAINT steps_control_unheld_check
    CHECK (kind = 'agent' OR (locked_by IS NULL AND complete_by IS NULL));

-- Timed waits: a processing wait row ends at due_at.
CREATE INDEX steps_waits ON steps (due_at) WHERE kind = 'wait' AND state = 'processing';
-- Concurrency limits per agent count its processing steps.
CREATE INDEX steps_running_agent ON steps (agent) WHERE state = 'processing';

-- Rate limits per agent: claims in the current one-second window, across every instance. A claim of
-- a limited agent locks its row for the rest of its transaction, so that claimers of that agent
-- count its running steps and its window one at a time.
CREATE TABLE agent_rates (
    agent        TEXT    PRIMARY KEY,
    window_start BIGINT  NOT NULL,
    used         BIGINT  NOT NULL CHECK (used >= 0)
);

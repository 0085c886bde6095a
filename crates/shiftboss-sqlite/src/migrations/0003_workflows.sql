-- Workflows (issue 4): control steps, compensation, child tasks, operator states, step policies.
-- SQLite cannot change a CHECK constraint in place: the tasks table is rebuilt (foreign keys are
-- off while migrations run; the steps table's reference to `tasks` then names the new table).
CREATE TABLE tasks_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key         TEXT    NOT NULL UNIQUE,
    workflow         TEXT    NOT NULL,
    workflow_version INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('running', 'paused', 'compensating', 'completed', 'failed',
                                                       'cancelled', 'compensated', 'terminated')),
    priority         INTEGER NOT NULL DEFAULT 0,
    input            TEXT    NOT NULL,
    output           TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    bucket           INTEGER NOT NULL DEFAULT 0,
    -- A sub-workflow's child task points at its parent and the parent's step that waits for it.
    parent_task_id   INTEGER REFERENCES tasks_new (id),
    parent_step      TEXT,
    depth            INTEGER NOT NULL DEFAULT 0,
    -- The workflow's timeout, as a time: past it, the reconciler fails the task.
    deadline_at      INTEGER,
    FOREIGN KEY (workflow, workflow_version) REFERENCES workflows (name, version)
);
INSERT INTO tasks_new (id, task_key, workflow, workflow_version, state, priority, input, output, created_at, updated_at, bucket)
    SELECT id, task_key, workflow, workflow_version, state, priority, input, output, created_at, updated_at, bucket FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX tasks_by_state ON tasks (state, id);
CREATE INDEX tasks_by_parent ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;
CREATE INDEX tasks_deadline ON tasks (deadline_at) WHERE deadline_at IS NOT NULL AND state IN ('running', 'paused', 'compensating');

-- What a step row is: an agent call, or a control step (never claimed: it is never pending).
ALTER TABLE steps ADD COLUMN kind TEXT NOT NULL DEFAULT 'agent';
-- For a compensation: the instance it undoes.
ALTER TABLE steps ADD COLUMN compensates TEXT;
-- Isolation groups: claimed only by schedulers serving the domain until fallback_at, if set.
ALTER TABLE steps ADD COLUMN domain TEXT;
ALTER TABLE steps ADD COLUMN fallback_at INTEGER;
-- When the current claim began: heartbeats move complete-by on, never past claimed_at + timeout.
ALTER TABLE steps ADD COLUMN claimed_at INTEGER;
ALTER TABLE steps ADD COLUMN response_timeout_ms INTEGER;
ALTER TABLE steps ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'retry';
-- Timed waits: a processing wait row ends at due_at.
CREATE INDEX steps_waits ON steps (due_at) WHERE kind = 'wait' AND state = 'processing';
-- Concurrency limits per agent count its processing steps.
CREATE INDEX steps_running_agent ON steps (agent) WHERE state = 'processing';
-- Rate limits per agent: claims in the current one-second window, across every instance.
CREATE TABLE agent_rates (
    agent        TEXT    PRIMARY KEY,
    window_start INTEGER NOT NULL,
    used         INTEGER NOT NULL
);
-- The reconciler looks for live tasks that have not changed for a while, oldest first.
CREATE INDEX tasks_stale ON tasks (updated_at) WHERE state IN ('running', 'compensating');

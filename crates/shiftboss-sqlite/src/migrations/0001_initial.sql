-- The first schema of the shiftboss state store.
CREATE TABLE workflows (
    name        TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    definition  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);

-- AUTOINCREMENT: ids are never reused, so an id seen in a log or an alert always means one task.
CREATE TABLE tasks (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key         TEXT    NOT NULL UNIQUE,
    workflow         TEXT    NOT NULL,
    workflow_version INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    input            TEXT    NOT NULL,
    output           TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    FOREIGN KEY (workflow, workflow_version) REFERENCES workflows (name, version)
);
CREATE INDEX tasks_by_state ON tasks (state, id);

CREATE TABLE steps (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id         INTEGER NOT NULL REFERENCES tasks (id),
    name            TEXT    NOT NULL,
    agent           TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'processing', 'processed', 'error', 'cancelled')),
    locked_by       TEXT,
    complete_by     INTEGER,
    lease_token     INTEGER NOT NULL DEFAULT 0,
    due_at          INTEGER NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    failure_count   INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    input           TEXT    NOT NULL,
    output          TEXT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    timeout_ms      INTEGER NOT NULL,
    config          TEXT    NOT NULL DEFAULT 'null',
    retry           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (task_id, name)
);
-- Partial indexes on live states keep the claim and the sweep fast however much finished work the table holds.
CREATE INDEX steps_due ON steps (priority DESC, due_at, id) WHERE state = 'pending';
CREATE INDEX steps_deadline ON steps (complete_by) WHERE state = 'processing';
CREATE INDEX steps_holder ON steps (locked_by) WHERE state = 'processing';

-- Append-only: every transition, with its time, actor and reason.
CREATE TABLE events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id  INTEGER NOT NULL,
    step_id  INTEGER,
    at       INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    level    TEXT    NOT NULL CHECK (level IN ('info', 'alert')),
    actor    TEXT    NOT NULL,
    detail   TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_task ON events (task_id, id);
CREATE INDEX events_by_kind ON events (kind, step_id);

-- Leader leases: one row per leader-only role; the term grows each time the lease changes hands.
CREATE TABLE leaders (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    term       INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

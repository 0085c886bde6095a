-- The first schema of the shiftboss state store on PostgreSQL: the same tables as the SQLite store's
-- 0001_initial.sql. Runs with search_path set to the store's schema.
--
-- Times are BIGINT milliseconds since the epoch, as in SQLite, so that lease arithmetic is plain
-- integer arithmetic and both stores compare times the same way.
-- JSON columns are TEXT holding serde_json's own serialization: values come back exactly as written
-- (JSONB would refuse "\u0000" in strings and rewrite numbers), and ad hoc queries can still cast
-- them with ::jsonb.

CREATE TABLE workflows (
    name        TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    definition  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    PRIMARY KEY (name, version)
);

-- Identity ids come from a sequence and are never reused, so an id seen in a log or an alert
-- always means one task.
CREATE TABLE tasks (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_key         TEXT    NOT NULL UNIQUE,
    workflow         TEXT    NOT NULL,
    workflow_version INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    input            TEXT    NOT NULL,
    output           TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    FOREIGN KEY (workflow, workflow_version) REFERENCES workflows (name, version)
);
CREATE INDEX tasks_by_state ON tasks (state, id);

CREATE TABLE steps (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id         BIGINT  NOT NULL REFERENCES tasks (id),
    name            TEXT    NOT NULL,
    agent           TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'processing', 'processed', 'error', 'cancelled')),
    locked_by       TEXT,
    complete_by     BIGINT,
    lease_token     BIGINT  NOT NULL DEFAULT 0,
    due_at          BIGINT  NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    failure_count   INTEGER NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      TEXT,
    input           TEXT    NOT NULL,
    output          TEXT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    timeout_ms      BIGINT  NOT NULL,
    config          TEXT    NOT NULL DEFAULT 'null',
    retry           TEXT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    UNIQUE (task_id, name),
    -- A lease exists exactly while the step is Processing (P13).
    CHECK ((state = 'processing') = (locked_by IS NOT NULL AND complete_by IS NOT NULL))
);
-- Partial indexes on live states keep the claim and the sweep fast however much finished work the table holds.
CREATE INDEX steps_due ON steps (priority DESC, due_at, id) WHERE state = 'pending';
CREATE INDEX steps_deadline ON steps (complete_by) WHERE state = 'processing';
CREATE INDEX steps_holder ON steps (locked_by) WHERE state = 'processing';

-- Append-only: every transition, with its time, actor and reason. No foreign key to tasks: a claim
-- writes events without touching the task row, and a key check would take a lock on it.
CREATE TABLE events (
    id       BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  BIGINT  NOT NULL,
    step_id  BIGINT,
    at       BIGINT  NOT NULL,
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
    term       BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL
);

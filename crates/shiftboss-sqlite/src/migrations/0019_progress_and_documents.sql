-- Issue 17: what a worker holding a step last said of its progress (a heartbeat's report, JSON);
-- NULL for none. The next claim clears it.
ALTER TABLE steps ADD COLUMN progress TEXT;
ALTER TABLE steps_history ADD COLUMN progress TEXT;

-- Issue 17: documents the API keeps beside the definitions (Conductor's task definitions, the
-- Conductor document each workflow version was registered from), shared by every serve process
-- of a deployment and kept across restarts (see shiftboss_store::documents).
CREATE TABLE documents (
    kind       TEXT NOT NULL,
    name       TEXT NOT NULL,
    body       TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;

-- A step's log lines are read by its id (Conductor's task log route names only the step), also
-- once its task is archived: its row is found by id, then its events by task.
CREATE INDEX steps_history_id ON steps_history (id);

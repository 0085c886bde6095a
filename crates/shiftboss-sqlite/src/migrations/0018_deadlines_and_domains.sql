-- Issue 21: Conductor's pollTimeoutSeconds, totalTimeoutSeconds and taskToDomain. `claim_timeout_ms`: how long a
-- due attempt may wait for a claim; `deadline_at`: when all the step's attempts must have ended.
-- Both are NULL for the steps that have none, which the partial index leaves out. A paused task's
-- steps are due at i64::MAX: `min()` keeps the sum from overflowing.
ALTER TABLE steps ADD COLUMN claim_timeout_ms INTEGER;
ALTER TABLE steps ADD COLUMN deadline_at INTEGER;
ALTER TABLE steps_history ADD COLUMN claim_timeout_ms INTEGER;
ALTER TABLE steps_history ADD COLUMN deadline_at INTEGER;
CREATE INDEX steps_claim_by ON steps (min(due_at, 4611686018427387903) + claim_timeout_ms)
    WHERE state = 'pending' AND claim_timeout_ms IS NOT NULL;
-- A task's isolation domains by agent (Conductor's taskToDomain), as JSON text; NULL for none.
ALTER TABLE tasks ADD COLUMN domains TEXT;
ALTER TABLE tasks_history ADD COLUMN domains TEXT;
-- A task's correlation id (Conductor's correlationId): not unique; live tasks are found by it.
ALTER TABLE tasks ADD COLUMN correlation_id TEXT;
ALTER TABLE tasks_history ADD COLUMN correlation_id TEXT;
CREATE INDEX tasks_correlation ON tasks (correlation_id, id) WHERE correlation_id IS NOT NULL;

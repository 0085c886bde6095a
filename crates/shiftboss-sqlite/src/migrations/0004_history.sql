-- History (issue 5): finished tasks leave the hot tables, with their steps and events, for tables
-- of the same shape, so that the hot tables stay small however long the system runs. Made from
-- the hot tables themselves, so the columns are the same, in the same order: the archiver moves
-- rows with `INSERT INTO x_history SELECT * FROM x` and back. A migration that adds a column to a
-- hot table must add it to its history table too. No foreign keys: history is read, not changed.
CREATE TABLE tasks_history AS SELECT * FROM tasks WHERE 0;
CREATE TABLE steps_history AS SELECT * FROM steps WHERE 0;
CREATE TABLE events_history AS SELECT * FROM events WHERE 0;
CREATE UNIQUE INDEX tasks_history_id ON tasks_history (id);
-- A key stays taken once archived: a repeated submission or unique job key finds it here.
CREATE UNIQUE INDEX tasks_history_key ON tasks_history (task_key);
-- Searches by handler (workflow) and time, and the purge past the retention time.
CREATE INDEX tasks_history_workflow ON tasks_history (workflow, updated_at);
CREATE INDEX tasks_history_updated ON tasks_history (updated_at);
CREATE INDEX steps_history_task ON steps_history (task_id);
CREATE INDEX events_history_task ON events_history (task_id, id);
-- The archiver looks for top-level tasks that ended, oldest first.
CREATE INDEX tasks_finished ON tasks (updated_at)
    WHERE parent_task_id IS NULL AND state IN ('completed', 'failed', 'cancelled', 'compensated', 'terminated');

-- History (issue 5): the same tables and indexes as the SQLite store's 0004_history.sql. LIKE
-- copies the columns (names, types, NOT NULL) in the same order, without keys, defaults or
-- indexes: the archiver moves rows with `INSERT INTO x_history SELECT * FROM x` and back. A
-- migration that adds a column to a hot table must add it to its history table too.
CREATE TABLE tasks_history (LIKE tasks);
CREATE TABLE steps_history (LIKE steps);
CREATE TABLE events_history (LIKE events);
CREATE UNIQUE INDEX tasks_history_id ON tasks_history (id);
-- A key stays taken once archived: a repeated submission or unique job key finds it here.
CREATE UNIQUE INDEX tasks_history_key ON tasks_history (task_key);
CREATE INDEX tasks_history_workflow ON tasks_history (workflow, updated_at);
CREATE INDEX tasks_history_updated ON tasks_history (updated_at);
CREATE INDEX steps_history_task ON steps_history (task_id);
CREATE INDEX events_history_task ON events_history (task_id, id);
-- The archiver looks for top-level tasks that ended, oldest first.
CREATE INDEX tasks_finished ON tasks (updated_at)
    WHERE parent_task_id IS NULL AND state IN ('completed', 'failed', 'cancelled', 'compensated', 'terminated');

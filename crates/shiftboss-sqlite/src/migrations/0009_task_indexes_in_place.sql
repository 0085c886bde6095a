-- Migration 7 rewrote the hot tables' CHECKs and events_lapses so that no condition is a list of
-- three or more constants (SQLite tests such a list through a temporary b-tree built afresh on
-- every run of a statement). Three partial indexes of tasks still held lists, and SQLite tests an
-- index's condition on every write of a row: each task move (one per finished job) built and
-- dropped a temporary b-tree for tasks_finished and another for tasks_deadline, about a sixth of
-- the task UPDATE's time in a drain's profile. The same conditions as equalities joined by OR are
-- tested in place. The queries that read these indexes name the same condition, word for word, so
-- that the planner can prove it (a partial index is used only then).
DROP INDEX tasks_deadline;
CREATE INDEX tasks_deadline ON tasks (deadline_at)
 WHERE deadline_at IS NOT NULL AND (state = 'running' OR state = 'paused' OR state = 'compensating');
DROP INDEX tasks_stale;
CREATE INDEX tasks_stale ON tasks (updated_at) WHERE state = 'running' OR state = 'compensating';
DROP INDEX tasks_finished;
CREATE INDEX tasks_finished ON tasks (updated_at)
 WHERE parent_task_id IS NULL
   AND (state = 'completed' OR state = 'failed' OR state = 'cancelled' OR state = 'compensated' OR state = 'terminated');

-- Issue 26: a task's generation, bumped by an operator action that runs steps again from scratch
-- (a rerun; a retry that starts a sub-workflow's child again). A step's idempotency key is made
-- from the task's key, the step's instance name and this number (`shiftboss_core::idempotency`),
-- so that a step whose row was lost and is written again calls its service with the same key.
-- History keeps the hot table's columns in the same order, so both get it last.
--
-- The schema is parsed again first: a connection that ran migration 7 in the same go still holds
-- the tasks table as parsed before that migration rewrote its text, and ADD COLUMN would insert
-- the new column at an offset of the old text.
PRAGMA writable_schema = RESET;
ALTER TABLE tasks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks_history ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

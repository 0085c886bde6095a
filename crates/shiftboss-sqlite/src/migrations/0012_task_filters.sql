-- Task list filters (issue 16). History is where tasks end up and grow without bound, and its rows
-- are written once (by the archiver) and never changed, so its filters get indexes: by state newest
-- first, and by submission time (its key prefix reads the unique key index, its workflow
-- tasks_history_workflow). The hot tables get none: they hold live and recently finished tasks only,
-- a list reads them newest first by id until its page is full, and every index of `tasks` is
-- written again at each move of a task.
CREATE INDEX tasks_history_state ON tasks_history (state, id);
CREATE INDEX tasks_history_created ON tasks_history (created_at);

-- Task list filters (issue 16): the same indexes as the SQLite store's 0012_task_filters.sql, and
-- one for key prefixes. A prefix is a byte range (`task_key COLLATE "C" >= $lo AND < $hi`), exact
-- whatever the database's collation; an index in that collation serves it. History only: its rows
-- are written once and never changed, where every index of the hot `tasks` is written again each
-- time a task moves (its state is indexed, so no update of it is HOT).
CREATE INDEX tasks_history_state ON tasks_history (state, id);
CREATE INDEX tasks_history_created ON tasks_history (created_at);
CREATE INDEX tasks_history_key_prefix ON tasks_history (task_key COLLATE "C");

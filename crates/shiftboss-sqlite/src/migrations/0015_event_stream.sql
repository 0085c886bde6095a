-- Event streams (issue 18) read the event log after an id, across the hot table and history:
-- history's rows need an index by id for that (the hot table's id is its rowid).
CREATE INDEX events_history_id ON events_history (id);

-- Each claim inserts the step into every index of processing steps. steps_holder (locked_by) and
-- steps_running_agent (agent) become one index on (agent, locked_by): a limited agent's running
-- count reads its leading column; the release of a restarted scheduler's own claims, once at its
-- start, reads the whole index (the processing steps only) for its instance. (The PostgreSQL store
-- also drops the idempotency key's UNIQUE index in its migration 7; here that constraint is part of
-- the table's definition, and removing it would mean rebuilding the table.)
DROP INDEX steps_holder;
DROP INDEX steps_running_agent;
CREATE INDEX steps_processing ON steps (agent, locked_by) WHERE state = 'processing';

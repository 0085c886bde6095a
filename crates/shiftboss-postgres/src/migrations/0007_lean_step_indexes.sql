-- A claim and a reply each change a step's state, an indexed column, so PostgreSQL cannot update
-- the row in place (HOT): it writes the new row version into every index whose condition the row
-- meets, and a unique index first looks up the key's other versions. Under a drain that index work
-- was most of the server's time (perf: _bt_compare, heap_index_delete_tuples), so each step write
-- now touches fewer indexes:
--
-- * The idempotency key loses its UNIQUE index. No query looks a step up by its key; the key is a
--   random (version 4) UUID drawn for each step, unique by its 122 random bits as any such UUID is,
--   and the index was a random-order b-tree written three times per job.
-- * steps_holder (locked_by) and steps_running_agent (agent) become one index on (agent, locked_by)
--   of the processing steps: a limited agent's running count reads its leading column; the release
--   of a restarted scheduler's own claims, once at its start, reads the whole index (the processing
--   steps only) for its instance.
ALTER TABLE steps DROP CONSTRAINT steps_idempotency_key_key;
DROP INDEX steps_holder;
DROP INDEX steps_running_agent;
CREATE INDEX steps_processing ON steps (agent, locked_by) WHERE state = 'processing';

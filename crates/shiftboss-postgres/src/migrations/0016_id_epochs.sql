-- Issue 26: ids that a promoted standby cannot hand out again. Under asynchronous replication a
-- promoted standby lacks the primary's last commits, and its sequences stand where its copy of
-- them stood (at most 32 values past the last one it received): it would give a lost task's id to
-- another task, and a client holding the old id would read, cancel or retry the wrong one.
--
-- Every promotion starts a new WAL timeline, and the timeline is readable without privileges: it
-- is the first eight hex digits of the current WAL file's name. Each timeline is given its own
-- range of ids, from (timeline - 1) * 2^40: the store's sequences are raised to their timeline's
-- floor before a connection of the store draws from them (the store runs this at each new
-- connection, and `submit_task_in`/`enqueue_jobs_in` in the caller's transaction). A cluster that
-- was never promoted is on timeline 1 and its ids start at 1 as before; after a promotion, every
-- new id is above every id of the timeline before it, lost or not (2^40 ids per timeline).
--
-- The raise takes a transaction-level advisory lock per sequence (keys "SBID" and the sequence),
-- only while that sequence is below its floor (once per promotion), so two sessions cannot both
-- set it: `setval` is not transactional, and a second `setval` to the floor would hand out the
-- first session's ids again.
CREATE FUNCTION raise_id_floors(store_schema text) RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    floor bigint;
    seq regclass;
BEGIN
    -- A standby hands out no ids; it is raised by the first connection after its promotion.
    IF pg_is_in_recovery() THEN
        RETURN;
    END IF;
    floor := (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1) << 40;
    IF floor <= 0 THEN
        RETURN;
    END IF;
    FOR seq IN SELECT c.oid FROM pg_class c
                WHERE c.relkind = 'S' AND c.relnamespace = store_schema::regnamespace LOOP
        IF coalesce(pg_sequence_last_value(seq), 0) < floor THEN
            PERFORM pg_advisory_xact_lock(1396853060, seq::oid::int);
            IF coalesce(pg_sequence_last_value(seq), 0) < floor THEN
                PERFORM setval(seq, floor);
            END IF;
        END IF;
    END LOOP;
END
$fn$;
SELECT raise_id_floors(current_schema());

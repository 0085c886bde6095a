-- Event streams (issue 18). A stream must know when no event with a smaller id than those it has
-- read can still commit (ARCHITECTURE.md, "Event streams"): it waits out the transactions that
-- were running when it read the highest id handed out. For that, a transaction must hold its
-- transaction id BEFORE it draws an event id, else it could draw one unseen by the wait. An
-- identity column draws its value before anything else in the row is evaluated, so the id becomes
-- a plain column whose default takes the transaction id first, then the next value.
ALTER TABLE events ALTER COLUMN id DROP IDENTITY;
CREATE SEQUENCE events_id_seq OWNED BY events.id;
SELECT setval('events_id_seq',
              greatest((SELECT max(id) FROM events), (SELECT max(id) FROM events_history), 0) + 1, false);
CREATE FUNCTION next_event_id(seq regclass) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval(seq);
END
$$;
ALTER TABLE events ALTER COLUMN id SET DEFAULT next_event_id('events_id_seq');
-- Streams over every task read history by id too (a reader may resume from an old event).
CREATE INDEX events_history_id ON events_history (id);

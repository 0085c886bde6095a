-- Issue 18: named cursors on the event log, for readers that must go on where they stopped after a
-- restart (the alerter). `position` is an event id: every event up to it was read. It only moves
-- forward (see shiftboss_store::cursors).
CREATE TABLE cursors (
    name       TEXT PRIMARY KEY,
    position   BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- The alerter's place: the end of the log as it stands when this migration runs, so that a store
-- upgraded with a history is not alerted on all of it again; a new store starts at 0, so that
-- nothing written before the alerter first leads is missed.
INSERT INTO cursors (name, position, updated_at)
SELECT 'alerter', GREATEST(coalesce((SELECT max(id) FROM events), 0), coalesce((SELECT max(id) FROM events_history), 0)), 0;

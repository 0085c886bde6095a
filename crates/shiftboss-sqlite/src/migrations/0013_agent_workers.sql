-- Remote workers (issue 17): which worker polled for which agent type, and when last. Written by
-- the API at most every few seconds per worker; rows unseen for a day are deleted as others are
-- written. Not the claims: a remote worker's claims are steps rows like any other.
CREATE TABLE agent_workers (
    agent         TEXT    NOT NULL,
    worker        TEXT    NOT NULL,
    first_seen_at INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    PRIMARY KEY (agent, worker)
) WITHOUT ROWID;

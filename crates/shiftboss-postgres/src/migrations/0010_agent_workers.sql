-- Remote workers (issue 17): the same table as the SQLite store's 0013_agent_workers.sql. Written
-- by the API at most every few seconds per worker; rows unseen for a while are deleted as others
-- are written.
CREATE TABLE agent_workers (
    agent         TEXT   NOT NULL,
    worker        TEXT   NOT NULL,
    first_seen_at BIGINT NOT NULL,
    last_seen_at  BIGINT NOT NULL,
    PRIMARY KEY (agent, worker)
);

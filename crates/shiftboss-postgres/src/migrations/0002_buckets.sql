-- Load-balance buckets (M3) and the live schedulers that share them.
-- Tasks from before this migration land in bucket 0.
ALTER TABLE tasks ADD COLUMN bucket INTEGER NOT NULL DEFAULT 0 CHECK (bucket >= 0);
ALTER TABLE steps ADD COLUMN bucket INTEGER NOT NULL DEFAULT 0 CHECK (bucket >= 0);

CREATE TABLE schedulers (
    instance   TEXT    PRIMARY KEY,
    weight     INTEGER NOT NULL CHECK (weight >= 1),
    seen_at    BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL
);

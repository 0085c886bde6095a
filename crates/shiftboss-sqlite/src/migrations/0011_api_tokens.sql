-- API tokens (issue 16): who may call the HTTP API, and with which scopes. Only the SHA-256 of a
-- token's secret is kept (the secret is shown once, when it is made); a request's token is found
-- by the hash of what it presents. A revoked token keeps its row, for `tokens list` and for the
-- names in old events, and frees its name for a new token: names are unique among live tokens.
CREATE TABLE api_tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    -- A comma-separated list of scope names, as `Scopes` writes it: read,submit,operate,agent,admin.
    scopes      TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

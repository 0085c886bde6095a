-- API tokens (issue 16): the same table as the SQLite store's 0011_api_tokens.sql. Only the SHA-256
-- of a token's secret is kept; a revoked token keeps its row and frees its name (names are unique
-- among live tokens).
CREATE TABLE api_tokens (
    id          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        TEXT    NOT NULL,
    -- A comma-separated list of scope names, as `Scopes` writes it: read,submit,operate,agent,admin.
    scopes      TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL UNIQUE,
    created_at  BIGINT  NOT NULL,
    revoked_at  BIGINT
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

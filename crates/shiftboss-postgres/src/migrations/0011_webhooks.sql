-- Status channels (issue 18): the same tables as the SQLite store's 0014_webhooks.sql (read its
-- comments), and the trigger that writes the outbox in the transaction of each message's event.
CREATE TABLE subscriptions (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url             TEXT    NOT NULL,
    secret          TEXT    NOT NULL,
    task_id         BIGINT,
    workflow        TEXT,
    kinds           TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL CHECK (state IN ('active', 'disabled')),
    disabled_reason TEXT,
    paused_until    BIGINT  NOT NULL DEFAULT 0,
    description     TEXT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL
);
CREATE INDEX subscriptions_task ON subscriptions (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX subscriptions_standing ON subscriptions (id) WHERE task_id IS NULL;

CREATE TABLE deliveries (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_id BIGINT  NOT NULL,
    task_id         BIGINT  NOT NULL,
    seq             BIGINT  NOT NULL,
    event_id        BIGINT  NOT NULL,
    kind            TEXT    NOT NULL,
    at              BIGINT  NOT NULL,
    task_key        TEXT    NOT NULL,
    workflow        TEXT    NOT NULL,
    version         INTEGER NOT NULL,
    task_state      TEXT    NOT NULL,
    step            TEXT,
    output          TEXT,
    error           TEXT,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    due_at          BIGINT  NOT NULL,
    lock_token      BIGINT  NOT NULL DEFAULT 0,
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    BIGINT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE state = 'pending';
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, id);
CREATE INDEX deliveries_task ON deliveries (task_id, id);
CREATE INDEX deliveries_dead ON deliveries (id) WHERE state = 'dead';
CREATE INDEX deliveries_delivered ON deliveries (updated_at) WHERE state = 'delivered';
CREATE TABLE deliveries_history (LIKE deliveries);
CREATE UNIQUE INDEX deliveries_history_id ON deliveries_history (id);
CREATE INDEX deliveries_history_updated ON deliveries_history (updated_at);

-- One call per INSERT statement on events (not per row), over the statement's new rows: a
-- statement with no message event, or a store with no active subscription, costs one lookup.
-- Messages of one task are written under its decide lock, so their ids (and `seq`) follow the
-- order they happened. A transaction that wrote deliveries rings the schema's outbox channel at
-- its commit, for the dispatchers of other processes. `shiftboss.outbox_muted` (set for one
-- transaction by the archiver's restore) keeps events that are moved back from history from being
-- sent again.
CREATE FUNCTION outbox_from_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    written bigint;
BEGIN
    IF current_setting('shiftboss.outbox_muted', true) = 'on'
       OR NOT EXISTS (SELECT 1 FROM subscriptions WHERE state = 'active') THEN
        RETURN NULL;
    END IF;
    WITH m AS (
        SELECT n.id, n.task_id, n.step_id, n.at, n.detail,
               CASE n.kind WHEN 'step.processed' THEN 'step.completed'
                           WHEN 'task.compensation_failed' THEN 'task.failed'
                           ELSE n.kind END AS kind
          FROM new_events n
         WHERE n.kind IN ('task.received', 'step.processed', 'step.error', 'task.paused', 'task.resumed',
                          'task.compensating', 'task.completed', 'task.failed', 'task.compensation_failed',
                          'task.compensated', 'task.cancelled', 'task.terminated')
    ), targets AS (
        SELECT m.*, s.id AS subscription_id
          FROM m JOIN subscriptions s ON s.task_id = m.task_id AND s.state = 'active'
                  AND (s.kinds = '' OR position(',' || m.kind || ',' IN s.kinds) > 0)
        UNION ALL
        SELECT m.*, s.id
          FROM m JOIN tasks t ON t.id = m.task_id
                 JOIN subscriptions s ON s.task_id IS NULL AND s.state = 'active'
                  AND (s.workflow IS NULL OR s.workflow = t.workflow)
                  AND (s.kinds = '' OR position(',' || m.kind || ',' IN s.kinds) > 0)
    ), written AS (
        INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                                task_state, step, output, error, state, due_at, created_at, updated_at)
        SELECT g.subscription_id, g.task_id,
               (SELECT count(*) FROM events e
                 WHERE e.task_id = g.task_id AND e.id <= g.id
                   AND e.kind IN ('task.received', 'step.processed', 'step.error', 'task.paused', 'task.resumed',
                                  'task.compensating', 'task.completed', 'task.failed', 'task.compensation_failed',
                                  'task.compensated', 'task.cancelled', 'task.terminated')),
               g.id, g.kind, g.at, t.task_key, t.workflow, t.workflow_version, t.state,
               st.name,
               CASE WHEN g.kind = 'step.completed' THEN st.output WHEN g.kind = 'task.completed' THEN t.output END,
               CASE WHEN g.kind = 'step.error' THEN coalesce(st.last_error, g.detail::jsonb ->> 'error')
                    WHEN g.kind = 'task.failed' THEN coalesce(g.detail::jsonb ->> 'reason', 'a compensation failed')
               END,
               'pending', g.at, g.at, g.at
          FROM targets g JOIN tasks t ON t.id = g.task_id
          LEFT JOIN steps st ON st.id = g.step_id
        RETURNING 1
    )
    SELECT count(*) INTO written FROM written;
    IF written > 0 THEN
        -- A channel name is at most 63 bytes; longer ones are refused, so it is cut (webhooks.rs too).
        PERFORM pg_notify(left('shiftboss_outbox_' || current_schema(), 63), '');
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER events_outbox AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_from_events();

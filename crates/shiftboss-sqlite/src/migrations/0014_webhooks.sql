-- Status channels (issue 18): subscriptions, and the outbox of their deliveries.
--
-- A subscription is standing (task_id NULL: every task, or every task of `workflow`) or a task's
-- own (made at submit, in the submission's transaction). `kinds` is '' for every message kind,
-- else ',a,b,' so that membership is one instr(). `secret` is the signing key: the dispatcher
-- needs it in clear to sign, so it is kept, and never read back by anything but the claim.
CREATE TABLE subscriptions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    url             TEXT    NOT NULL,
    secret          TEXT    NOT NULL,
    task_id         INTEGER,
    workflow        TEXT,
    kinds           TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL CHECK (state = 'active' OR state = 'disabled'),
    disabled_reason TEXT,
    -- A receiver's 429 with Retry-After: nothing is sent to it before then.
    paused_until    INTEGER NOT NULL DEFAULT 0,
    description     TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX subscriptions_task ON subscriptions (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX subscriptions_standing ON subscriptions (id) WHERE task_id IS NULL;

-- One row per message and subscription. What the message says is copied in when it is written,
-- so every attempt sends the same body. A claim moves due_at past the claim's lease and bumps
-- lock_token: a dispatcher that dies mid-send leaves the row due again, and a late outcome of a
-- lapsed claim is fenced off.
CREATE TABLE deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id INTEGER NOT NULL,
    task_id         INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    event_id        INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    at              INTEGER NOT NULL,
    task_key        TEXT    NOT NULL,
    workflow        TEXT    NOT NULL,
    version         INTEGER NOT NULL,
    task_state      TEXT    NOT NULL,
    step            TEXT,
    output          TEXT,
    error           TEXT,
    state           TEXT    NOT NULL CHECK (state = 'pending' OR state = 'delivered' OR state = 'dead'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    due_at          INTEGER NOT NULL,
    lock_token      INTEGER NOT NULL DEFAULT 0,
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE state = 'pending';
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, id);
CREATE INDEX deliveries_task ON deliveries (task_id, id);
CREATE INDEX deliveries_dead ON deliveries (id) WHERE state = 'dead';
-- The archiver moves delivered rows here once they are old, like finished tasks.
CREATE TABLE deliveries_history AS SELECT * FROM deliveries WHERE 0;
CREATE UNIQUE INDEX deliveries_history_id ON deliveries_history (id);
CREATE INDEX deliveries_history_updated ON deliveries_history (updated_at);
-- Delivered rows leave the hot table by age.
CREATE INDEX deliveries_delivered ON deliveries (updated_at) WHERE state = 'delivered';

-- A row here for the length of one transaction (the archiver's restore) keeps the trigger below
-- from writing deliveries for events that are moved, not new.
CREATE TABLE outbox_muted (since INTEGER NOT NULL);

-- The outbox is written by the database itself, beside the event that is the message, in the
-- event's own transaction: every write path that records a message's event (the shared decide
-- path, the stores' fast reply paths, job enqueues) writes its deliveries with no code of its own.
-- The event kinds below are the messages (`MessageKind::of_event` holds the same table; a
-- conformance case checks they agree). Conditions are equalities joined by OR, not lists: SQLite
-- builds a temporary b-tree for a list on every run (see migration 7).
-- `seq` numbers the task's messages 1, 2, 3... (its message events up to this one), the same for
-- every subscription; a task's messages are written under its decide lock, so in id order.
CREATE TRIGGER events_outbox_task AFTER INSERT ON events
WHEN NEW.kind = 'task.received' OR NEW.kind = 'step.processed' OR NEW.kind = 'step.error'
  OR NEW.kind = 'task.paused' OR NEW.kind = 'task.resumed' OR NEW.kind = 'task.compensating'
  OR NEW.kind = 'task.completed' OR NEW.kind = 'task.failed' OR NEW.kind = 'task.compensation_failed'
  OR NEW.kind = 'task.compensated' OR NEW.kind = 'task.cancelled' OR NEW.kind = 'task.terminated'
  -- Events brought back from history (a job resubmitted from there) were messages once already.
  AND NOT EXISTS (SELECT 1 FROM outbox_muted)
BEGIN
    INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                            task_state, step, output, error, state, due_at, created_at, updated_at)
    SELECT s.id, NEW.task_id,
           (SELECT count(*) FROM events e WHERE e.task_id = NEW.task_id AND e.id <= NEW.id
               AND (e.kind = 'task.received' OR e.kind = 'step.processed' OR e.kind = 'step.error'
                    OR e.kind = 'task.paused' OR e.kind = 'task.resumed' OR e.kind = 'task.compensating'
                    OR e.kind = 'task.completed' OR e.kind = 'task.failed' OR e.kind = 'task.compensation_failed'
                    OR e.kind = 'task.compensated' OR e.kind = 'task.cancelled' OR e.kind = 'task.terminated')),
           NEW.id, m.kind, NEW.at, t.task_key, t.workflow, t.workflow_version, t.state,
           CASE WHEN NEW.step_id IS NOT NULL THEN st.name END,
           CASE WHEN m.kind = 'step.completed' THEN st.output WHEN m.kind = 'task.completed' THEN t.output END,
           CASE WHEN m.kind = 'step.error' THEN coalesce(st.last_error, json_extract(NEW.detail, '$.error'))
                WHEN m.kind = 'task.failed' THEN coalesce(json_extract(NEW.detail, '$.reason'), 'a compensation failed')
           END,
           'pending', NEW.at, NEW.at, NEW.at
      FROM (SELECT CASE NEW.kind WHEN 'step.processed' THEN 'step.completed'
                                 WHEN 'task.compensation_failed' THEN 'task.failed'
                                 ELSE NEW.kind END AS kind) m
      JOIN tasks t ON t.id = NEW.task_id
      -- A task's own subscriptions, then the standing ones: two lookups by index, not an OR.
      JOIN (SELECT id, kinds FROM subscriptions WHERE task_id = NEW.task_id AND state = 'active'
            UNION ALL
            SELECT s.id, s.kinds FROM subscriptions s INDEXED BY subscriptions_standing
             WHERE s.task_id IS NULL AND s.state = 'active'
               AND (s.workflow IS NULL OR s.workflow = (SELECT workflow FROM tasks WHERE id = NEW.task_id))) s
        ON s.kinds = '' OR instr(s.kinds, ',' || m.kind || ',') > 0
      LEFT JOIN steps st ON st.id = NEW.step_id;
END;

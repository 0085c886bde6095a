-- SQLite tests `x IN (three or more constants)` through a temporary b-tree that it builds afresh on
-- every run of the statement. Every insert into events paid for one (the predicate of the partial
-- index events_lapses), and so did every write of a task or a step (the CHECK on its state): in a
-- drain of one-step jobs that was about a tenth of the time. The same conditions written as
-- equalities joined by OR are tested in place. PostgreSQL tests such a list in place: its schema
-- stays as it is.
--
-- The CHECK constraints are rewritten in the stored schema text, the way SQLite documents for
-- changes that leave the file format and every stored row as they were (each new condition accepts
-- exactly what the old one did). The DROP and CREATE INDEX below bump the schema version, so other
-- connections parse the new text; the store reopens its own connection after migrating.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql,
       'CHECK (state IN (''pending'', ''processing'', ''processed'', ''error'', ''cancelled''))',
       'CHECK (state = ''pending'' OR state = ''processing'' OR state = ''processed'' OR state = ''error''
                                               OR state = ''cancelled'')')
 WHERE type = 'table' AND name = 'steps';
UPDATE sqlite_schema
   SET sql = replace(sql,
       'CHECK (state IN (''running'', ''paused'', ''compensating'', ''completed'', ''failed'',
                                                       ''cancelled'', ''compensated'', ''terminated''))',
       'CHECK (state = ''running'' OR state = ''paused'' OR state = ''compensating''
                                                 OR state = ''completed'' OR state = ''failed'' OR state = ''cancelled''
                                                 OR state = ''compensated'' OR state = ''terminated'')')
 WHERE type = 'table' AND name = 'tasks';
PRAGMA writable_schema = OFF;

DROP INDEX events_lapses;
CREATE INDEX events_lapses ON events (kind, step_id)
 WHERE kind = 'step.expired' OR kind = 'step.released' OR kind = 'reply.rejected';

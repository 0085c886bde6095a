-- The summary counts only the rare event kinds (lapses and refused replies) by kind. An index of
-- every event by kind cost each claim, reply and task move one more index insert; one of the rare
-- kinds alone serves the same counts.
DROP INDEX events_by_kind;
CREATE INDEX events_lapses ON events (kind, step_id) WHERE kind IN ('step.expired', 'step.released', 'reply.rejected');

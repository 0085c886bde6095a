-- Idle load (issue 6): an idle scheduler sleeps until the next due time of a pending step, and the
-- supervisor until a claim may follow. Both read min(due_at) of the pending steps; steps_due leads
-- with priority, so without this index that read scans every pending step (a million jobs due
-- later, say) instead of reading one entry.
CREATE INDEX steps_next_due ON steps (due_at) WHERE state = 'pending';

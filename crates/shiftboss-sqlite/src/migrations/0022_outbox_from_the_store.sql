-- Issues 18 and 22: the outbox is written by the store's one path that inserts events
-- (`Tx::flush_events`, then `outbox::write`), no longer by a trigger on `events`. The row trigger
-- ran a sub-program for every event (message or not, subscription or not): with no subscription
-- anywhere it cost a drain of one-step jobs about a tenth of its throughput. The store now writes
-- the deliveries of the message events it inserts with two statements per write (the tasks' own
-- subscriptions, the standing ones), and none when the store has no subscription at all; the rows
-- are the trigger's (same columns, same `seq`; each subscription's in event order). The
-- archiver's restore moves events back without that path, so the mute it set is gone too.
DROP TRIGGER events_outbox_task;
DROP TABLE outbox_muted;

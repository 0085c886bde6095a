//! Status channels (issue 18): the outbox the store writes beside each message's event, the
//! dispatcher's claim and its fenced outcomes, and what an operator does with dead deliveries.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{TaskId, TaskState, Timestamp};
use shiftboss_store::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn target(url: &str, kinds: &[MessageKind]) -> WebhookTarget {
    WebhookTarget { url: url.into(), secret: SECRET.into(), kinds: kinds.to_vec() }
}

impl<S: Store> Harness<S> {
    async fn deliveries_of(&self, q: DeliveryQuery) -> Vec<DeliveryRecord> {
        let mut d = self.store.list_deliveries(DeliveryQuery { limit: 1000, ..q }).await.expect("list deliveries");
        d.reverse();
        d
    }

    /// Runs every due `mail` job: `job` gives up (a permanent error), the others complete.
    async fn run_mail_giving_up_on(&self, job: TaskId) {
        loop {
            let claimed = self.claim("server", &["mail"], 10).await;
            if claimed.is_empty() {
                break;
            }
            for c in &claimed {
                if c.task_id == job {
                    let gave_up = ReplyResult::PermanentError("no such mailbox".into());
                    self.reply("server", c.id, c.lease_token, gave_up).await;
                } else {
                    self.complete("server", c, json!({})).await;
                }
            }
        }
    }

    async fn claim_messages(&self, limit: u32) -> ClaimedDeliveries {
        self.claim_messages_from(limit, None).await
    }

    async fn claim_messages_from(&self, limit: u32, due_from: Option<Timestamp>) -> ClaimedDeliveries {
        let p = ClaimDeliveries { limit, lease: secs(30), due_from };
        self.store.claim_deliveries(p).await.expect("claim deliveries")
    }

    async fn claim_list(&self) -> Vec<ClaimedDelivery> {
        self.claim_messages(10).await.deliveries
    }

    /// A task's own subscription, found through its deliveries (not those of `standing`).
    async fn own_channel(&self, task: TaskId, standing: i64) -> SubscriptionRecord {
        let d = self.deliveries_of(DeliveryQuery { task: Some(task), ..DeliveryQuery::default() }).await;
        let sub = d.iter().find(|d| d.subscription_id != standing).expect("a delivery on the task's channel");
        self.store.get_subscription(sub.subscription_id).await.expect("get").expect("exists")
    }

    /// Claims and answers 200 to every delivery there is, but those `hold` keeps (left claimed,
    /// so not claimed again before their lease ends).
    async fn deliver_all(&self, mut hold: impl FnMut(&ClaimedDelivery) -> bool) {
        loop {
            let claimed = self.claim_list().await;
            if claimed.is_empty() {
                break;
            }
            let outcomes = claimed
                .iter()
                .filter(|c| !hold(c))
                .map(|c| DeliveryOutcome {
                    id: c.delivery.id,
                    token: c.token,
                    result: DeliveryResult::Delivered { status: 200 },
                })
                .collect();
            self.store.record_deliveries(outcomes).await.expect("record");
        }
    }

    /// Runs every step of a task to completion, each with output `{"done": name}`.
    async fn finish_all(&self) {
        loop {
            let claimed = self.claim("w", &[WORKER], 10).await;
            if claimed.is_empty() {
                break;
            }
            for c in &claimed {
                self.complete("w", c, json!({"done": c.name})).await;
            }
        }
    }
}

pub async fn a_task_subscription_gets_every_message_in_order_with_its_content<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&three_steps()).await;
    let mut p = submit_params("order-1", "three", 0);
    p.notify = Some(target("https://hooks.example.com/order", &[]));
    let task = h.store.submit_task(p).await.expect("submit").task_id;
    // Another task, not subscribed: nothing of it is written.
    h.submit("order-2", "three", 0).await;
    h.finish_all().await;
    assert_eq!(h.task(task).await.task.state, TaskState::Completed);

    let all = h.deliveries_of(DeliveryQuery::default()).await;
    assert!(all.iter().all(|d| d.task_id == task), "only the subscribed task has deliveries: {all:?}");
    let kinds: Vec<(i64, MessageKind, Option<&str>)> = all.iter().map(|d| (d.seq, d.kind, d.step.as_deref())).collect();
    assert_eq!(
        kinds,
        vec![
            (1, MessageKind::Received, None),
            (2, MessageKind::StepCompleted, Some("reserve")),
            (3, MessageKind::StepCompleted, Some("charge")),
            (4, MessageKind::StepCompleted, Some("ship")),
            (5, MessageKind::Completed, None),
        ]
    );
    for d in &all {
        assert_eq!((d.task_key.as_str(), d.workflow.as_str(), d.version), ("order-1", "three", 1));
        assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0));
    }
    let out = |i: usize| all[i].output.as_deref().map(|o| serde_json::from_str::<serde_json::Value>(o).expect("json"));
    assert_eq!(out(2), Some(json!({"done": "charge"})), "a step's message carries its output");
    assert_eq!(all[4].task_state, "completed");
    assert!(all[0].output.is_none() && all[0].error.is_none());

    // Each delivery is a message event of the task's log, of the kind it names.
    let events = h.task(task).await.events;
    for d in &all {
        let e = events.iter().find(|e| e.id == d.event_id).unwrap_or_else(|| panic!("event {} exists", d.event_id));
        assert_eq!(MessageKind::of_event(&e.kind), Some(d.kind), "{e:?}");
        assert_eq!(d.at, e.at);
    }
    let message_events = events.iter().filter(|e| MessageKind::of_event(&e.kind).is_some()).count();
    assert_eq!(message_events, all.len(), "every message event has its delivery");
}

pub async fn standing_subscriptions_filter_by_workflow_and_kind<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&three_steps()).await;
    h.register(&one_step()).await;
    let ends = NewSubscription {
        target: target("https://hooks.example.com/ends", &[MessageKind::Completed, MessageKind::Failed]),
        workflow: Some("three".into()),
        description: Some("order ends".into()),
    };
    let ends = h.store.create_subscription(ends).await.expect("create");
    assert_eq!(ends.kinds, vec![MessageKind::Completed, MessageKind::Failed]);
    assert_eq!((ends.state, ends.task_id), (SubscriptionState::Active, None));
    let every =
        NewSubscription { target: target("http://hooks.example.com/all", &[]), workflow: None, description: None };
    let every = h.store.create_subscription(every).await.expect("create");
    assert_eq!(every.kinds, MessageKind::ALL.to_vec(), "no kinds given means every kind");

    let three = h.submit("t-1", "three", 0).await;
    let one = h.submit("o-1", "one", 0).await;
    h.finish_all().await;

    let of = |sub: i64| DeliveryQuery { subscription: Some(sub), ..Default::default() };
    let got: Vec<(i64, MessageKind)> =
        h.deliveries_of(of(ends.id)).await.iter().map(|d| (d.task_id.0, d.kind)).collect();
    assert_eq!(got, vec![(three.0, MessageKind::Completed)], "workflow and kind filters");
    let every_got = h.deliveries_of(of(every.id)).await;
    assert_eq!(every_got.iter().filter(|d| d.task_id == three).count(), 5);
    assert_eq!(every_got.iter().filter(|d| d.task_id == one).count(), 3, "received, step completed, completed");
    let seqs: Vec<i64> = every_got.iter().filter(|d| d.task_id == one).map(|d| d.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);

    // A disabled subscription gets nothing new; its listing shows why.
    let off =
        SetSubscriptionState { id: every.id, state: SubscriptionState::Disabled, reason: Some("maintenance".into()) };
    let off = h.store.set_subscription_state(off).await.expect("disable");
    assert_eq!((off.state, off.disabled_reason.as_deref()), (SubscriptionState::Disabled, Some("maintenance")));
    h.submit("o-2", "one", 0).await;
    assert_eq!(h.deliveries_of(of(every.id)).await.len(), 8, "nothing written for a disabled subscription");
    let listed: Vec<i64> = h.store.list_subscriptions().await.expect("list").iter().map(|s| s.id).collect();
    assert_eq!(listed, vec![ends.id, every.id]);

    // Bad subscriptions are refused and write nothing.
    for bad in [
        target("ftp://x/y", &[]),
        target("https://", &[]),
        WebhookTarget { secret: "hunter2".into(), ..target("https://ok.example.com", &[]) },
    ] {
        let r = h
            .store
            .create_subscription(NewSubscription { target: bad.clone(), workflow: None, description: None })
            .await;
        assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{bad:?}: {r:?}");
        let mut p = submit_params("bad-hook", "one", 0);
        p.notify = Some(bad.clone());
        let r = h.store.submit_task(p).await;
        assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{bad:?}: {r:?}");
    }
    assert_eq!(h.store.list_subscriptions().await.expect("list").len(), 2);
    assert!(h.store.find_task_by_key("bad-hook").await.expect("find").is_none());
}

pub async fn claims_are_leased_and_fenced_and_outcomes_apply_once<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&one_step()).await;
    let mut p = submit_params("k-1", "one", 0);
    p.notify = Some(target("https://hooks.example.com/a", &[MessageKind::Received]));
    let task = h.store.submit_task(p).await.expect("submit").task_id;

    let first = h.claim_messages(10).await;
    assert_eq!(first.deliveries.len(), 1);
    let c = &first.deliveries[0];
    assert_eq!((c.url.as_str(), c.secret.as_str(), c.delivery.task_id), ("https://hooks.example.com/a", SECRET, task));
    assert_eq!(c.delivery.attempts, 1, "a claim counts as an attempt");
    assert_eq!(first.now, h.now(), "the claim says the store's time");
    assert_eq!(first.next_due, Some(secs(30)), "the claimed one is due again at its lease's end");
    assert!(h.claim_messages(10).await.deliveries.is_empty(), "a claimed delivery is not claimed twice");

    // The claim lapses (a dispatcher died): claimed again, with a new token; the old one is stale.
    h.advance(secs(31));
    let again = h.claim_messages(10).await.deliveries;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery.attempts, 2);
    assert_ne!(again[0].token, c.token);
    let stale =
        DeliveryOutcome { id: c.delivery.id, token: c.token, result: DeliveryResult::Delivered { status: 200 } };
    assert_eq!(h.store.record_deliveries(vec![stale.clone()]).await.expect("record"), vec![false]);
    let done =
        DeliveryOutcome { id: c.delivery.id, token: again[0].token, result: DeliveryResult::Delivered { status: 204 } };
    // The lapsed claim's late outcome and the new claim's, in one batch (a dispatcher gathers
    // outcomes): each is answered on its own, the stale one refused.
    assert_eq!(h.store.record_deliveries(vec![stale, done.clone()]).await.expect("record"), vec![false, true]);
    assert_eq!(h.store.record_deliveries(vec![done]).await.expect("repeat"), vec![false], "applied once");
    let d = h.store.get_delivery(c.delivery.id).await.expect("get").expect("exists");
    assert_eq!((d.state, d.last_status, d.delivered_at), (DeliveryState::Delivered, Some(204), Some(h.now())));
    assert_eq!(h.claim_messages(10).await.next_due, None, "nothing left to send");
}

/// The dispatcher's floor: a claim from `due_from` passes over what is due before it, and says
/// through which due time it took the queue.
pub async fn a_claim_from_a_floor_passes_over_what_is_due_before_it<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&one_step()).await;
    let mut due = Vec::new();
    for k in 0..4 {
        let mut p = submit_params(&format!("k-{k}"), "one", 0);
        p.notify = Some(target("https://hooks.example.com/a", &[MessageKind::Received]));
        h.store.submit_task(p).await.expect("submit");
        due.push(h.now());
        h.advance(secs(10));
    }
    let dues = |c: &ClaimedDeliveries| c.deliveries.iter().map(|d| d.delivery.at).collect::<Vec<_>>();

    // Full: it took the queue through the latest due time among those it claimed.
    let first = h.claim_messages_from(2, None).await;
    assert_eq!(dues(&first), vec![due[0], due[1]]);
    assert_eq!(first.taken_through, due[1]);
    // From a floor past the third: only the fourth; short, so through the claim's time.
    let from = Timestamp(due[2].0 + 1);
    let second = h.claim_messages_from(10, Some(from)).await;
    assert_eq!(dues(&second), vec![due[3]]);
    assert_eq!(second.taken_through, h.now());
    assert!(h.claim_messages_from(10, Some(from)).await.deliveries.is_empty());
    // From the front: the one the floor passed over.
    let third = h.claim_messages_from(10, None).await;
    assert_eq!(dues(&third), vec![due[2]]);
    assert_eq!(third.taken_through, h.now());
}

pub async fn failures_retry_die_and_are_redelivered_and_receivers_are_heard<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&one_step()).await;
    let sub = NewSubscription {
        target: target("https://hooks.example.com/b", &[MessageKind::Received]),
        workflow: None,
        description: None,
    };
    let sub = h.store.create_subscription(sub).await.expect("create");
    let task = h.submit("k-1", "one", 0).await;

    // A failed attempt waits for its next due time.
    let c = h.claim_list().await.remove(0);
    let r = DeliveryResult::Retry { after: secs(5), status: Some(500), error: "HTTP 500".into() };
    assert_eq!(
        h.store
            .record_deliveries(vec![DeliveryOutcome { id: c.delivery.id, token: c.token, result: r }])
            .await
            .unwrap(),
        vec![true]
    );
    assert!(h.claim_list().await.is_empty());
    h.advance(secs(5));
    // Dead: an alert on the task, and nothing more is sent.
    let c = h.claim_list().await.remove(0);
    assert_eq!(c.delivery.attempts, 2);
    let dead = DeliveryResult::Dead { status: Some(500), error: "HTTP 500 after 2 attempts".into() };
    h.store.record_deliveries(vec![DeliveryOutcome { id: c.delivery.id, token: c.token, result: dead }]).await.unwrap();
    let d = h.store.get_delivery(c.delivery.id).await.unwrap().unwrap();
    assert_eq!((d.state, d.last_error.as_deref()), (DeliveryState::Dead, Some("HTTP 500 after 2 attempts")));
    let events = h.task(task).await.events;
    let alert = events.iter().find(|e| e.kind == event_kind::DELIVERY_DEAD).expect("a dead delivery is an alert");
    assert_eq!(alert.detail["delivery"], json!(c.delivery.id));
    h.advance(secs(3600));
    assert!(h.claim_list().await.is_empty(), "a dead delivery is not sent again by itself");

    // An operator sends it again: a dry run first, then for real.
    let dry = h.store.redeliver(Redeliver { ids: vec![], subscription: Some(sub.id), dry_run: true }).await.unwrap();
    assert_eq!(dry.ids, vec![c.delivery.id]);
    assert_eq!(h.store.get_delivery(c.delivery.id).await.unwrap().unwrap().state, DeliveryState::Dead, "dry");
    h.store.redeliver(Redeliver { ids: vec![c.delivery.id], subscription: None, dry_run: false }).await.unwrap();
    let d = h.store.get_delivery(c.delivery.id).await.unwrap().unwrap();
    assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0));

    // 429 with Retry-After: the subscription is left alone until then; the attempt is not counted.
    let c = h.claim_list().await.remove(0);
    let until = h.now().plus(secs(60));
    let slow = DeliveryResult::Throttled { after: secs(60), status: 429 };
    h.store.record_deliveries(vec![DeliveryOutcome { id: c.delivery.id, token: c.token, result: slow }]).await.unwrap();
    let s = h.store.get_subscription(sub.id).await.unwrap().unwrap();
    assert_eq!(s.paused_until, Some(until));
    h.submit("k-2", "one", 0).await;
    assert!(h.claim_list().await.is_empty(), "a paused subscription gets nothing, old or new");
    h.advance(secs(60));
    let both = h.claim_list().await;
    assert_eq!(both.len(), 2);
    let c = both.into_iter().find(|c| c.delivery.task_id == task).unwrap();
    assert_eq!(c.delivery.attempts, 1, "the throttled attempt did not count");

    // 410 Gone: the subscription is disabled, the delivery waits for it.
    let gone = DeliveryResult::Gone { status: 410 };
    h.store.record_deliveries(vec![DeliveryOutcome { id: c.delivery.id, token: c.token, result: gone }]).await.unwrap();
    let s = h.store.get_subscription(sub.id).await.unwrap().unwrap();
    assert_eq!(s.state, SubscriptionState::Disabled);
    assert!(s.disabled_reason.as_deref().is_some_and(|r| r.contains("410")));
    h.advance(secs(120));
    assert!(h.claim_list().await.is_empty(), "nothing goes to a disabled subscription");
    h.store
        .set_subscription_state(SetSubscriptionState { id: sub.id, state: SubscriptionState::Active, reason: None })
        .await
        .unwrap();
    assert_eq!(h.claim_list().await.len(), 2, "enabled again, both are sent (the other's claim lapsed)");

    // Deleting it drops what it had not delivered.
    assert!(h.store.delete_subscription(sub.id).await.unwrap());
    assert!(h.store.get_subscription(sub.id).await.unwrap().is_none());
    assert!(h.deliveries_of(DeliveryQuery { subscription: Some(sub.id), ..Default::default() }).await.is_empty());
    assert!(!h.store.delete_subscription(sub.id).await.unwrap());
}

/// A task's own channel rests once its task is archived and nothing is left to send on it, so
/// that finished tasks' channels do not stay active for ever; one with a delivery still pending
/// stays active until that delivery is sent and archived; the purge of the task deletes it.
/// A standing subscription is never touched.
pub async fn a_task_channel_rests_with_its_archived_task_and_goes_with_its_purge<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&one_step()).await;
    let standing = h
        .store
        .create_subscription(NewSubscription {
            target: target("https://hooks.example.com/all", &[MessageKind::Completed]),
            workflow: None,
            description: None,
        })
        .await
        .expect("standing subscription");
    let mut ids = Vec::new();
    for key in ["sent", "slow"] {
        let mut p = submit_params(key, "one", 0);
        p.notify = Some(target(&format!("https://hooks.example.com/{key}"), &[]));
        ids.push(h.store.submit_task(p).await.expect("submit").task_id);
    }
    h.finish_all().await;
    let (sent, slow) = (h.own_channel(ids[0], standing.id).await, h.own_channel(ids[1], standing.id).await);
    // Every message sent but one of `slow`'s.
    let mut held = None;
    h.deliver_all(|c| {
        let hold = held.is_none() && c.delivery.subscription_id == slow.id;
        if hold {
            held = Some(c.delivery.id);
        }
        hold
    })
    .await;
    let held = held.expect("one of slow's deliveries held back");

    h.advance(secs(1));
    let report = h.archive_now().await;
    assert_eq!(report.tasks, 2);
    let rested = h.store.get_subscription(sent.id).await.unwrap().expect("kept while its task is in history");
    assert_eq!(
        (rested.state, rested.disabled_reason.as_deref()),
        (SubscriptionState::Disabled, Some(webhooks::CHANNEL_ARCHIVED))
    );
    assert_eq!(
        h.store.get_subscription(slow.id).await.unwrap().unwrap().state,
        SubscriptionState::Active,
        "still sending"
    );
    assert_eq!(h.store.get_subscription(standing.id).await.unwrap().unwrap().state, SubscriptionState::Active);

    // The held delivery goes out (its lease lapsed; claimed again), and is archived: slow rests too.
    h.advance(secs(31));
    let again = h.claim_list().await;
    assert_eq!(again.iter().map(|c| c.delivery.id).collect::<Vec<_>>(), vec![held]);
    let done = DeliveryOutcome { id: held, token: again[0].token, result: DeliveryResult::Delivered { status: 200 } };
    assert_eq!(h.store.record_deliveries(vec![done]).await.unwrap(), vec![true]);
    h.advance(secs(1));
    h.archive_now().await;
    assert_eq!(h.store.get_subscription(slow.id).await.unwrap().unwrap().state, SubscriptionState::Disabled);
    assert_eq!(h.store.get_subscription(standing.id).await.unwrap().unwrap().state, SubscriptionState::Active);

    // The purge deletes the tasks' history and their channels with it.
    let leader = h.elect("archiver", "archiver-1", secs(3600)).await.expect("archiver term");
    h.advance(secs(120));
    let p = Archive { leader, after: std::time::Duration::ZERO, keep: Some(secs(60)), limit: 1000 };
    assert_eq!(h.store.archive(p).await.expect("purge").purged, 2);
    for s in [&sent, &slow] {
        assert!(h.store.get_subscription(s.id).await.unwrap().is_none(), "subscription {} outlived its task", s.id);
    }
    assert!(h.store.get_subscription(standing.id).await.unwrap().is_some(), "standing ones stay");
}

/// The outbox's backlog for operators: pending and dead deliveries counted up to a cap, and the
/// earliest due pending one.
pub async fn the_backlog_counts_up_to_a_cap_and_names_the_earliest_due<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&one_step()).await;
    let empty = h.store.delivery_backlog(100).await.expect("backlog");
    assert_eq!((empty.pending, empty.dead, empty.oldest_due, empty.now), (0, 0, None, h.now()));
    let written = h.now();
    for key in ["a", "b", "c"] {
        let mut p = submit_params(key, "one", 0);
        p.notify = Some(target("https://hooks.example.com/x", &[MessageKind::Received]));
        h.store.submit_task(p).await.expect("submit");
    }
    h.advance(secs(5));
    let b = h.store.delivery_backlog(2).await.unwrap();
    assert_eq!((b.pending, b.dead, b.oldest_due, b.now), (2, 0, Some(written), h.now()), "counted up to the cap");
    assert_eq!(h.store.delivery_backlog(100).await.unwrap().pending, 3);

    // One dies, one waits a minute for its retry, one is left due: the earliest due is that one.
    let claimed = h.claim_list().await;
    assert_eq!(claimed.len(), 3);
    let outcomes = vec![
        DeliveryOutcome {
            id: claimed[0].delivery.id,
            token: claimed[0].token,
            result: DeliveryResult::Dead { status: Some(500), error: "gave up".into() },
        },
        DeliveryOutcome {
            id: claimed[1].delivery.id,
            token: claimed[1].token,
            result: DeliveryResult::Retry { after: secs(60), status: Some(500), error: "again".into() },
        },
    ];
    h.store.record_deliveries(outcomes).await.unwrap();
    let b = h.store.delivery_backlog(100).await.unwrap();
    assert_eq!((b.pending, b.dead), (2, 1));
    // The third is claimed (leased for 30 s): due again at the lease's end, before the retry.
    assert_eq!(b.oldest_due, Some(Timestamp(h.now().0 + 30_000)));
}

/// A job given a channel of its own (submitted as a task of its job workflow) that gave up, was
/// archived (its channel resting) and is resubmitted from history gets its channel back: its new
/// attempt's messages are written again.
pub async fn a_restored_job_wakes_its_resting_channel<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    // The first enqueue registers the handler's job workflow.
    h.enqueue(vec![EnqueueJob::new("mail", json!({"n": 0}))]).await;
    let mut p = submit_params("mail-1", &shiftboss_core::jobs::workflow_name("mail"), 0);
    p.version = Some(1);
    p.notify = Some(target("https://hooks.example.com/mail", &[]));
    let job = h.store.submit_task(p).await.expect("submit a job with a channel").task_id;
    h.run_mail_giving_up_on(job).await;
    let channel = h.own_channel(job, -1).await;
    h.deliver_all(|_| false).await;
    h.advance(secs(1));
    h.archive_now().await;
    let rested = h.store.get_subscription(channel.id).await.unwrap().expect("kept");
    assert_eq!(rested.state, SubscriptionState::Disabled, "{rested:?}");

    let q = JobQuery { handler: Some("mail".into()), limit: 1000, ..Default::default() };
    let again = ResubmitJobs { query: q, dry_run: false, actor: "ann".into(), reason: "mailbox made".into() };
    assert_eq!(h.store.resubmit_jobs(again).await.unwrap().resubmitted, 1);
    let woken = h.store.get_subscription(channel.id).await.unwrap().expect("kept");
    assert_eq!((woken.state, woken.disabled_reason), (SubscriptionState::Active, None));
    let c = h.claim("server", &["mail"], 10).await;
    assert_eq!(c.len(), 1, "the job runs again");
    h.complete("server", &c[0], json!({})).await;
    let sent = h.deliveries_of(DeliveryQuery { subscription: Some(channel.id), ..DeliveryQuery::default() }).await;
    assert!(
        sent.iter().any(|d| d.kind == MessageKind::Completed && d.state == DeliveryState::Pending),
        "the new attempt's messages go out on the woken channel: {sent:?}"
    );
}

/// A task brought back from history (a job resubmitted from there) brings its events back with
/// it; they were messages once already, so no subscription gets them again: a standing
/// subscription's messages for the task after the resubmit are the new attempt's only.
pub async fn a_restored_task_sends_no_message_again_for_its_old_events<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.enqueue(vec![EnqueueJob::new("mail", json!({"n": 0}))]).await;
    let every =
        NewSubscription { target: target("https://hooks.example.com/all", &[]), workflow: None, description: None };
    let every = h.store.create_subscription(every).await.expect("create");
    let mut p = submit_params("mail-1", &shiftboss_core::jobs::workflow_name("mail"), 0);
    p.version = Some(1);
    let job = h.store.submit_task(p).await.expect("submit a job").task_id;
    h.run_mail_giving_up_on(job).await;
    let of_job =
        |d: &Vec<DeliveryRecord>| d.iter().filter(|d| d.task_id == job).map(|d| d.event_id).collect::<Vec<_>>();
    let first =
        of_job(&h.deliveries_of(DeliveryQuery { subscription: Some(every.id), ..DeliveryQuery::default() }).await);
    assert!(first.len() >= 3, "received, step in error, failed: {first:?}");
    let last_old = *first.iter().max().expect("messages of the first attempt");
    h.deliver_all(|_| false).await;
    h.advance(secs(1));
    h.archive_now().await;

    let q = JobQuery { handler: Some("mail".into()), limit: 1000, ..Default::default() };
    let again = ResubmitJobs { query: q, dry_run: false, actor: "ann".into(), reason: "mailbox made".into() };
    assert_eq!(h.store.resubmit_jobs(again).await.unwrap().resubmitted, 1);
    let pending =
        DeliveryQuery { subscription: Some(every.id), state: Some(DeliveryState::Pending), ..DeliveryQuery::default() };
    let sent_again: Vec<i64> = of_job(&h.deliveries_of(pending).await).into_iter().filter(|&e| e <= last_old).collect();
    assert!(sent_again.is_empty(), "the first attempt's events were written as messages again: {sent_again:?}");
}

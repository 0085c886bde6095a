//! Retry jobs (M1-M8): a one-step task per job, due at its time, in its bucket, retried on its
//! interval list when its handler reports a failure, given up and found in history, resubmitted.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::jobs::JobState;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::*;
use std::time::Duration;

const MAIL: &str = "mail";

fn intervals(list: &[u64]) -> RetryPolicy {
    RetryPolicy::Intervals { intervals: list.iter().map(|s| Duration::from_secs(*s)).collect(), max_failures: None }
}

fn mail(n: u32) -> EnqueueJob {
    EnqueueJob::new(MAIL, json!({"to": format!("user{n}@example.com")}))
}

impl<S: Store> Harness<S> {
    pub async fn enqueue(&self, jobs: Vec<EnqueueJob>) -> Vec<Submitted> {
        let p = EnqueueJobs { jobs, actor: "app".into() };
        self.store.enqueue_jobs(p).await.unwrap_or_else(|e| panic!("enqueue: {e}"))
    }

    pub async fn job(&self, id: TaskId) -> JobRecord {
        let found = self.store.find_job(JobRef::Id(id)).await.expect("find_job");
        found.unwrap_or_else(|| panic!("job {id} exists"))
    }

    /// Claims the due steps of `handler` and replies `Failed(reason)` to each.
    pub async fn fail_due(&self, handler: &str, reason: &str) -> usize {
        let claimed = self.claim("server", &[handler], 100).await;
        for c in &claimed {
            let out = self.reply("server", c.id, c.lease_token, ReplyResult::Failed(reason.into())).await;
            assert!(matches!(out, ReplyOutcome::Applied { .. }), "{out:?}");
        }
        claimed.len()
    }

    /// Archives everything finished (after 0 s) under a fresh archiver term.
    pub async fn archive_now(&self) -> ArchiveReport {
        let leader = self.elect("archiver", "archiver-1", secs(3600)).await.expect("archiver term");
        let p = Archive { leader, after: Duration::ZERO, keep: None, limit: 1000 };
        self.store.archive(p).await.expect("archive")
    }

    pub async fn jobs(&self, q: JobQuery) -> Vec<JobRecord> {
        self.store.list_jobs(q).await.expect("list_jobs")
    }
}

pub async fn enqueue_writes_a_one_step_task_due_at_its_time_in_its_bucket<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let job = EnqueueJob {
        key: Some("welcome-7".into()),
        due_at: Some(h.now().plus(secs(10))),
        retry: Some(intervals(&[1, 5])),
        priority: 3,
        bucket: Some(7),
        ..mail(7)
    };
    let s = h.enqueue(vec![job]).await.remove(0);
    assert!(s.created);
    let d = h.task(s.task_id).await;
    assert_eq!((d.task.workflow.as_str(), d.task.state, d.task.bucket), ("job:mail", TaskState::Running, 7));
    assert_eq!(d.steps.len(), 1);
    let step = &d.steps[0];
    assert_eq!((step.name.as_str(), step.agent.as_str(), step.state), ("run", MAIL, StepState::Pending));
    assert_eq!((step.due_at, step.priority, step.bucket), (h.now().plus(secs(10)), 3, 7));
    assert_eq!(step.retry, Some(intervals(&[1, 5])));
    assert_eq!(count(&d.events, event_kind::TASK_RECEIVED), 1);

    assert!(h.claim("server", &[MAIL], 10).await.is_empty(), "not before its due time");
    h.advance(secs(10));
    let got = h.claim("server", &[MAIL], 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].input, json!({"to": "user7@example.com"}), "the handler gets the params");
    let rec = h.job(s.task_id).await;
    assert_eq!(
        (rec.state, rec.key.as_str(), rec.handler.as_str(), rec.bucket),
        (JobState::Running, "welcome-7", MAIL, 7)
    );
    assert!(!rec.archived);
    let out = h.complete("server", &got[0], json!({"sent": true})).await;
    assert!(matches!(out, ReplyOutcome::Applied { task_state: TaskState::Completed, .. }), "{out:?}");
    let rec = h.store.find_job(JobRef::Key("welcome-7".into())).await.unwrap().expect("by key");
    assert_eq!((rec.state, rec.output), (JobState::Succeeded, Some(json!({"sent": true}))));
}

pub async fn a_failed_attempt_follows_the_interval_list_to_the_letter_then_gives_up<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let job = EnqueueJob { retry: Some(intervals(&[1, 5, 30])), ..mail(1) };
    let id = h.enqueue(vec![job]).await[0].task_id;
    for (n, wait) in [(1u32, 1u64), (2, 5), (3, 30)] {
        let failed_at = h.now();
        assert_eq!(h.fail_due(MAIL, &format!("smtp 421 (try {n})")).await, 1, "try {n} was due");
        let rec = h.job(id).await;
        assert_eq!(rec.state, JobState::Pending, "after try {n}");
        assert_eq!(rec.retries, n, "count + 1");
        assert_eq!(rec.due_at, failed_at.plus(secs(wait)), "interval {n} is {wait} s");
        assert_eq!(rec.last_error.as_deref(), Some(format!("smtp 421 (try {n})").as_str()), "reason kept");
        h.advance(secs(wait) - ms(1));
        assert!(h.claim("server", &[MAIL], 10).await.is_empty(), "not a millisecond early (try {})", n + 1);
        h.advance(ms(1));
    }
    assert_eq!(h.fail_due(MAIL, "smtp 550 mailbox gone").await, 1, "the fourth try ran");
    let rec = h.job(id).await;
    assert_eq!((rec.state, rec.retries), (JobState::GivenUp, 4));
    assert_eq!(rec.last_error.as_deref(), Some("smtp 550 mailbox gone"));
    let d = h.task(id).await;
    assert_eq!(d.task.state, TaskState::Failed);
    assert_eq!(count(&d.events, event_kind::STEP_FAILED), 4);
    assert!(
        d.events
            .iter()
            .any(|e| e.kind == event_kind::STEP_ERROR && e.level == shiftboss_core::model::EventLevel::Alert)
    );
    h.advance(secs(3600));
    assert!(h.claim("server", &[MAIL], 10).await.is_empty(), "a given-up job never runs again by itself");

    let report = h.archive_now().await;
    assert_eq!(report.tasks, 1);
    assert!(h.store.get_task(id).await.unwrap().is_none(), "it left the hot tables");
    let found =
        h.jobs(JobQuery { place: JobPlace::History, state: Some(JobState::GivenUp), ..Default::default() }).await;
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].id, found[0].archived, found[0].retries), (id, true, 4));
    assert_eq!(found[0].last_error.as_deref(), Some("smtp 550 mailbox gone"));
    let by_id = h.job(id).await;
    assert!(by_id.archived && by_id.state == JobState::GivenUp);
}

pub async fn a_unique_key_gives_back_the_same_job_live_or_archived<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let once = EnqueueJob { key: Some("invoice-9".into()), ..mail(9) };
    let first = h.enqueue(vec![once.clone()]).await.remove(0);
    let again = h.enqueue(vec![once.clone()]).await.remove(0);
    assert_eq!((again.task_id, again.created), (first.task_id, false));
    let other = EnqueueJob { params: json!({"to": "someone-else"}), ..once.clone() };
    let p = EnqueueJobs { jobs: vec![other], actor: "app".into() };
    assert!(matches!(h.store.enqueue_jobs(p).await, Err(StoreError::Conflict(_))));
    assert_eq!(h.jobs(JobQuery::default()).await.len(), 1, "nothing was added");

    let c = h.claim_one_of(MAIL).await;
    h.complete("server", &c, json!({})).await;
    assert_eq!(h.archive_now().await.tasks, 1);
    let after = h.enqueue(vec![once]).await.remove(0);
    assert_eq!((after.task_id, after.created), (first.task_id, false), "an archived key stays taken");
    assert!(h.jobs(JobQuery::default()).await.is_empty(), "no new live job");
    // Tasks keep their idempotent submission across archiving too.
    h.register_standard().await;
    let t = h.submit("order-1", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    h.archive_now().await;
    let s = h.store.submit_task(submit_params("order-1", "one", 0)).await.unwrap();
    assert_eq!((s.task_id, s.created), (t, false));
}

pub async fn bad_jobs_are_refused_and_change_nothing<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.enqueue(vec![mail(1)]).await;
    let before = h.snapshot().await;
    let bad = [
        EnqueueJob::new("bad name", json!({})),
        EnqueueJob::new(MAIL, json!([1, 2])),
        EnqueueJob { bucket: Some(256), ..mail(2) },
        EnqueueJob { retry: Some(RetryPolicy::Intervals { intervals: vec![], max_failures: None }), ..mail(3) },
        EnqueueJob { timeout: Some(Duration::ZERO), ..mail(4) },
        EnqueueJob { key: Some(String::new()), ..mail(5) },
        EnqueueJob { params: json!({"x": "a\u{0}b"}), ..mail(6) },
    ];
    for job in bad {
        let what = format!("{job:?}");
        // A good job first: the whole batch must be refused, not only the bad one.
        let p = EnqueueJobs { jobs: vec![mail(10), job], actor: "app".into() };
        let got = h.store.enqueue_jobs(p).await;
        assert!(matches!(got, Err(StoreError::InvalidInput(_))), "{what}: {got:?}");
    }
    let too_many = EnqueueJobs { jobs: vec![mail(0); MAX_ENQUEUE_BATCH + 1], actor: "app".into() };
    assert!(matches!(h.store.enqueue_jobs(too_many).await, Err(StoreError::InvalidInput(_))));
    assert_eq!(h.snapshot().await, before, "nothing changed");
}

pub async fn claims_filter_jobs_by_handler_and_bucket<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let mut jobs = Vec::new();
    for (handler, bucket) in [("mail", 1u16), ("mail", 2), ("sms", 1), ("sms", 2)] {
        for n in 0..3 {
            jobs.push(EnqueueJob { bucket: Some(bucket), ..EnqueueJob::new(handler, json!({"n": n})) });
        }
    }
    h.enqueue(jobs).await;
    let claim = |agents: &[&str], buckets: Vec<u16>| ClaimDueSteps {
        instance: id("server-a"),
        limit: 100,
        agents: agents.iter().map(|a| a.to_string()).collect(),
        buckets: Some(buckets),
        domains: vec![],
        limits: vec![],
    };
    let got = h.store.claim_due_steps(claim(&["mail"], vec![1])).await.unwrap();
    assert_eq!(got.len(), 3);
    for c in &got {
        let rec = h.job(c.task_id).await;
        assert_eq!((rec.handler.as_str(), rec.bucket), ("mail", 1));
    }
    let got = h.store.claim_due_steps(claim(&["mail", "sms"], vec![2])).await.unwrap();
    assert_eq!(got.len(), 6);
    assert!(h.store.claim_due_steps(claim(&["mail"], vec![1, 2])).await.unwrap().is_empty(), "never twice");
}

pub async fn list_jobs_searches_by_handler_state_time_and_reason<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let once = RetryPolicy::Intervals { intervals: vec![secs(1)], max_failures: Some(1) };
    let give_up_once =
        |handler: &str, n: u32| EnqueueJob { retry: Some(once.clone()), ..EnqueueJob::new(handler, json!({"n": n})) };
    h.enqueue(vec![give_up_once(MAIL, 1), give_up_once(MAIL, 2), give_up_once("sms", 3)]).await;
    let t1 = h.now();
    assert_eq!(h.fail_due(MAIL, "smtp 50% refused").await, 2);
    h.advance(secs(10));
    let t2 = h.now();
    assert_eq!(h.fail_due("sms", "gateway down").await, 1);
    h.enqueue(vec![mail(4)]).await;
    let q = |f: fn(&mut JobQuery)| {
        let mut q = JobQuery::default();
        f(&mut q);
        q
    };
    assert_eq!(h.jobs(JobQuery::default()).await.len(), 4);
    assert_eq!(h.jobs(q(|q| q.handler = Some("mail".into()))).await.len(), 3);
    assert_eq!(h.jobs(q(|q| q.state = Some(JobState::GivenUp))).await.len(), 3);
    assert_eq!(h.jobs(q(|q| q.state = Some(JobState::Pending))).await.len(), 1);
    assert_eq!(h.jobs(q(|q| q.reason = Some("50%".into()))).await.len(), 2, "% is plain text");
    assert_eq!(h.jobs(q(|q| q.reason = Some("5_%".into()))).await.len(), 0, "_ is plain text");
    let mut by_time = JobQuery { from: Some(t1), to: Some(t2), ..Default::default() };
    assert_eq!(h.jobs(by_time.clone()).await.len(), 2, "the mail jobs changed at t1");
    by_time.from = Some(t2);
    by_time.to = None;
    assert_eq!(h.jobs(by_time).await.len(), 2, "the sms job and the new one changed at t2");
    let newest = h.jobs(q(|q| q.limit = 2)).await;
    assert_eq!(newest.len(), 2);
    assert!(newest[0].id > newest[1].id, "newest first");
    let page = h.jobs(JobQuery { before: Some(newest[1].id), ..Default::default() }).await;
    assert_eq!(page.len(), 2);
    h.archive_now().await;
    let hist = h.jobs(JobQuery { place: JobPlace::History, handler: Some("sms".into()), ..Default::default() }).await;
    assert_eq!(hist.len(), 1);
    assert_eq!(hist[0].last_error.as_deref(), Some("gateway down"));
    assert_eq!(h.jobs(JobQuery::default()).await.len(), 1, "only the live job is left in the hot tables");
}

pub async fn bulk_resubmit_counts_first_then_sends_given_up_jobs_back<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let once = RetryPolicy::Intervals { intervals: vec![secs(1)], max_failures: Some(1) };
    let job =
        |handler: &str, n: u32| EnqueueJob { retry: Some(once.clone()), ..EnqueueJob::new(handler, json!({"n": n})) };
    h.enqueue(vec![job(MAIL, 1)]).await;
    assert_eq!(h.fail_due(MAIL, "smtp timeout").await, 1);
    h.archive_now().await;
    h.enqueue(vec![job(MAIL, 2), job(MAIL, 3), job("sms", 4)]).await;
    let claimed = h.claim("server", &[MAIL, "sms"], 10).await;
    for c in &claimed {
        let reason = if c.input["n"] == 3 { "dns failure" } else { "smtp timeout" };
        h.reply("server", c.id, c.lease_token, ReplyResult::Failed(reason.into())).await;
    }
    let filter =
        JobQuery { handler: Some(MAIL.into()), reason: Some("smtp".into()), limit: 1000, ..Default::default() };
    let before = h.snapshot().await;
    let dry = ResubmitJobs { query: filter.clone(), dry_run: true, actor: "ann".into(), reason: "smtp fixed".into() };
    let report = h.store.resubmit_jobs(dry).await.unwrap();
    assert_eq!(report, ResubmitReport { matched: 2, resubmitted: 0 }, "one live, one archived");
    assert_eq!(h.snapshot().await, before, "a dry run changes nothing");

    let real = ResubmitJobs { query: filter, dry_run: false, actor: "ann".into(), reason: "smtp fixed".into() };
    assert_eq!(h.store.resubmit_jobs(real).await.unwrap(), ResubmitReport { matched: 2, resubmitted: 2 });
    let back = h.claim("server", &[MAIL, "sms"], 10).await;
    let mut ns: Vec<i64> = back.iter().map(|c| c.input["n"].as_i64().unwrap()).collect();
    ns.sort();
    assert_eq!(ns, [1, 2], "the two smtp jobs run again; the dns and sms ones wait for a person");
    for c in &back {
        let rec = h.job(c.task_id).await;
        assert!(!rec.archived, "the archived one is back in the hot tables");
        assert_eq!(rec.retries, 0, "a resubmitted job starts its schedule over");
        let d = h.task(c.task_id).await;
        assert!(d.events.iter().any(|e| e.kind == event_kind::TASK_OPERATED && e.actor == "ann"));
        h.complete("server", c, json!({})).await;
    }
    let left = JobQuery { state: Some(JobState::GivenUp), ..Default::default() };
    assert_eq!(h.jobs(left).await.len(), 2);
}

impl<S: Store> Harness<S> {
    /// Claims exactly one due step of `agent`.
    pub async fn claim_one_of(&self, agent: &str) -> ClaimedStep {
        let mut got = self.claim("server", &[agent], 1).await;
        assert_eq!(got.len(), 1, "one step of {agent} was due");
        got.remove(0)
    }
}

//! `shiftboss jobs ...`: retry jobs (M1-M8) from the command line: enqueue one, list the live
//! ones, show one, search the history, resubmit given-up ones (one, or in bulk by filter).

use crate::backend::Backend;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use shiftboss_core::jobs::JobState;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_engine::JobOptions;
use shiftboss_server::wire::Job;
use shiftboss_store::{JobPlace, JobQuery, ResubmitJobs};
use std::time::{Duration, SystemTime};

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Enqueue a job: run HANDLER (an agent type) with PARAMS until it succeeds, on a retry schedule.
    /// On the store, the config file's [client] settings choose the bucket; with --server, the
    /// server's.
    Enqueue {
        handler: String,
        /// The handler's parameters, a JSON object: the text itself, @FILE, or @- for standard input.
        #[arg(long, default_value = "{}", value_name = "JSON|@FILE|@-")]
        params: String,
        /// A unique key: enqueueing it again gives back the same job.
        #[arg(long)]
        key: Option<String>,
        /// Not before this long from now (`10m`, `2h`).
        #[arg(long, value_parser = humantime::parse_duration)]
        delay: Option<Duration>,
        /// Retry after each of these intervals, then give up (`1m,5m,10m`).
        #[arg(long, value_delimiter = ',', value_parser = humantime::parse_duration, conflicts_with = "max_tries")]
        intervals: Option<Vec<Duration>>,
        /// At most this many tries in all, `--every` apart.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_tries: Option<u32>,
        #[arg(long, value_parser = humantime::parse_duration, default_value = "1m", requires = "max_tries")]
        every: Duration,
        /// The complete-by window of each try.
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<Duration>,
        /// Among due jobs, claims take those of higher priority first; negative runs after the default.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
        /// The load-balance number (0-255); the config's balance strategy picks one otherwise.
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..256))]
        bucket: Option<u16>,
    },
    /// List jobs in the hot tables (live, or finished and not yet archived), newest first.
    List {
        #[command(flatten)]
        filter: Filter,
        /// Only jobs in this state: pending, running, succeeded, given-up or cancelled.
        #[arg(long)]
        state: Option<JobState>,
        #[arg(long)]
        json: bool,
    },
    /// Show one job, live or archived: its record and, while live, its events.
    Show {
        /// The job's id or key.
        job: String,
        /// Print JSON: {"job": the API's job, "events": its events as the API gives them}.
        #[arg(long)]
        json: bool,
    },
    /// Search the history (archived jobs), newest first.
    History {
        #[command(flatten)]
        filter: Filter,
        /// Only succeeded or given-up (or cancelled) jobs.
        #[arg(long)]
        state: Option<JobState>,
        #[arg(long)]
        json: bool,
    },
    /// Send given-up jobs back to run, live or archived: one by id or key, or every one that
    /// matches the filter. With --dry-run, only count them.
    Resubmit {
        /// One job's id or key; without it, the filter chooses.
        job: Option<String>,
        #[command(flatten)]
        filter: Filter,
        #[arg(long)]
        dry_run: bool,
        /// Why, for the event log.
        #[arg(long, default_value = "resubmitted by an operator")]
        comment: String,
        /// Who, for the event log (default: your login name). Not with --server, where the actor
        /// is the token's name.
        #[arg(long)]
        actor: Option<String>,
    },
}

/// What a search matches; every filter given must match.
#[derive(Debug, Args)]
pub struct Filter {
    /// The handler (agent type).
    #[arg(long)]
    handler: Option<String>,
    /// Changed (finished, for history) at or after this: an RFC 3339 time, or a duration ago (`2h`).
    #[arg(long, value_parser = parse_time)]
    since: Option<Timestamp>,
    /// Changed before this: an RFC 3339 time, or a duration ago.
    #[arg(long, value_parser = parse_time)]
    until: Option<Timestamp>,
    /// The last failure's reason contains this text.
    #[arg(long)]
    reason: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    limit: u32,
}

impl Filter {
    fn query(self, place: JobPlace, state: Option<JobState>) -> JobQuery {
        JobQuery {
            place,
            handler: self.handler,
            state,
            from: self.since,
            to: self.until,
            reason: self.reason,
            limit: self.limit,
            ..JobQuery::default()
        }
    }
}

/// An RFC 3339 time, or a duration before now.
pub(crate) fn parse_time(s: &str) -> Result<Timestamp, String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(Timestamp::from_system(t));
    }
    let ago = humantime::parse_duration(s).map_err(|_| format!("{s:?}: give an RFC 3339 time or a duration ago"))?;
    let t = SystemTime::now().checked_sub(ago).ok_or_else(|| format!("{s:?} ago is before the clock's start"))?;
    Ok(Timestamp::from_system(t))
}

impl JobsCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            JobsCommand::Enqueue {
                handler,
                params,
                key,
                delay,
                intervals,
                max_tries,
                every,
                timeout,
                priority,
                bucket,
            } => {
                let params = super::json_arg::read("--params", &params)?;
                let retry = match (intervals, max_tries) {
                    (Some(intervals), _) => Some(RetryPolicy::Intervals { intervals, max_failures: None }),
                    (None, Some(tries)) => Some(RetryPolicy::Fixed { delay: every, max_failures: tries }),
                    (None, None) => None,
                };
                let options =
                    JobOptions { delay, retry, timeout, priority, bucket, unique_key: key, ..JobOptions::default() };
                let actor = b.actor(None)?;
                let (s, job) = b.enqueue_job(&handler, params, options, actor).await?;
                let how = if s.created { "enqueued" } else { "already existed" };
                println!("job {} ({}) {how}: {handler}, bucket {}, due {}", job.id, job.key, job.bucket, job.due_at);
            }
            JobsCommand::List { filter, state, json } => {
                print_jobs(&b.list_jobs(filter.query(JobPlace::Live, state)).await?, json)?;
            }
            JobsCommand::History { filter, state, json } => {
                print_jobs(&b.list_jobs(filter.query(JobPlace::History, state)).await?, json)?;
            }
            JobsCommand::Show { job, json } => {
                let job = find(b, &job).await?;
                let events = match job.archived {
                    false => b.task_events(job_id(&job)?).await?,
                    true => Vec::new(),
                };
                if json {
                    println!("{}", serde_json::to_string_pretty(&serde_json::json!({"job": job, "events": events}))?);
                } else {
                    print_job(&job);
                    for e in &events {
                        println!("  {} {} by {} {}", e.at, e.kind, e.actor, super::event_text::detail(&e.detail));
                    }
                }
            }
            JobsCommand::Resubmit { job, filter, dry_run, comment, actor } => {
                let actor = b.actor(actor)?;
                let mut query = filter.query(JobPlace::Live, Some(JobState::GivenUp));
                if let Some(job) = job {
                    let found = find(b, &job).await?;
                    if found.state != JobState::GivenUp.as_str() {
                        bail!("job {} is {}; only a given-up job can be resubmitted", found.id, found.state);
                    }
                    query.id = Some(job_id(&found)?);
                }
                let r = b.resubmit_jobs(ResubmitJobs { query, dry_run, actor, reason: comment }).await?;
                if r.dry_run {
                    println!("{} given-up jobs match; none resubmitted (dry run)", r.matched);
                } else {
                    println!("{} given-up jobs match; {} resubmitted", r.matched, r.resubmitted);
                }
            }
        }
        Ok(())
    }
}

/// A job by id, or by key when the text is not a number (or no job has that id).
async fn find(b: &dyn Backend, job: &str) -> anyhow::Result<Job> {
    match b.job(job).await? {
        Some(j) => Ok(j),
        None => bail!("no job with id or key {job:?}"),
    }
}

/// A job's id as the store knows it (the wire's ids are opaque text; this version's are numbers).
fn job_id(job: &Job) -> anyhow::Result<TaskId> {
    shiftboss_server::wire::task_id(&job.id).with_context(|| format!("job id {:?} is not one this CLI reads", job.id))
}

fn print_jobs(jobs: &[Job], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(jobs)?);
        return Ok(());
    }
    println!(
        "{:>8}  {:<10}  {:<16}  {:<40}  {:>7}  {:<24}  LAST FAILURE",
        "ID", "STATE", "HANDLER", "KEY", "RETRIES", "DUE/FINISHED"
    );
    for j in jobs {
        println!(
            "{:>8}  {:<10}  {:<16}  {:<40}  {:>7}  {:<24}  {}",
            j.id,
            j.state,
            j.handler,
            j.key,
            j.retries,
            j.due_at,
            j.last_error.as_deref().unwrap_or("")
        );
    }
    if jobs.is_empty() {
        println!("(no jobs)");
    }
    Ok(())
}

fn print_job(j: &Job) {
    let place = if j.archived { "history" } else { "live" };
    println!("job {} ({}), handler {}: {} [{place}]", j.id, j.key, j.handler, j.state);
    println!("  created {}, due/finished {}, updated {}", j.created_at, j.due_at, j.updated_at);
    println!("  bucket {}, priority {}, tries {}, failures {}", j.bucket, j.priority, j.attempts, j.retries);
    println!("  params {}", j.params);
    if let Some(o) = &j.output {
        println!("  output {o}");
    }
    if let Some(e) = &j.last_error {
        println!("  last failure: {e}");
    }
}

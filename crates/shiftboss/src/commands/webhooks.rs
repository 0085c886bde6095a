//! `shiftboss subscriptions ...` and `shiftboss deliveries ...`: the status channels (issue 18)
//! from the command line, on the store (`--db`) or through a server (`--server`), printing the
//! API's own answers either way.

use crate::backend::Backend;
use anyhow::bail;
use clap::Subcommand;
use shiftboss_core::TaskId;
use shiftboss_server::routes::webhooks::NewSubscriptionBody;
use shiftboss_store::{DeliveryQuery, DeliveryState, MAX_DELIVERIES, Redeliver};

#[derive(Debug, Subcommand)]
pub enum SubscriptionsCommand {
    /// Make a standing subscription: every message of the chosen kinds of every task (of a
    /// workflow), from now on. Prints its secret (on standard output, alone), shown this once.
    Create {
        /// An http or https URL.
        #[arg(long)]
        url: String,
        /// Only tasks of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Message kinds, comma-separated (task.completed,task.failed,...); default all.
        #[arg(long, value_delimiter = ',')]
        messages: Option<Vec<String>>,
        /// The signing secret (whsec_ and base64); default a new random one.
        #[arg(long)]
        secret: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// List the standing subscriptions, oldest first (never their secrets).
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// List deliveries, newest first.
    List {
        /// pending, delivered or dead.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        subscription: Option<i64>,
        #[arg(long)]
        task: Option<i64>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Send deliveries again (attempts from zero): the ids given, or every dead one of a
    /// subscription.
    Redeliver {
        ids: Vec<i64>,
        #[arg(long, conflicts_with = "ids")]
        subscription: Option<i64>,
        /// Only say which would be sent.
        #[arg(long)]
        dry_run: bool,
    },
}

impl SubscriptionsCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            SubscriptionsCommand::Create { url, workflow, messages, secret, description } => {
                let body = NewSubscriptionBody { url, secret, workflow, messages, description };
                let made = b.create_subscription(body).await?;
                eprintln!("subscription {} created; its secret follows, shown only this once:", made.subscription.id);
                println!("{}", made.secret);
            }
            SubscriptionsCommand::List { json } => {
                let list = b.list_subscriptions().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&list)?);
                    return Ok(());
                }
                println!("{:<6}  {:<9}  {:<16}  {:<40}  MESSAGES", "ID", "STATE", "WORKFLOW", "URL");
                for s in &list {
                    let messages = if s.messages.len() == shiftboss_store::MessageKind::ALL.len() {
                        "all".to_owned()
                    } else {
                        s.messages.join(",")
                    };
                    let workflow = s.workflow.as_deref().unwrap_or("*");
                    println!("{:<6}  {:<9}  {:<16}  {:<40}  {messages}", s.id, s.state, workflow, s.url);
                    if let Some(r) = &s.disabled_reason {
                        println!("        disabled: {r}");
                    }
                }
            }
        }
        Ok(())
    }
}

impl DeliveriesCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            DeliveriesCommand::List { state, subscription, task, limit, json } => {
                if !(1..=MAX_DELIVERIES).contains(&limit) {
                    bail!("--limit: 1 to {MAX_DELIVERIES}");
                }
                let state = match state.as_deref() {
                    None => None,
                    Some(s) => Some(
                        DeliveryState::parse(s)
                            .ok_or_else(|| anyhow::anyhow!("--state: {s:?} is not pending, delivered or dead"))?,
                    ),
                };
                let q = DeliveryQuery { state, subscription, task: task.map(TaskId), before: None, limit };
                let list = b.list_deliveries(q).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&list)?);
                    return Ok(());
                }
                println!(
                    "{:<8}  {:<5}  {:<9}  {:<18}  {:>4}  {:>8}  {:<24}  LAST ERROR",
                    "ID", "SUB", "STATE", "MESSAGE", "SEQ", "ATTEMPTS", "TASK"
                );
                for d in &list {
                    let task = format!("{} ({})", d.task_id, d.key);
                    let err = d.last_error.as_deref().unwrap_or("-");
                    println!(
                        "{:<8}  {:<5}  {:<9}  {:<18}  {:>4}  {:>8}  {:<24}  {err}",
                        d.id, d.subscription_id, d.state, d.message, d.seq, d.attempts, task
                    );
                }
            }
            DeliveriesCommand::Redeliver { ids, subscription, dry_run } => {
                if ids.is_empty() == subscription.is_none() {
                    bail!("name delivery ids, or --subscription ID for every dead delivery of it");
                }
                let r = b.redeliver(Redeliver { ids, subscription, dry_run }).await?;
                let verb = if dry_run { "would be sent again" } else { "sent again" };
                println!("{} deliveries {verb}: {}", r.ids.len(), r.ids.join(", "));
            }
        }
        Ok(())
    }
}

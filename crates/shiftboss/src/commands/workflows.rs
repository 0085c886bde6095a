//! `shiftboss workflows ...`: register definitions from files (ours in JSON or YAML, or
//! Conductor's WorkflowDef JSON), and look at what is registered.

use crate::backend::Backend;
use anyhow::{Context, bail};
use clap::Subcommand;
use shiftboss_conductor as conductor;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_server::wire::Workflow;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// Check a definition file and register it. JSON or YAML in shiftboss's format, or Conductor
    /// WorkflowDef JSON (with its TaskDefs given by --task-defs). Nothing is registered unless the
    /// whole definition is valid. With --server, the file is read here and the server checks it
    /// again (its agents must exist there), dry run included.
    Apply {
        file: PathBuf,
        /// Conductor TaskDef JSON files (one TaskDef or a list per file): retries and timeouts.
        #[arg(long = "task-defs")]
        task_defs: Vec<PathBuf>,
        /// Check only: print what would be registered, and register nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// List the registered definitions.
    List,
    /// Print a registered definition as JSON (the newest version unless --version is given).
    Show {
        name: String,
        #[arg(long)]
        version: Option<u32>,
    },
}

impl WorkflowsCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            WorkflowsCommand::Apply { file, task_defs, dry_run } => {
                // Read and checked here, whichever way it goes: a Conductor definition is
                // imported (with its TaskDefs, and notes) before anything is sent or written.
                let (def, inline) = read_definition(&file, &task_defs)?;
                // Sub-workflows a Conductor definition gives inline go first: it names them.
                for sub in &inline {
                    let r = b.register_workflow(sub, dry_run).await?;
                    println!("workflow {} v{} (given inline): {}", r.name, r.version, r.outcome);
                }
                let r = b.register_workflow(&def, dry_run).await?;
                for note in &r.notes {
                    eprintln!("note: {note}");
                }
                if dry_run {
                    // In the definition's own field order, as `workflows show` prints it.
                    match serde_json::from_value::<WorkflowDef>(r.definition.clone()) {
                        Ok(def) => println!("{}", serde_json::to_string_pretty(&def)?),
                        Err(_) => println!("{}", serde_json::to_string_pretty(&r.definition)?),
                    }
                    println!("{}: valid ({} v{}); nothing registered (--dry-run)", file.display(), r.name, r.version);
                    return Ok(());
                }
                let what = match r.outcome.as_str() {
                    "created" => "registered",
                    "unchanged" => "already registered, unchanged",
                    other => other,
                };
                println!("workflow {} v{}: {what}", r.name, r.version);
            }
            WorkflowsCommand::List => print_list(&b.list_workflows().await?),
            WorkflowsCommand::Show { name, version } => {
                let Some(def) = b.get_workflow(&name, version).await? else {
                    bail!("no workflow {name:?}{}", version.map(|v| format!(" version {v}")).unwrap_or_default());
                };
                println!("{}", serde_json::to_string_pretty(&def)?);
            }
        }
        Ok(())
    }
}

fn print_list(all: &[Workflow]) {
    println!("{:<24}  {:>7}  {:<24}  DESCRIPTION", "NAME", "VERSION", "REGISTERED");
    for w in all {
        println!("{:<24}  {:>7}  {:<24}  {}", w.name, w.version, w.created_at, w.description.as_deref().unwrap_or(""));
    }
    if all.is_empty() {
        println!("(no workflows)");
    }
}

/// Reads and checks a definition file, in whichever format it is; with the definitions a
/// Conductor one gives inline for its sub-workflows, to register first.
pub fn read_definition(file: &PathBuf, task_defs: &[PathBuf]) -> anyhow::Result<(WorkflowDef, Vec<WorkflowDef>)> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    if text.trim().is_empty() {
        // Else the reader sees a document of nothing (YAML's null) and names a type instead.
        bail!("{}: the file is empty", file.display());
    }
    if conductor::looks_like_conductor(&text) {
        let mut defs = Vec::new();
        for f in task_defs {
            defs.push(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?);
        }
        let refs: Vec<&str> = defs.iter().map(String::as_str).collect();
        let import = conductor::from_conductor_with_tasks(&text, &refs)
            .with_context(|| format!("{}: not a definition shiftboss can run", file.display()))?;
        for note in &import.notes {
            eprintln!("note: {note}");
        }
        for l in &import.limits {
            eprintln!(
                "note: agent {:?} had limits in Conductor; set them per agent in the serve config: {l:?}",
                l.agent
            );
        }
        return Ok((import.workflow, import.sub_workflows));
    }
    if !task_defs.is_empty() {
        bail!("--task-defs applies to Conductor definitions only; {} is not one", file.display());
    }
    let def = WorkflowDef::from_text(&text).with_context(|| format!("{}: invalid definition", file.display()))?;
    Ok((def, Vec::new()))
}

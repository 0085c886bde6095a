//! Submissions through the HTTP API, as an application in another language makes them: N tasks,
//! each `POST /v1/tasks` from one of `--clients` concurrent clients over keep-alive connections.
//! Prints submissions/s and the call's latency (p50, p99). The serve process (its store, its
//! roles) is the caller's: `bench/api` starts one with `--roles api` and reads its memory.

use super::stats::{round3, summary};
use clap::Args;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ApiArgs {
    /// The API's base URL, such as http://127.0.0.1:8080.
    #[arg(long)]
    url: String,
    /// A file holding a token with the submit and admin scopes (the first admin token's file).
    #[arg(long)]
    token_file: std::path::PathBuf,
    #[arg(long, default_value_t = 20_000)]
    tasks: u32,
    /// Concurrent clients, each with one keep-alive connection and one request at a time.
    #[arg(long, default_value_t = 64)]
    clients: u32,
}

pub async fn run(a: ApiArgs) -> anyhow::Result<Value> {
    let token = std::fs::read_to_string(&a.token_file)?.trim().to_owned();
    // reqwest's rustls has no provider of its own in this build; plain HTTP needs none, but the
    // client is built with TLS support all the same.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client =
        |n: usize| reqwest::Client::builder().pool_max_idle_per_host(n).timeout(Duration::from_secs(30)).build();
    let setup = client(1)?;
    let flow = json!({"name": "bench-api", "steps": [
        {"name": "call", "agent": "http", "config": {"url": "http://192.0.2.1/never-called"}}]});
    let res = setup.post(format!("{}/v1/workflows", a.url)).bearer_auth(&token).json(&flow).send().await?;
    anyhow::ensure!(res.status().is_success(), "registering the workflow: {} {}", res.status(), res.text().await?);
    let run = super::noop::run_id();
    let clients = a.clients.max(1);
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(clients as usize);
    for c in 0..clients {
        let (http, url, token, run) = (client(1)?, format!("{}/v1/tasks", a.url), token.clone(), run.clone());
        let mine: Vec<u32> = (1..=a.tasks).filter(|n| n % clients == c).collect();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(mine.len());
            for n in mine {
                let body = json!({"key": format!("{run}-{n}"), "workflow": "bench-api", "input": {"n": n}});
                let at = Instant::now();
                let res = http.post(&url).bearer_auth(&token).json(&body).send().await?;
                let status = res.status();
                let _ = res.bytes().await?;
                anyhow::ensure!(status.as_u16() == 201, "submission {n}: {status}");
                latencies.push(at.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(a.tasks as usize);
    for h in handles {
        latencies.extend(h.await??);
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(json!({
        "workload": "api_submit", "tasks": a.tasks, "clients": clients,
        "submit_s": round3(secs), "submissions_per_s": round3(f64::from(a.tasks) / secs),
        "latency": summary(latencies),
    }))
}

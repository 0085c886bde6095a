//! A jq worker process (see `shiftboss_scripts::jq::worker`): for this crate's tests and bench,
//! and for embedders that do not make their own binary a worker.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(shiftboss_scripts::jq::worker::worker_main(&args));
}

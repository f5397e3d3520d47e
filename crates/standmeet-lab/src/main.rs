//! The `standmeet-lab` binary: the fault suite and the benchmarks (see `src/lib.rs`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use standmeet::config::Settings;

#[derive(Parser)]
#[command(
    name = "standmeet-lab",
    version,
    about = "StandMeet's lab: the fault suite and the benchmarks, each on a fresh private PostgreSQL cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark the job engine, the waiters, the Tasks panel and the corpus search on a
    /// fresh private PostgreSQL cluster.
    Bench {
        /// A small run of each measure (for CI), instead of the full one.
        #[arg(long)]
        quick: bool,
        /// Only one subject: jobs, scale, memory, panel, corpus, events or vault.
        #[arg(long)]
        only: Option<String>,
        /// Instead, StandMeet beside a peer queue in one run: `graphile` (graphile-worker
        /// 0.17.3, installed with npm into ~/.cache/standmeet on first use).
        #[arg(long)]
        peer: Option<String>,
        /// With --peer: run the comparison this many times, alternating the two
        /// systems, and print each run's figures and the median of the runs' medians.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=50))]
        runs: u16,
        /// Export this process's traces (every attempt a span) to a collector on
        /// loopback, a process of its own, and say what it received: what trace export
        /// costs, against a run without it.
        #[arg(long)]
        traces: bool,
    },
    /// Fault-test StandMeet on a fresh private PostgreSQL cluster: kill -9 workers,
    /// restart PostgreSQL, a misbehaving mail server, bad input.
    Chaos {
        /// The full size of each scenario instead of the quick one (CI runs the quick one).
        #[arg(long)]
        full: bool,
        /// Only one scenario (see `standmeet_lab::chaos::SCENARIOS`), e.g. kill9,
        /// pg-restart, approvals, bad-input, poison, freeze or soak.
        #[arg(long)]
        only: Option<String>,
    },
    /// A job worker for `standmeet-lab chaos` to kill.
    #[command(hide = true)]
    ChaosWorker,
    /// A job worker for `standmeet-lab bench` (the drain with several processes).
    #[command(hide = true)]
    BenchWorker,
    /// The trace collector of `bench --traces` (hidden).
    #[command(hide = true, name = "otlp-sink")]
    OtlpSink,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("standmeet-lab: {err}");
            return ExitCode::from(2);
        }
    };
    // `bench --traces`: a collector on loopback, in a process of its own, started
    // before anything else so that this process exports to it from the start. (With an
    // OTLP endpoint in the environment, the lab's jobs are traced as the server's are.)
    let sink = match &cli.command {
        Command::Bench { traces: true, .. } => match standmeet_lab::bench::sink::Sink::start() {
            Ok(sink) => Some(sink),
            Err(err) => {
                eprintln!(
                    "standmeet-lab: {}",
                    standmeet::causes::error_chain(err.as_ref())
                );
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let traces = match standmeet::telemetry::init_exporting_to(
        &settings.log_filter,
        settings.log_format,
        sink.as_ref().map(|sink| sink.endpoint.as_str()),
    ) {
        Ok(traces) => traces,
        Err(err) => {
            eprintln!(
                "standmeet-lab: {}",
                standmeet::causes::error_chain(err.as_ref())
            );
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("standmeet-lab: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Bench {
                quick,
                only,
                peer,
                runs,
                traces: _,
            } => {
                standmeet_lab::bench::run(standmeet_lab::bench::BenchOptions {
                    quick,
                    only,
                    peer,
                    runs: runs.into(),
                })
                .await
            }
            Command::Chaos { full, only } => {
                standmeet_lab::chaos::run(standmeet_lab::chaos::ChaosOptions { full, only }).await
            }
            Command::BenchWorker => standmeet_lab::bench::worker_process().await,
            Command::ChaosWorker => standmeet_lab::chaos::worker_main().await,
            Command::OtlpSink => standmeet_lab::bench::sink::sink_main().await,
        }
    });
    drop(runtime);
    // Shutting down sends what is still queued, so the collector's count is whole.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    if let Some(sink) = &sink {
        match sink.received() {
            Ok((requests, spans, bytes)) => println!(
                "trace export: the collector received {spans} spans in {requests} requests ({} KiB); {} spans dropped",
                bytes / 1024,
                standmeet::telemetry::otel::spans_dropped()
            ),
            Err(err) => println!("trace export: cannot ask the collector: {err}"),
        }
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "standmeet-lab: {}",
                standmeet::causes::error_chain(err.as_ref())
            );
            ExitCode::FAILURE
        }
    }
}

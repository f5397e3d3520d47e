//! The `standmeet` binary: read the settings, start tracing, run. Everything else lives
//! in the library (see `src/lib.rs` for the tour).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use standmeet::config::Settings;
use standmeet::db::PrivateCluster;

#[derive(Parser)]
#[command(
    name = "standmeet",
    version,
    about = "StandMeet: an owner's front desk on the web"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve StandMeet (the default): web pages, server functions and /healthz.
    Serve,
    /// Apply the database migrations and exit (the server also applies them at start).
    Migrate,
    /// Check every setting without connecting anywhere: exit 0, or 2 with a message
    /// naming the bad setting.
    CheckConfig,
    /// Manage admins.
    Admin {
        #[command(subcommand)]
        action: AdminAction,
    },
    /// Manage the private PostgreSQL cluster under $STANDMEET_DATA_DIR/pg.
    Postgres {
        #[command(subcommand)]
        action: PostgresAction,
    },
}

#[derive(Subcommand)]
enum AdminAction {
    /// Create an admin with the password read as one line from standard input (8
    /// characters or more), or with --generate one made here and printed once.
    Create {
        /// The admin's email address.
        email: String,
        /// Make up a password and print it, instead of reading one.
        #[arg(long)]
        generate: bool,
    },
    /// Set an admin's password, read as one line from standard input, and end every
    /// session of that admin.
    SetPassword {
        /// The admin's email address.
        email: String,
    },
}

#[derive(Subcommand)]
enum PostgresAction {
    /// Start the private cluster (or find it running), leave it running, and print a
    /// URL for one of its databases.
    Start {
        /// The database the printed URL names.
        #[arg(long, default_value = standmeet::db::PRIVATE_DATABASE)]
        database: String,
    },
    /// Stop the private cluster.
    Stop,
}

/// How long the process waits for the runtime's threads once its work is done. A thread
/// that does not come back (stuck in a blocking call) is left behind, so that a copy
/// told to stop ends, instead of waiting for a kill.
const THREADS_AT_THE_END: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `work` on a multi-threaded runtime, then shuts the runtime down: tasks still
/// running are dropped, and its threads get [`THREADS_AT_THE_END`] to finish.
fn run_to_end<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(work);
    runtime.shutdown_timeout(THREADS_AT_THE_END);
    outcome
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command()
        .after_help(standmeet::config::settings_help())
        .get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("standmeet: {err}");
            return ExitCode::from(2);
        }
    };
    let traces = match standmeet::telemetry::init(&settings.log_filter, settings.log_format) {
        Ok(traces) => traces,
        Err(err) => {
            eprintln!(
                "standmeet: {}",
                standmeet::causes::error_chain(err.as_ref())
            );
            return ExitCode::from(2);
        }
    };

    let outcome = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => run_to_end(standmeet::startup::run(settings)),
        Command::Migrate => run_to_end(standmeet::startup::migrate_only(settings)),
        Command::Admin {
            action: AdminAction::SetPassword { email },
        } => read_password().and_then(|password| {
            run_to_end(standmeet::startup::set_admin_password(
                settings, &email, &password,
            ))
        }),
        Command::Admin {
            action: AdminAction::Create { email, generate },
        } => (if generate {
            Ok(None)
        } else {
            read_password().map(Some)
        })
        .and_then(|password| {
            run_to_end(standmeet::startup::create_admin(settings, &email, password))
        }),
        Command::CheckConfig => match standmeet::startup::check_config(settings) {
            Ok(said) => {
                println!("standmeet: every setting is valid");
                for line in said {
                    println!("standmeet: {line}");
                }
                Ok(())
            }
            Err(err) => {
                eprintln!(
                    "standmeet: {}",
                    standmeet::causes::error_chain(err.as_ref())
                );
                return ExitCode::from(2);
            }
        },
        Command::Postgres { action } => postgres(action, &settings),
    };
    // What is queued for the collector goes out before the process ends.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "standmeet: {}",
                standmeet::causes::error_chain(err.as_ref())
            );
            ExitCode::FAILURE
        }
    }
}

/// The password: asked for at the terminal without echo when standard input is one,
/// else one line from standard input (a pipe, a file), without its line end.
fn read_password() -> anyhow::Result<String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return Ok(rpassword::prompt_password("Password (not shown): ")?);
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

fn postgres(action: PostgresAction, settings: &Settings) -> anyhow::Result<()> {
    if settings.database_url.is_some() {
        anyhow::bail!(
            "DATABASE_URL is set, so StandMeet uses that server and has no private cluster to manage"
        );
    }
    let dir = settings.private_cluster_dir();
    match action {
        PostgresAction::Start { database } => {
            let cluster = PrivateCluster::start(&dir)?;
            println!("{}", cluster.database_url(&database));
            cluster.leave_running();
        }
        PostgresAction::Stop => {
            if !PrivateCluster::stop_if_running(&dir)? {
                eprintln!(
                    "standmeet: the private cluster in {} is not running",
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

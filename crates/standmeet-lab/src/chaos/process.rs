//! The children of a chaos run: this same binary started as `chaos-worker`, or the
//! server (`standmeet serve`, see [`crate::server_binary`]),
//! with its settings in the environment and its output in a log file in the scratch
//! directory (where the scenario counts panics afterwards).
//!
//! Children are killed when their handle is dropped (`kill_on_drop`), so every exit
//! path of a scenario, an early `?` included, takes its children with it.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::WORKER_SLOTS_VAR;
use standmeet::db::private_cluster::{free_loopback_port, random_token};

/// One child process.
pub(crate) struct ChildProcess {
    role: &'static str,
    child: Child,
    pub log: PathBuf,
}

impl ChildProcess {
    /// Starts `<program> <subcommand>` with `env` on top of ours, minus any StandMeet
    /// setting of ours (the caller's DATABASE_URL must not steer a child elsewhere).
    /// Its stdout and stderr are appended to `log`.
    pub fn spawn(
        role: &'static str,
        program: &Path,
        subcommand: &str,
        env: &[(&str, String)],
        log: &Path,
    ) -> anyhow::Result<ChildProcess> {
        ChildProcess::spawn_wrapped(role, &[], program, subcommand, env, log)
    }

    /// [`ChildProcess::spawn`] through `wrapper` (a command that ends by `exec`ing
    /// `"$0" <subcommand>`: the same process, so signals reach the program), such as
    /// `unshare` setting a limit of the child's own.
    pub fn spawn_wrapped(
        role: &'static str,
        wrapper: &[String],
        program: &Path,
        subcommand: &str,
        env: &[(&str, String)],
        log: &Path,
    ) -> anyhow::Result<ChildProcess> {
        let mut cmd = match wrapper.split_first() {
            None => {
                let mut cmd = Command::new(program);
                cmd.arg(subcommand);
                cmd
            }
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg(program).arg(subcommand);
                cmd
            }
        };
        for (name, _) in std::env::vars_os() {
            let ours = name.to_str().is_some_and(|name| {
                name.starts_with("STANDMEET_")
                    || name == "DATABASE_URL"
                    || name == "LEPTOS_SITE_ADDR"
            });
            if ours {
                cmd.env_remove(&name);
            }
        }
        cmd.env("RUST_LOG", "warn");
        for (name, value) in env {
            cmd.env(*name, value);
        }
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(output.try_clone()?))
            .stderr(Stdio::from(output))
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start the {role}"))?;
        Ok(ChildProcess {
            role,
            child,
            log: log.to_path_buf(),
        })
    }

    /// `kill -9`, then reaps it.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            // It may have died on its own a moment ago; then there is nothing to kill.
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        self.child
            .wait()
            .await
            .with_context(|| format!("cannot reap the {}", self.role))?;
        Ok(())
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGSTOP: the process freezes where it is, its connections open and silent (as a
    /// paused VM or a process stuck in swap would).
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// SIGCONT: a frozen process goes on where it stopped.
    pub fn thaw(&self) -> anyhow::Result<()> {
        self.signal(Signal::SIGCONT)
    }

    fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let pid = self
            .child
            .id()
            .with_context(|| format!("the {} is not running", self.role))?;
        kill(Pid::from_raw(pid as i32), signal)
            .with_context(|| format!("cannot send {signal} to the {}", self.role))
    }

    /// SIGTERM, and up to `grace` for a clean exit; SIGKILL after that. Answers the
    /// exit status of a clean exit.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.kill().await;
                None
            }
        }
    }

    /// Its exit status if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// A size line of process `pid`'s `/proc/<pid>/status` (`VmRSS`, the resident memory
/// now; `VmHWM`, its peak), in KiB; `None` when it cannot be read.
pub(crate) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        line.strip_prefix(field)?
            .strip_prefix(':')?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    })
}

/// How many panics a log holds (the default panic hook writes "panicked at").
pub(crate) fn panics_in(log: &Path) -> usize {
    std::fs::read(log)
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .matches("panicked at")
                .count()
        })
        .unwrap_or(0)
}

/// The last `lines` lines of a log, for an error message.
pub(crate) fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read(log)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A chaos worker on `database_url`, running `slots` jobs at once, with a short lease
/// so that the jobs of a killed worker are rescued within a second or two, and a short
/// retry backoff so that retries happen within the run.
pub(crate) fn spawn_worker(
    database_url: &str,
    slots: usize,
    log: &Path,
) -> anyhow::Result<ChildProcess> {
    spawn_worker_with(database_url, slots, log, &[])
}

/// [`spawn_worker`] with more settings (`extra` wins over the defaults).
pub(crate) fn spawn_worker_with(
    database_url: &str,
    slots: usize,
    log: &Path,
    extra: &[(&str, String)],
) -> anyhow::Result<ChildProcess> {
    let mut env = vec![
        ("DATABASE_URL", database_url.to_string()),
        ("STANDMEET_JOB_LEASE_MS", "1000".into()),
        ("STANDMEET_RETRY_BASE_MS", "50".into()),
        (WORKER_SLOTS_VAR, slots.to_string()),
    ];
    for (name, value) in extra {
        env.retain(|(known, _)| known != name);
        env.push((name, value.clone()));
    }
    let lab = std::env::current_exe().context("cannot find the standmeet-lab binary")?;
    ChildProcess::spawn("chaos worker", &lab, "chaos-worker", &env, log)
}

/// A `standmeet serve` child and what a client needs to talk to it.
pub(crate) struct ServerChild {
    pub process: ChildProcess,
    pub base_url: String,
    pub mcp_token: String,
    pub admin_email: String,
    pub admin_password: String,
    /// The settings it was started with (every StandMeet setting it has: see
    /// [`ChildProcess::spawn`]).
    pub settings: Vec<(String, String)>,
}

impl ServerChild {
    /// The most PostgreSQL connections this server may hold, by its settings (what
    /// `standmeet check-config` prints for them).
    pub fn connection_budget(&self) -> anyhow::Result<standmeet::startup::ConnectionBudget> {
        let settings = standmeet::config::Settings::from_lookup(|name| {
            self.settings
                .iter()
                .find(|(known, _)| known == name)
                .map(|(_, value)| value.clone())
        })?;
        standmeet::startup::ConnectionBudget::for_settings(&settings)
    }
}

/// Starts `standmeet serve` on a free port against `database_url`, mailing through the
/// SMTP peer on `smtp_port`, with limits opened up so that only what the scenario does
/// decides the answers; waits until `/healthz` says it is up.
pub(crate) async fn start_server(
    database_url: &str,
    smtp_port: u16,
    log: &Path,
) -> anyhow::Result<ServerChild> {
    start_server_with(database_url, smtp_port, log, &[]).await
}

/// [`start_server`] with more settings (`extra` wins over the scenario defaults).
pub(crate) async fn start_server_with(
    database_url: &str,
    smtp_port: u16,
    log: &Path,
    extra: &[(&str, String)],
) -> anyhow::Result<ServerChild> {
    start_server_as(
        database_url,
        smtp_port,
        log,
        random_token(32),
        random_token(24),
        extra,
        &[],
    )
    .await
}

/// [`start_server_with`] through `wrapper` (see [`ChildProcess::spawn_wrapped`]).
pub(crate) async fn start_server_wrapped(
    database_url: &str,
    smtp_port: u16,
    log: &Path,
    extra: &[(&str, String)],
    wrapper: &[String],
) -> anyhow::Result<ServerChild> {
    start_server_as(
        database_url,
        smtp_port,
        log,
        random_token(32),
        random_token(24),
        extra,
        wrapper,
    )
    .await
}

/// Another copy of `first` on the same database: the same MCP token and admin (the
/// admin is made once, by the first copy to start).
pub(crate) async fn start_another_copy(
    first: &ServerChild,
    database_url: &str,
    smtp_port: u16,
    log: &Path,
) -> anyhow::Result<ServerChild> {
    start_another_copy_with(first, database_url, smtp_port, log, &[]).await
}

/// [`start_another_copy`] with more settings.
pub(crate) async fn start_another_copy_with(
    first: &ServerChild,
    database_url: &str,
    smtp_port: u16,
    log: &Path,
    extra: &[(&str, String)],
) -> anyhow::Result<ServerChild> {
    start_server_as(
        database_url,
        smtp_port,
        log,
        first.mcp_token.clone(),
        first.admin_password.clone(),
        extra,
        &[],
    )
    .await
}

impl ServerChild {
    /// Where it listens (`LEPTOS_SITE_ADDR`).
    pub fn address(&self) -> &str {
        self.base_url
            .strip_prefix("http://")
            .unwrap_or(&self.base_url)
    }

    /// Stops it with SIGTERM (answers how it exited: `None` when it had to be killed
    /// after `grace`) and starts it again with the same settings, on the same address,
    /// its output appended to the same log; answers once `/healthz` says it is up.
    pub async fn restart(&mut self, grace: Duration) -> anyhow::Result<Option<ExitStatus>> {
        let stopped = self.process.stop(grace).await;
        let env: Vec<(&str, String)> = self
            .settings
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        let log = self.process.log.clone();
        self.process =
            ChildProcess::spawn("server", &crate::server_binary()?, "serve", &env, &log)?;
        wait_until_healthy(&mut self.process, &self.base_url).await?;
        Ok(stopped)
    }
}

async fn start_server_as(
    database_url: &str,
    smtp_port: u16,
    log: &Path,
    mcp_token: String,
    admin_password: String,
    extra: &[(&str, String)],
    wrapper: &[String],
) -> anyhow::Result<ServerChild> {
    let port = free_loopback_port()?;
    let admin_email = "chaos-admin@chaos.example.com".to_string();
    let mut env = vec![
        ("DATABASE_URL", database_url.to_string()),
        ("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}")),
        ("STANDMEET_MAIL", format!("smtp://127.0.0.1:{smtp_port}")),
        ("STANDMEET_OWNER_EMAIL", "owner@chaos.example.com".into()),
        ("STANDMEET_MCP_TOKEN", mcp_token.clone()),
        ("STANDMEET_ADMIN_EMAIL", admin_email.clone()),
        ("STANDMEET_ADMIN_PASSWORD", admin_password.clone()),
        // 10,000 is the most the settings accept.
        ("STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE", "10000".into()),
        ("STANDMEET_MAIL_PER_RECIPIENT_PER_HOUR", "10000".into()),
        ("STANDMEET_RETRY_BASE_MS", "50".into()),
        // Nobody kills the server: a long lease keeps a busy machine from rescuing
        // (and sending twice) mails that are merely slow.
        ("STANDMEET_JOB_LEASE_MS", "5000".into()),
    ];
    for (name, value) in extra {
        env.retain(|(known, _)| known != name);
        env.push((name, value.clone()));
    }
    let mut process = ChildProcess::spawn_wrapped(
        "server",
        wrapper,
        &crate::server_binary()?,
        "serve",
        &env,
        log,
    )?;
    let base_url = format!("http://127.0.0.1:{port}");
    wait_until_healthy(&mut process, &base_url).await?;
    Ok(ServerChild {
        process,
        base_url,
        mcp_token,
        admin_email,
        admin_password,
        settings: env
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect(),
    })
}

/// Waits for `/healthz` to answer 200, failing early when the server exits.
pub(crate) async fn wait_until_healthy(
    process: &mut ChildProcess,
    base_url: &str,
) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = process.exited() {
            bail!(
                "the server exited ({status}):\n{}",
                log_tail(&process.log, 20)
            );
        }
        if let Ok(reply) = client.get(format!("{base_url}/healthz")).send().await
            && reply.status() == reqwest::StatusCode::OK
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the server did not become healthy within 90 s:\n{}",
                log_tail(&process.log, 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

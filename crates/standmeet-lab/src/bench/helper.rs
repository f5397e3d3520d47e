//! Helper processes of a measure (graphile-worker's workers, StandMeet's bench
//! workers): each says "ready" on its standard output once set up, starts on a "go"
//! line, and stops when its standard input closes. So their start-up is never timed,
//! and they all start at one moment.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// The lines a helper prints after "ready".
pub type Output = Lines<BufReader<ChildStdout>>;

/// Starts `command` as a helper called `what` and waits (up to 30 s) for its "ready".
pub async fn start(command: &mut Command, what: &str) -> anyhow::Result<(Child, Output)> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .with_context(|| format!("{what} did not get ready within 30 s"))??;
    if ready.as_deref() != Some("ready") {
        bail!("{what} said {ready:?} instead of \"ready\"");
    }
    Ok((child, lines))
}

/// Tells every helper to start.
pub async fn go(helpers: &mut [Child]) -> anyhow::Result<()> {
    for helper in helpers {
        let stdin = helper.stdin.as_mut().expect("piped");
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
    }
    Ok(())
}

/// Closes every helper's input and waits (up to 30 s each) until it has stopped well.
pub async fn stop(helpers: Vec<Child>, what: &str) -> anyhow::Result<()> {
    for mut helper in helpers {
        drop(helper.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(30), helper.wait())
            .await
            .with_context(|| format!("{what} did not stop within 30 s"))??;
        if !status.success() {
            bail!("{what} failed ({status})");
        }
    }
    Ok(())
}

//! The private PostgreSQL cluster StandMeet starts and owns when `DATABASE_URL` is unset.
//!
//! Layout under `<STANDMEET_DATA_DIR>/pg`:
//!
//! ```text
//! data/           PGDATA, made by initdb on first start and kept across restarts
//! password        the superuser's generated password (mode 0600)
//! database-url    a ready-made URL of StandMeet's own database, for psql (mode 0600):
//!                 psql "$(cat .standmeet/pg/database-url)"
//! postgres.log    the server's own log
//! ```
//!
//! The cluster listens on 127.0.0.1 only, on a free port picked at each start, with
//! password (SCRAM) authentication, so other users of the machine cannot walk in. It
//! has no Unix socket: socket paths are limited to ~100 bytes and data directories are
//! often deeper than that.
//!
//! initdb refuses to run as root, so when StandMeet runs as root the PostgreSQL tools
//! run as the `postgres` user (`runuser -u postgres`), which then owns `pg/`.
//!
//! Whoever starts the cluster stops it: [`PrivateCluster::stop`] on a clean shutdown,
//! and `Drop` as a last resort (a panic, an early error). A cluster that was already
//! running when we came (another copy of StandMeet, or `standmeet postgres start`) is
//! used and left running.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{Context, anyhow, bail};

/// The Debian package that brings `initdb` and `pg_ctl`.
pub const DEBIAN_PACKAGE: &str = "postgresql";

/// The superuser initdb creates, and the database StandMeet keeps its data in.
const SUPERUSER: &str = "postgres";

/// A running private cluster.
#[derive(Debug)]
pub struct PrivateCluster {
    root: PathBuf,
    bin_dir: PathBuf,
    /// `Some("postgres")` when we are root and the tools must run as that user.
    run_as: Option<String>,
    port: u16,
    password: String,
    /// True when this process started the postmaster and so must stop it.
    owned: bool,
    stopped: bool,
}

impl PrivateCluster {
    /// Starts the cluster under `root` (`<STANDMEET_DATA_DIR>/pg`), creating it on first
    /// use, or attaches to it when it is already running.
    pub fn start(root: &Path) -> anyhow::Result<Self> {
        let mut cluster = Self::open(root)?;
        if !cluster.data_dir().join("PG_VERSION").exists() {
            cluster.init()?;
        }
        if let Some(port) = cluster.running_port()? {
            tracing::info!(port, dir = %cluster.root.display(), "using the private PostgreSQL cluster that is already running");
            cluster.port = port;
        } else {
            cluster.start_postmaster()?;
            cluster.owned = true;
        }
        cluster.write_database_url_file()?;
        Ok(cluster)
    }

    /// Stops the cluster under `root` if it is running, whoever started it
    /// (`standmeet postgres stop`). Answers whether there was one to stop.
    pub fn stop_if_running(root: &Path) -> anyhow::Result<bool> {
        let mut cluster = Self::open(root)?;
        if !cluster.data_dir().join("PG_VERSION").exists() {
            return Ok(false);
        }
        match cluster.running_port()? {
            Some(port) => {
                cluster.port = port;
                cluster.owned = true;
                cluster.stop_inner()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The handle for `root`, with its directory ready and its password known; starts
    /// nothing.
    fn open(root: &Path) -> anyhow::Result<Self> {
        let bin_dir = find_bin_dir()?;
        let run_as = if nix::unistd::Uid::effective().is_root() {
            Some(SUPERUSER.to_string())
        } else {
            None
        };
        fs::create_dir_all(root).with_context(|| {
            format!(
                "cannot create the private cluster directory {}",
                root.display()
            )
        })?;
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", root.display()))?;

        let mut cluster = PrivateCluster {
            root,
            bin_dir,
            run_as,
            port: 0,
            password: String::new(),
            owned: false,
            stopped: false,
        };
        cluster.prepare_ownership()?;
        cluster.password = cluster.read_or_create_password()?;
        Ok(cluster)
    }

    /// A URL for `database` in this cluster, as the superuser.
    pub fn database_url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// The port the postmaster listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's process id (the first line of its `postmaster.pid`): the
    /// benchmarks read the CPU time of it and its children from `/proc`.
    pub fn postmaster_pid(&self) -> anyhow::Result<u32> {
        let file = self.data_dir().join("postmaster.pid");
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        text.lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .with_context(|| format!("{} does not start with a process id", file.display()))
    }

    /// Whether this process started the postmaster (and will stop it).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// Stops the postmaster if this process started it. Waits for a clean shutdown.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.stop_inner()
    }

    /// Restarts the postmaster on the same port (connections are cut; clients that
    /// reconnect find it again). Used to test how StandMeet rides out a restart.
    pub fn restart(&self) -> anyhow::Result<()> {
        let data = self.data_dir();
        let log = self.log_file();
        let port = self.port;
        let output = self.pg_tool("pg_ctl", |cmd| {
            cmd.arg("restart")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-m", "fast", "-w", "-t", "60", "-o"])
                .arg(format!("-p {port}"));
        })?;
        if !output.status.success() {
            bail!("pg_ctl restart failed: {}", describe_output(&output));
        }
        Ok(())
    }

    /// A streaming standby of this cluster under `root` (`pg_basebackup -R`), started:
    /// it replays this cluster's WAL until promoted ([`PrivateCluster::promote`]).
    /// Made for the failover scenario of `standmeet-lab chaos`; the standby shares this
    /// cluster's superuser and password.
    pub fn start_standby(&self, root: &Path) -> anyhow::Result<PrivateCluster> {
        fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
        write_private_file(&root.join("password"), &self.password)?;
        let mut standby = Self::open(root)?;
        let source = format!(
            "host=127.0.0.1 port={} user={SUPERUSER} password={}",
            self.port, self.password
        );
        let data = standby.data_dir();
        let output = standby.pg_tool("pg_basebackup", |cmd| {
            cmd.arg("-D")
                .arg(&data)
                .args(["-R", "-X", "stream", "-c", "fast", "-d"])
                .arg(&source);
        })?;
        if !output.status.success() {
            bail!("pg_basebackup failed: {}", describe_output(&output));
        }
        standby.start_postmaster()?;
        standby.owned = true;
        Ok(standby)
    }

    /// Promotes a standby to a primary (`pg_ctl promote`), waiting until it takes
    /// writes.
    pub fn promote(&self) -> anyhow::Result<()> {
        let data = self.data_dir();
        let output = self.pg_tool("pg_ctl", |cmd| {
            cmd.arg("promote")
                .arg("-D")
                .arg(&data)
                .args(["-w", "-t", "60"]);
        })?;
        if !output.status.success() {
            bail!("pg_ctl promote failed: {}", describe_output(&output));
        }
        Ok(())
    }

    /// Stops the postmaster at once, as a crash would (`pg_ctl stop -m immediate`: no
    /// checkpoint, every connection cut). [`PrivateCluster::start_again`] brings it
    /// back.
    pub fn stop_immediately(&mut self) -> anyhow::Result<()> {
        let data = self.data_dir();
        let output = self.pg_tool("pg_ctl", |cmd| {
            cmd.arg("stop")
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "-t", "60"]);
        })?;
        if !output.status.success() {
            bail!(
                "pg_ctl stop -m immediate failed: {}",
                describe_output(&output)
            );
        }
        self.stopped = true;
        Ok(())
    }

    /// Starts a cluster this handle stopped again, on a new free port (crash recovery
    /// runs first).
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        self.start_postmaster()?;
        self.stopped = false;
        Ok(())
    }

    /// Lets the postmaster run on after this handle is gone (`standmeet postgres start`).
    pub fn leave_running(mut self) {
        self.owned = false;
    }

    fn stop_inner(&mut self) -> anyhow::Result<()> {
        if !self.owned || self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let data = self.data_dir();
        let output = self.pg_tool("pg_ctl", |cmd| {
            cmd.arg("stop")
                .arg("-D")
                .arg(&data)
                .args(["-m", "fast", "-w", "-t", "60"]);
        })?;
        if !output.status.success() {
            bail!("pg_ctl stop failed: {}", describe_output(&output));
        }
        tracing::info!(dir = %self.root.display(), "stopped the private PostgreSQL cluster");
        Ok(())
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.root.join("postgres.log")
    }

    /// As root, hands `pg/` to the postgres user and checks that it can reach it (every
    /// parent directory must let it through).
    fn prepare_ownership(&self) -> anyhow::Result<()> {
        let Some(user) = &self.run_as else {
            return Ok(());
        };
        let account = nix::unistd::User::from_name(user)
            .context("cannot look up the postgres user")?
            .ok_or_else(|| {
                anyhow!(
                    "StandMeet runs as root, and initdb refuses root, so it needs the `{user}` user \
                     that Debian's `{DEBIAN_PACKAGE}` package creates; install it with \
                     `apt-get install {DEBIAN_PACKAGE}` or run StandMeet as another user"
                )
            })?;
        nix::unistd::chown(&self.root, Some(account.uid), Some(account.gid))
            .with_context(|| format!("cannot hand {} to the {user} user", self.root.display()))?;
        fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700))?;
        let reachable = Command::new("runuser")
            .args(["-u", user, "--", "test", "-w"])
            .arg(&self.root)
            .status()
            .context("cannot run runuser")?;
        if !reachable.success() {
            bail!(
                "the {user} user cannot reach {}: a parent directory does not let it through. \
                 Point STANDMEET_DATA_DIR somewhere it can reach, such as /var/tmp/standmeet",
                self.root.display()
            );
        }
        Ok(())
    }

    /// The superuser password, generated on first use and kept in `pg/password`.
    fn read_or_create_password(&self) -> anyhow::Result<String> {
        let path = self.root.join("password");
        if path.exists() {
            let password = fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .trim()
                .to_string();
            if !password.is_empty() {
                return Ok(password);
            }
        }
        if self.data_dir().join("PG_VERSION").exists() {
            bail!(
                "{} is missing but the cluster in {} exists; restore the file or remove the cluster",
                path.display(),
                self.data_dir().display()
            );
        }
        let password = random_token(32);
        write_private_file(&path, &password)?;
        Ok(password)
    }

    /// Runs initdb into a scratch directory and moves it into place only when it
    /// succeeded, so an interrupted first start leaves nothing half-made behind.
    fn init(&self) -> anyhow::Result<()> {
        let scratch = self.root.join("data.initdb");
        if scratch.exists() {
            fs::remove_dir_all(&scratch).context("cannot clear an interrupted initdb")?;
        }
        // initdb reads the password from a file; hand it one the postgres user can read.
        let pwfile = self.root.join("initdb.pw");
        write_private_file(&pwfile, &self.password)?;
        self.give_to_run_as_user(&pwfile)?;

        tracing::info!(dir = %self.data_dir().display(), "creating the private PostgreSQL cluster (first start)");
        let output = self.pg_tool("initdb", |cmd| {
            cmd.arg("-D")
                .arg(&scratch)
                .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C.UTF-8"])
                .args(["--auth=scram-sha-256"])
                .arg(format!("--pwfile={}", pwfile.display()));
        });
        let _ = fs::remove_file(&pwfile);
        let output = output?;
        if !output.status.success() {
            bail!("initdb failed: {}", describe_output(&output));
        }

        // Loopback TCP only, no socket (see the module note). The port comes at start.
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(scratch.join("postgresql.conf"))
            .context("cannot open postgresql.conf")?;
        writeln!(
            conf,
            "\n# Set by StandMeet for its private cluster.\n\
             listen_addresses = '127.0.0.1'\n\
             unix_socket_directories = ''\n\
             max_connections = 200\n\
             shared_buffers = 128MB"
        )?;
        fs::rename(&scratch, self.data_dir()).context("cannot move the new cluster into place")?;
        Ok(())
    }

    /// The port of a postmaster already running on our data directory, if any.
    fn running_port(&self) -> anyhow::Result<Option<u16>> {
        let data = self.data_dir();
        let output = self.pg_tool("pg_ctl", |cmd| {
            cmd.arg("status").arg("-D").arg(&data);
        })?;
        // pg_ctl status: 0 running, 3 not running, 4 no usable data directory.
        match output.status.code() {
            Some(0) => {}
            Some(3) => return Ok(None),
            _ => bail!("pg_ctl status failed: {}", describe_output(&output)),
        }
        // postmaster.pid: line 4 is the port.
        let pid_file = fs::read_to_string(data.join("postmaster.pid"))
            .context("a postmaster runs but its postmaster.pid cannot be read")?;
        let port = pid_file
            .lines()
            .nth(3)
            .and_then(|line| line.trim().parse::<u16>().ok())
            .ok_or_else(|| anyhow!("cannot read the port from postmaster.pid"))?;
        Ok(Some(port))
    }

    /// Starts the postmaster on a free port; tries again with another port if the one
    /// picked was taken in the meantime.
    fn start_postmaster(&mut self) -> anyhow::Result<()> {
        let data = self.data_dir();
        let log = self.log_file();
        let mut last_error = None;
        for _ in 0..3 {
            let port = free_loopback_port()?;
            let output = self.pg_tool("pg_ctl", |cmd| {
                cmd.arg("start")
                    .arg("-D")
                    .arg(&data)
                    .arg("-l")
                    .arg(&log)
                    .args(["-w", "-t", "60", "-o"])
                    .arg(format!("-p {port}"));
            })?;
            if output.status.success() {
                tracing::info!(port, dir = %self.root.display(), "started the private PostgreSQL cluster");
                self.port = port;
                return Ok(());
            }
            last_error = Some(describe_output(&output));
        }
        bail!(
            "the private PostgreSQL cluster did not start: {}; see {}",
            last_error.unwrap_or_default(),
            log.display()
        )
    }

    fn write_database_url_file(&self) -> anyhow::Result<()> {
        write_private_file(
            &self.root.join("database-url"),
            &self.database_url(super::PRIVATE_DATABASE),
        )
    }

    fn give_to_run_as_user(&self, path: &Path) -> anyhow::Result<()> {
        let Some(user) = &self.run_as else {
            return Ok(());
        };
        let account =
            nix::unistd::User::from_name(user)?.ok_or_else(|| anyhow!("no {user} user"))?;
        nix::unistd::chown(path, Some(account.uid), Some(account.gid))
            .with_context(|| format!("cannot hand {} to {user}", path.display()))?;
        Ok(())
    }

    /// Runs one of PostgreSQL's tools, as the postgres user when we are root, in a
    /// process group of its own so that a Ctrl-C in the terminal reaches StandMeet (which
    /// then stops the cluster cleanly) and not the postmaster directly.
    fn pg_tool(&self, tool: &str, args: impl FnOnce(&mut Command)) -> anyhow::Result<Output> {
        let program = self.bin_dir.join(tool);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(&program);
                cmd
            }
            None => Command::new(&program),
        };
        args(&mut cmd);
        cmd.current_dir(&self.root)
            .stdin(Stdio::null())
            .process_group(0)
            // Our own PG* settings must not steer the tools to another server.
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .env_remove("PGHOST");
        cmd.output()
            .with_context(|| format!("cannot run {}", program.display()))
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        if let Err(err) = self.stop_inner() {
            eprintln!(
                "standmeet: could not stop the private PostgreSQL cluster: {}",
                crate::causes::error_chain(err.as_ref())
            );
        }
    }
}

/// Finds the directory with `initdb` and `pg_ctl`: `pg_config --bindir` first, then the
/// newest `/usr/lib/postgresql/<version>/bin`.
pub fn find_bin_dir() -> anyhow::Result<PathBuf> {
    find_bin_dir_in("pg_config", Path::new("/usr/lib/postgresql"))
}

/// [`find_bin_dir`] with the places to look given (tests point them at nothing).
pub fn find_bin_dir_in(pg_config: &str, versions_root: &Path) -> anyhow::Result<PathBuf> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();

    if let Ok(output) = Command::new(pg_config).arg("--bindir").output()
        && output.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if has_tools(&dir) {
            return Ok(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(versions_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_tools(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir).ok_or_else(|| {
        anyhow!(
            "DATABASE_URL is unset, so StandMeet would start its own PostgreSQL, but no PostgreSQL \
             server programs (initdb, pg_ctl) were found via pg_config or in {}. \
             Install them with `apt-get install {DEBIAN_PACKAGE}`, or set DATABASE_URL to a \
             PostgreSQL 15+ server",
            versions_root.display()
        )
    })
}

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_loopback_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind(("127.0.0.1", 0)).context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `len` random letters and digits (passwords, tokens).
pub fn random_token(len: usize) -> String {
    use rand::Rng;
    use rand::distr::Alphanumeric;
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

fn write_private_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    file.write_all(b"\n")?;
    Ok(())
}

fn describe_output(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    format!("{} ({})", text.trim(), output.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_server_programs_name_the_debian_package() {
        let empty = tempfile::tempdir().unwrap();
        let err = find_bin_dir_in("/nonexistent/pg_config", empty.path()).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("apt-get install postgresql"), "{message}");
        assert!(message.contains("DATABASE_URL"), "{message}");
    }

    #[test]
    fn the_newest_installed_version_is_preferred() {
        let root = tempfile::tempdir().unwrap();
        for version in ["13", "15", "9"] {
            let bin = root.path().join(version).join("bin");
            fs::create_dir_all(&bin).unwrap();
            fs::write(bin.join("initdb"), "").unwrap();
            fs::write(bin.join("pg_ctl"), "").unwrap();
        }
        let found = find_bin_dir_in("/nonexistent/pg_config", root.path()).unwrap();
        assert_eq!(found, root.path().join("15").join("bin"));
    }
}

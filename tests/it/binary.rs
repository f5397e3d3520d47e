//! The `standmeet` binary as an operator runs it: settings checked at start, its own
//! PostgreSQL when `DATABASE_URL` is unset (kept across restarts), the operator's server
//! when it is set, and a clean stop on SIGTERM.

use crate::common;

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sqlx::{Connection, PgConnection};

const BIN: &str = env!("CARGO_BIN_EXE_standmeet");

/// A command for the binary with none of the caller's StandMeet settings leaking in.
pub(crate) fn standmeet() -> Command {
    standmeet_at(Path::new(BIN))
}

/// [`standmeet`] for the binary at `program` (a copy of it elsewhere).
fn standmeet_at(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars() {
        if name.starts_with("STANDMEET_") || name == "DATABASE_URL" || name == "LEPTOS_SITE_ADDR" {
            cmd.env_remove(name);
        }
    }
    cmd.env("RUST_LOG", "info");
    cmd
}

/// A visitor (Ada) asks `server` for access, as the page's form does.
pub(crate) async fn ask_for_access(server: &Server) {
    let asked = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{}/api/request_access",
            server.port
        ))
        .header("accept", "application/json")
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("name", "Ada"),
            ("email", "ada@example.com"),
            ("message", "Hello"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200, "{}", asked.text().await.unwrap());
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scratch directory the `postgres` user can reach (the cluster runs as that user
/// when the tests run as root).
fn scratch_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("standmeet-bin-test")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A database of its own on the test server, named after `what` and this process: its
/// URL, and the server's admin URL to drop it with ([`drop_database`]).
pub(crate) fn scratch_database(what: &str) -> (url::Url, String) {
    let admin_url = std::env::var("DATABASE_URL").expect("the test command sets DATABASE_URL");
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&format!("standmeet_{what}_{}", std::process::id()));
    (url, admin_url)
}

pub(crate) async fn drop_database(admin_url: &str, url: &url::Url) {
    let name = url.path().trim_start_matches('/');
    let mut admin = PgConnection::connect(admin_url).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    /// What the server printed on stdout (the console) and stderr (the log).
    stdout: tempfile::NamedTempFile,
    stderr: tempfile::NamedTempFile,
}

impl Server {
    pub(crate) fn start(cmd: Command) -> Server {
        Server::start_with(cmd, |_| Vec::new())
    }

    /// [`Server::start`], with settings that depend on the file its standard output
    /// goes to.
    fn start_with(
        mut cmd: Command,
        more_env: impl FnOnce(&Path) -> Vec<(&'static str, String)>,
    ) -> Server {
        let port = free_port();
        let stdout = tempfile::NamedTempFile::new().unwrap();
        let stderr = tempfile::NamedTempFile::new().unwrap();
        cmd.envs(more_env(stdout.path()));
        let child = cmd
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::from(stdout.reopen().unwrap()))
            .stderr(Stdio::from(stderr.reopen().unwrap()))
            .spawn()
            .expect("the binary starts");
        Server {
            child,
            port,
            stdout,
            stderr,
        }
    }

    fn console(&self) -> String {
        std::fs::read_to_string(self.stdout.path()).unwrap()
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap()
    }

    /// Waits until /healthz answers 200 (the server is up and its database ok).
    pub(crate) async fn wait_healthy(&mut self) -> serde_json::Value {
        let url = format!("http://127.0.0.1:{}/healthz", self.port);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the server exited early with {status}: {}", self.log());
            }
            if let Ok(reply) = reqwest::get(&url).await
                && reply.status() == 200
            {
                return reply.json().await.unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not become healthy"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends SIGTERM and waits for a successful exit; answers (console, log).
    pub(crate) fn stop(mut self) -> (String, String) {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "the server exited with {status} after SIGTERM: {}",
                    self.log()
                );
                return (self.console(), self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// The URL of the private cluster's `standmeet` database, from the file the cluster
/// writes for operators (the README's `psql "$(cat .standmeet/pg/database-url)"`).
fn private_url(data_dir: &Path) -> String {
    let written = std::fs::read_to_string(data_dir.join("pg").join("database-url"))
        .expect("the cluster writes its URL");
    let url = url::Url::parse(written.trim()).unwrap();
    assert_eq!(
        url.path(),
        "/standmeet",
        "the file names StandMeet's own database"
    );
    url.to_string()
}

#[test]
fn a_bad_setting_stops_the_start_and_names_the_setting() {
    for (name, value) in [
        ("STANDMEET_MAX_WAITERS", "abc"),
        ("STANDMEET_APPROVE_WAIT_MS", "soon"),
        ("LEPTOS_SITE_ADDR", "nowhere"),
        ("STANDMEET_MAIL", "pigeon://loft"),
        ("DATABASE_URL", "mysql://db/x"),
    ] {
        let output = standmeet().env(name, value).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}={value}: {stderr}");
        assert!(stderr.contains(name), "{name}={value}: {stderr}");
    }
}

#[test]
fn check_config_validates_without_connecting_and_help_lists_every_setting() {
    // Nothing listens there: check-config must not try.
    let ok = standmeet()
        .arg("check-config")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env("STANDMEET_TIMEZONE", "Europe/Berlin")
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = standmeet()
        .arg("check-config")
        .env("STANDMEET_BOOKING", "sometimes")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("STANDMEET_BOOKING"));

    let help = standmeet().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for setting in standmeet::config::SETTINGS {
        let (name, default) = (setting.name, setting.when_unset.shown());
        assert!(text.contains(name), "--help names {name}: {text}");
        assert!(
            text.contains(&format!("[default: {default}]")),
            "{name}'s default: {text}"
        );
    }
    for command in ["migrate", "check-config"] {
        assert!(text.contains(command), "--help lists {command}: {text}");
    }
}

#[tokio::test]
async fn migrate_applies_the_migrations_and_exits() {
    let (url, admin_url) = scratch_database("migrate");
    let output = standmeet()
        .arg("migrate")
        .env("DATABASE_URL", url.as_str())
        .output()
        .unwrap();
    assert_succeeded(&output);
    let mut connection = PgConnection::connect(url.as_str()).await.unwrap();
    let bookings: bool = sqlx::query_scalar("SELECT to_regclass('public.bookings') IS NOT NULL")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    assert!(bookings, "the newest migration is applied");
    connection.close().await.unwrap();
    drop_database(&admin_url, &url).await;
}

#[test]
fn the_systemd_unit_verifies() {
    // Checked where systemd's own verifier is installed (it is on this project's CI).
    let Ok(verifier) = which_systemd_analyze() else {
        eprintln!("systemd-analyze is not installed; deploy/standmeet.service not verified");
        return;
    };
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/standmeet.service"
    ))
    .unwrap();
    // The unit names the installed binary; here, this build's.
    let unit = unit.replace("/opt/standmeet/current/standmeet", BIN);
    let dir = scratch_dir();
    let path = dir.path().join("standmeet.service");
    std::fs::write(&path, unit).unwrap();
    let output = Command::new(verifier)
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.trim().is_empty(), "systemd-analyze verify: {stderr}");
}

fn which_systemd_analyze() -> Result<std::path::PathBuf, ()> {
    ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.exists())
        .ok_or(())
}

#[tokio::test]
async fn json_logs_are_one_object_a_line_with_an_access_line_per_request() {
    let (url, admin_url) = scratch_database("json");
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("STANDMEET_LOG_FORMAT", "json")
        .env("STANDMEET_OWNER_EMAIL", "owner@example.com")
        .env("RUST_LOG", "info,sqlx=warn,tower_http=info");
    let mut server = Server::start(cmd);
    server.wait_healthy().await;
    let reply = reqwest::get(format!("http://127.0.0.1:{}/livez", server.port))
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    // A visitor's request sends the admin a mail (to the log): a job whose line
    // names it.
    ask_for_access(&server).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.log().contains("the log supplier") {
        assert!(
            Instant::now() < deadline,
            "no mail in the log: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, log) = server.stop();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let access = lines
        .iter()
        .find(|line| line["span"]["path"] == "/livez" && line["fields"]["status"] == 200)
        .unwrap_or_else(|| panic!("an access line for /livez in {log}"));
    assert_eq!(access["level"], "INFO");
    assert_eq!(access["span"]["method"], "GET");
    // The latency is a number of milliseconds, and the client is named, as an address.
    assert!(
        access["fields"]["latency_ms"]
            .as_f64()
            .is_some_and(|ms| ms >= 0.0),
        "{access}"
    );
    assert_eq!(access["span"]["client"], "127.0.0.1", "{access}");
    let mail = lines
        .iter()
        .find(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("the log supplier"))
        })
        .unwrap();
    assert_eq!(mail["job"]["kind"], "access_request.notify_owner", "{mail}");
    assert_eq!(mail["job"]["attempt"], 1, "{mail}");
    assert!(
        mail["job"]["id"].as_i64().is_some_and(|id| id > 0),
        "{mail}"
    );
    // Lines outside a job do not name one.
    assert!(access.get("job").is_none(), "{access}");
    drop_database(&admin_url, &url).await;
}

#[tokio::test]
async fn admin_set_password_reads_stdin_and_ends_the_sessions() {
    let (url, admin_url) = scratch_database("password");
    let pool = standmeet::db::connect(url.as_str()).await.unwrap();
    standmeet::db::migrate(&pool).await.unwrap();
    let email = standmeet::types::EmailAddress::parse("owner@example.com").unwrap();
    standmeet::domain::admins::admin_upsert(&pool, &email, "the old password")
        .await
        .unwrap();

    let run = |who: &str, line: &str| run_with_input(&["admin", "set-password", who], &url, line);
    let output = run("owner@example.com", "a+new password%20\n");
    assert_succeeded(&output);
    let signed_in =
        standmeet::domain::admins::authenticate(&pool, "owner@example.com", "a+new password%20")
            .await
            .unwrap();
    assert!(
        signed_in.is_some(),
        "the line, as typed, is the new password"
    );
    let ended: bool = sqlx::query_scalar(
        "SELECT sessions_valid_after IS NOT NULL FROM admins WHERE email = 'owner@example.com'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(ended, "its sessions are ended");
    let unknown = run("nobody@example.com", "whatever password\n");
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("there is no admin"));
    let short = run("owner@example.com", "short\n");
    assert!(!short.status.success());
    pool.close().await;
    drop_database(&admin_url, &url).await;
}

/// Runs `standmeet <args>` on `url`'s database with `stdin` as its standard input.
fn run_with_input(args: &[&str], url: &url::Url, stdin: &str) -> std::process::Output {
    run_with_env(args, url, stdin, &[])
}

/// Fails the test with the command's own words when it did not succeed.
fn assert_succeeded(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// [`run_with_input`] with more settings.
fn run_with_env(
    args: &[&str],
    url: &url::Url,
    stdin: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut child = standmeet()
        .args(args)
        .env("DATABASE_URL", url.as_str())
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn admin_create_makes_an_admin_once_from_stdin_or_with_a_generated_password() {
    let (url, admin_url) = scratch_database("create");
    let made = run_with_input(
        &["admin", "create", "boss@example.com"],
        &url,
        "long enough\n",
    );
    let said = String::from_utf8_lossy(&made.stdout);
    assert_succeeded(&made);
    assert!(
        said.contains("boss@example.com") && said.contains("/login"),
        "{said}"
    );
    assert!(
        !said.contains("long enough"),
        "a password read is not printed: {said}"
    );

    let again = run_with_input(
        &["admin", "create", "Boss@Example.com"],
        &url,
        "another one\n",
    );
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("already") && stderr.contains("set-password"),
        "{stderr}"
    );

    let short = run_with_input(&["admin", "create", "short@example.com"], &url, "short\n");
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("8 characters"));

    let generated = run_with_input(
        &["admin", "create", "--generate", "ops@example.com"],
        &url,
        "",
    );
    assert_succeeded(&generated);
    let console = String::from_utf8_lossy(&generated.stdout);
    let password = generated_password(&console).expect("the generated password is printed");

    let pool = standmeet::db::connect(url.as_str()).await.unwrap();
    for (email, password) in [
        ("boss@example.com", "long enough"),
        ("ops@example.com", &password),
    ] {
        let admin = standmeet::domain::admins::authenticate(&pool, email, password)
            .await
            .unwrap();
        assert!(admin.is_some(), "{email} signs in");
    }
    assert!(
        standmeet::domain::admins::authenticate(&pool, "boss@example.com", "another one")
            .await
            .unwrap()
            .is_none(),
        "the second create changed nothing"
    );
    assert_eq!(common::count(&pool, "SELECT count(*) FROM admins").await, 2);
    pool.close().await;
    drop_database(&admin_url, &url).await;
}

#[tokio::test]
async fn a_password_the_setting_replaces_is_said_by_the_command_and_the_start() {
    let (url, admin_url) = scratch_database("wins");
    let made = run_with_input(
        &["admin", "create", "boss@example.com"],
        &url,
        "from the settings\n",
    );
    assert_succeeded(&made);
    // The operator changes it by hand while the environment still names the old one.
    let changed = run_with_env(
        &["admin", "set-password", "boss@example.com"],
        &url,
        "changed by hand\n",
        &[
            ("STANDMEET_ADMIN_EMAIL", "boss@example.com"),
            ("STANDMEET_ADMIN_PASSWORD", "from the settings"),
        ],
    );
    assert!(changed.status.success());
    let said = String::from_utf8_lossy(&changed.stdout);
    assert!(
        said.contains("STANDMEET_ADMIN_PASSWORD") && said.contains("next start"),
        "{said}"
    );

    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("STANDMEET_ADMIN_EMAIL", "boss@example.com")
        .env("STANDMEET_ADMIN_PASSWORD", "from the settings");
    let mut server = Server::start(cmd);
    server.wait_healthy().await;
    let (_, log) = server.stop();
    assert!(
        log.contains("STANDMEET_ADMIN_PASSWORD replaced this admin's password"),
        "{log}"
    );
    drop_database(&admin_url, &url).await;
}

#[tokio::test]
async fn under_the_journal_no_password_is_made_up_and_the_log_says_how_to_make_an_admin() {
    use std::os::unix::fs::MetadataExt;
    let (url, admin_url) = scratch_database("journal");
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str());
    // systemd names the journal's stream by its device and inode; here the file the
    // server's standard output goes to stands in for it.
    let mut server = Server::start_with(cmd, |stdout| {
        let meta = std::fs::metadata(stdout).unwrap();
        vec![("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))]
    });
    server.wait_healthy().await;
    let (console, log) = server.stop();
    assert_eq!(generated_password(&console), None, "{console}");
    assert!(log.contains("standmeet admin create"), "{log}");
    let pool = standmeet::db::connect(url.as_str()).await.unwrap();
    assert_eq!(common::count(&pool, "SELECT count(*) FROM admins").await, 0);
    pool.close().await;
    drop_database(&admin_url, &url).await;
}

// Two threads: the relay below runs on the runtime while `Server::stop` blocks one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_waits_for_a_database_that_answers_later() {
    let (url, admin_url) = scratch_database("late");
    let database: std::net::SocketAddr =
        format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432))
            .parse()
            .unwrap();
    // Nothing listens on this port yet: connections are refused, as while PostgreSQL
    // boots.
    let port = free_port();
    let mut late = url.clone();
    late.set_port(Some(port)).unwrap();
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", late.as_str())
        .env("STANDMEET_DATABASE_WAIT_MS", "60000");
    let mut server = Server::start(cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.log().contains("PostgreSQL does not answer yet") {
        assert!(
            Instant::now() < deadline,
            "no word of waiting: {}",
            server.log()
        );
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "it gave up: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Now the database answers on that port (through a relay to the test server).
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(database).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    assert_eq!(server.wait_healthy().await["database"], "ok");
    server.stop();
    drop_database(&admin_url, &url).await;
}

#[test]
fn an_error_says_each_cause_once() {
    let output = standmeet()
        .arg("migrate")
        .env(
            "DATABASE_URL",
            format!("postgres://nobody@127.0.0.1:{}/none", free_port()),
        )
        .env("STANDMEET_DATABASE_WAIT_MS", "0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach PostgreSQL"), "{stderr}");
    assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
}

#[tokio::test]
async fn a_site_root_without_the_site_is_refused_by_check_config_and_readyz() {
    let checked = standmeet()
        .arg("check-config")
        .env("LEPTOS_SITE_ROOT", "/does/not/exist")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("LEPTOS_SITE_ROOT") && stderr.contains("/does/not/exist"),
        "{stderr}"
    );

    let (url, admin_url) = scratch_database("site");
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("LEPTOS_SITE_ROOT", "/does/not/exist");
    let mut server = Server::start(cmd);
    let health = server.wait_healthy().await;
    assert_eq!(health["site"], "missing", "{health}");
    let ready = reqwest::get(format!("http://127.0.0.1:{}/readyz", server.port))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let (_, log) = server.stop();
    assert!(log.contains("the site's files are not there"), "{log}");
    drop_database(&admin_url, &url).await;
}

/// The generated admin password in what the server printed, if any.
fn generated_password(console: &str) -> Option<String> {
    console
        .lines()
        .find_map(|line| line.trim().strip_prefix("password:"))
        .map(|password| password.trim().to_string())
}

#[tokio::test]
async fn without_database_url_it_runs_its_own_cluster_and_keeps_the_data_across_restarts() {
    let data = scratch_dir();
    let mut cmd = standmeet();
    cmd.env("STANDMEET_DATA_DIR", data.path());
    let mut server = Server::start(cmd);
    assert_eq!(server.wait_healthy().await["database"], "ok");

    let url = private_url(data.path());
    let mut conn = PgConnection::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE restart_marker (note text)")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO restart_marker VALUES ('kept')")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    let (console, log) = server.stop();
    assert!(
        !data.path().join("pg/data/postmaster.pid").exists(),
        "the cluster stops with the server"
    );
    // No admin settings, and standard output is a file, not a terminal: no password is
    // made up (it would stay in the file), and the log names the command to run.
    assert_eq!(generated_password(&console), None, "{console}");
    assert!(
        log.contains("standmeet admin create admin@localhost"),
        "{log}"
    );

    let mut cmd = standmeet();
    cmd.env("STANDMEET_DATA_DIR", data.path());
    let mut server = Server::start(cmd);
    server.wait_healthy().await;
    let mut conn = PgConnection::connect(&private_url(data.path()))
        .await
        .unwrap();
    let note: String = sqlx::query_scalar("SELECT note FROM restart_marker")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(note, "kept");
    conn.close().await.unwrap();
    server.stop();
}

#[tokio::test]
async fn with_database_url_it_uses_that_server_creates_the_database_and_starts_nothing() {
    let admin_url = std::env::var("DATABASE_URL").expect("the test command sets DATABASE_URL");
    let database = format!("standmeet_bin_{}", std::process::id());
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&database);

    let data = scratch_dir();
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("STANDMEET_DATA_DIR", data.path());
    let mut server = Server::start(cmd);
    assert_eq!(server.wait_healthy().await["status"], "ok");
    server.stop();

    assert!(
        !data.path().join("pg").exists(),
        "no private cluster was made"
    );
    let mut admin = PgConnection::connect(&admin_url).await.unwrap();
    let migrated: bool = sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT FROM pg_database WHERE datname = '{database}')"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(migrated, "the database was created");
    sqlx::query(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_job_of_a_killed_process_is_rescued_and_completed_by_another_process() {
    use crate::common::jobs::insert;
    use standmeet_jobs::JobState;
    use standmeet_jobs::builtin::{Sleep, SleepArgs};

    let admin_url = std::env::var("DATABASE_URL").expect("the test command sets DATABASE_URL");
    let database = format!("standmeet_kill_{}", std::process::id());
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&database);

    // The first process: a StandMeet that renews its leases every third of a second.
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("STANDMEET_JOB_LEASE_MS", "1000");
    let mut first = Server::start(cmd);
    first.wait_healthy().await;
    let child_pid = first.child.id();

    let pool = sqlx::PgPool::connect(url.as_str()).await.unwrap();
    let id = insert::<Sleep>(&pool, &SleepArgs { ms: 1_500 })
        .await
        .unwrap();
    let row = common::jobs::wait_for_state(&pool, id, JobState::Running).await;
    assert!(
        row.attempted_by
            .as_deref()
            .unwrap()
            .contains(&format!(":{child_pid}:")),
        "held by the first process: {row:?}"
    );

    // It dies mid-attempt, without a chance to clean up.
    kill(Pid::from_raw(child_pid as i32), Signal::SIGKILL).unwrap();
    first.child.wait().unwrap();

    // The second process (this one) takes the job back and finishes it.
    let engine = common::jobs::start_engine(
        &pool,
        standmeet_jobs::builtin::registry(),
        common::jobs::quick_config(2),
    )
    .await;
    let row = common::jobs::wait_for_state(&pool, id, JobState::Completed).await;
    assert_eq!(row.attempt, 2);
    let errors = row.attempt_errors();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].error.starts_with("worker lost"), "{errors:?}");
    assert_eq!(row.output, Some(serde_json::json!({"slept_ms": 1500})));
    engine.shutdown().await;
    pool.close().await;

    let mut admin = PgConnection::connect(&admin_url).await.unwrap();
    sqlx::query(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_waiter_in_one_process_is_woken_by_a_job_finished_in_another() {
    use crate::common::jobs::insert;
    use standmeet_jobs::WaitOutcome;
    use standmeet_jobs::builtin::Noop;

    let admin_url = std::env::var("DATABASE_URL").expect("the test command sets DATABASE_URL");
    let database = format!("standmeet_two_{}", std::process::id());
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&database);

    // The other process runs the jobs.
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str());
    let mut worker = Server::start(cmd);
    let health = worker.wait_healthy().await;
    assert_eq!(health["listener"], "connected", "{health}");
    assert_eq!(health["waiters"], 0);

    // This process only waits: it has a listener and no engine. What its listener
    // hears comes from the other process's commit alone (a subscription to finished
    // jobs is fed by notifications only), and the waiter is answered with the row.
    let pool = sqlx::PgPool::connect(url.as_str()).await.unwrap();
    let jobs = standmeet_jobs::JobClient::new(pool.clone(), 64);
    let mut finished = jobs.finished_jobs();
    let listening = jobs.listen();
    common::jobs::wait_until(Duration::from_secs(10), || async {
        jobs.listener_connected()
    })
    .await;

    let id = insert::<Noop>(&pool, &serde_json::json!({"from": "afar"}))
        .await
        .unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match finished.next().await {
                Some(standmeet_jobs::listener::Finished::Job(done)) if done == id => return true,
                Some(_) => continue,
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(heard, Ok(true), "the other process's finish was heard here");
    let outcome = jobs.wait(&[id], Duration::from_secs(10)).await.unwrap();
    let WaitOutcome::Done(rows) = outcome else {
        panic!("expected an answer")
    };
    assert_eq!(rows[0].output, Some(serde_json::json!({"from": "afar"})));
    assert!(rows[0].attempted_by.is_none());

    listening.stop().await;
    pool.close().await;
    worker.stop();
    let mut admin = PgConnection::connect(&admin_url).await.unwrap();
    sqlx::query(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// `command` run under `script`, which gives it a terminal: what the program prints
/// there lands in a file (answered), and what is written to the returned child's
/// standard input is typed at that terminal.
fn at_a_terminal(command: &str, url: &url::Url) -> (Child, tempfile::NamedTempFile) {
    use std::os::unix::process::CommandExt as _;
    let console = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new("script")
        .args([
            "--quiet",
            "--return",
            "--flush",
            "--command",
            command,
            "/dev/null",
        ])
        .env("DATABASE_URL", url.as_str())
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("RUST_LOG", "warn")
        .env_remove("STANDMEET_ADMIN_EMAIL")
        .env_remove("STANDMEET_ADMIN_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(console.reopen().unwrap()))
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("script (util-linux) runs");
    (child, console)
}

/// Waits until `console` holds `words`; answers all it holds.
fn until_printed(console: &tempfile::NamedTempFile, words: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let printed = std::fs::read_to_string(console.path()).unwrap_or_default();
        if printed.contains(words) {
            return printed;
        }
        assert!(
            Instant::now() < deadline,
            "{words:?} was not printed: {printed}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn at_a_terminal_the_first_password_is_shown_and_a_typed_one_is_not_echoed() {
    let (url, admin_url) = scratch_database("terminal");

    // The first start, at a terminal: the generated password is shown there.
    let (mut server, console) = at_a_terminal(&format!("{BIN} serve"), &url);
    let printed = until_printed(&console, "shown only now");
    let password = generated_password(&printed).expect("a generated password is shown");
    assert!(password.len() >= 16, "{printed}");
    nix::sys::signal::killpg(Pid::from_raw(server.id() as i32), Signal::SIGTERM).unwrap();
    server.wait().unwrap();

    // A password typed at the terminal is read without echo.
    let typed = "typed at a terminal";
    let (mut create, console) =
        at_a_terminal(&format!("{BIN} admin create typed@example.com"), &url);
    until_printed(&console, "Password (not shown):");
    let mut keyboard = create.stdin.take().unwrap();
    keyboard.write_all(format!("{typed}\n").as_bytes()).unwrap();
    drop(keyboard);
    assert!(create.wait().unwrap().success());
    let printed = until_printed(&console, "typed@example.com is created");
    assert!(
        !printed.contains(typed),
        "the typed password was echoed: {printed}"
    );

    let pool = standmeet::db::connect(url.as_str()).await.unwrap();
    for (email, password) in [
        ("admin@localhost", password.as_str()),
        ("typed@example.com", typed),
    ] {
        let admin = standmeet::domain::admins::authenticate(&pool, email, password)
            .await
            .unwrap();
        assert!(admin.is_some(), "{email} signs in");
    }
    pool.close().await;
    drop_database(&admin_url, &url).await;
}

/// A start that cannot listen (the port is taken) fails before its job engine claims a
/// job: nothing is left running in a process that is gone, for the lease to take back
/// with an attempt burnt.
#[tokio::test]
async fn a_start_that_cannot_listen_fails_before_it_claims_a_job() {
    let (url, admin_url) = scratch_database("taken");
    assert_succeeded(
        &standmeet()
            .arg("migrate")
            .env("DATABASE_URL", url.as_str())
            .output()
            .unwrap(),
    );
    let mut connection = PgConnection::connect(url.as_str()).await.unwrap();
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('system.noop', '{}') RETURNING id",
    )
    .fetch_one(&mut connection)
    .await
    .unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let output = standmeet()
        .env("DATABASE_URL", url.as_str())
        .env("LEPTOS_SITE_ADDR", taken.local_addr().unwrap().to_string())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    let (state, attempt): (String, i16) =
        sqlx::query_as("SELECT state::text, attempt FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&mut connection)
            .await
            .unwrap();
    assert_eq!((state.as_str(), attempt), ("available", 0), "never claimed");
    connection.close().await.unwrap();
    drop(taken);
    drop_database(&admin_url, &url).await;
}

/// `/readyz`'s JSON from `server`, and whether it answered 200.
async fn readyz(server: &Server) -> (bool, serde_json::Value) {
    let reply = reqwest::get(format!("http://127.0.0.1:{}/readyz", server.port))
        .await
        .unwrap();
    (reply.status() == 200, reply.json().await.unwrap())
}

/// Waits until `/readyz` says `"vault": wanted`, and is ready all along.
async fn until_vault(server: &Server, wanted: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ready, health) = readyz(server).await;
        assert!(ready, "ready whatever the vault does: {health}");
        if health["vault"] == wanted {
            return health;
        }
        assert!(
            Instant::now() < deadline,
            "the vault is not {wanted}: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A vault folder that is not there at start (a mount that comes up later) is no bad
/// setting: the server serves, ready, with its watcher waiting; once the folder is
/// there it is watched and rebuilt, and a link in it to `/` is not followed.
#[tokio::test]
async fn a_vault_that_is_not_there_yet_is_waited_for_and_serving_goes_on() {
    let (url, admin_url) = scratch_database("latevault");
    let scratch = scratch_dir();
    let vault = scratch.path().join("vault");
    let checked = standmeet()
        .arg("check-config")
        .env("STANDMEET_VAULT", &vault)
        .env("STANDMEET_VAULT_WATCH", "true")
        .output()
        .unwrap();
    assert_succeeded(&checked);
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(said.contains("warning: STANDMEET_VAULT"), "{said}");

    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", url.as_str())
        .env("STANDMEET_VAULT", &vault)
        .env("STANDMEET_VAULT_WATCH", "true");
    let mut server = Server::start(cmd);
    server.wait_healthy().await;
    until_vault(&server, "waiting").await;

    std::fs::create_dir(&vault).unwrap();
    std::os::unix::fs::symlink("/", vault.join("everything")).unwrap();
    std::fs::write(vault.join("Arrived.md"), "# Arrived\n\nThe mount came up.").unwrap();
    until_vault(&server, "watching").await;
    // The folder's arrival queued a rebuild, which read the note and not the link's
    // target.
    let mut connection = PgConnection::connect(url.as_str()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let paths = loop {
        let paths: Vec<String> = sqlx::query_scalar("SELECT path FROM corpus_vault_notes")
            .fetch_all(&mut connection)
            .await
            .unwrap();
        if !paths.is_empty() {
            break paths;
        }
        assert!(Instant::now() < deadline, "no rebuild read the vault");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(paths, ["Arrived.md"]);

    // The folder goes (an unmount): waiting again, ready all along.
    std::fs::remove_dir_all(&vault).unwrap();
    until_vault(&server, "waiting").await;
    connection.close().await.unwrap();
    let (_, log) = server.stop();
    assert!(log.contains("the vault cannot be watched yet"), "{log}");
    drop_database(&admin_url, &url).await;
}

/// The nginx file the fault suite's rolling restart runs with is the one the docs show:
/// docs/operating.md's block is `deploy/nginx/standmeet.conf` after its two opening
/// comment lines.
#[test]
fn the_docs_show_the_nginx_file_the_rolling_restart_runs_with() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/operating.md")).unwrap();
    let file = std::fs::read_to_string(root.join("deploy/nginx/standmeet.conf")).unwrap();
    let block = docs
        .split("```nginx\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("an nginx block in docs/operating.md");
    assert!(
        file.ends_with(block),
        "docs/operating.md's nginx block and deploy/nginx/standmeet.conf differ"
    );
    assert!(block.contains("upstream standmeet"), "{block}");
}

/// A binary copied without the `hash.txt` of its build, beside a site whose files have
/// hashed names, serves pages that name files the site does not have: `check-config`
/// refuses it naming the hash file, and `/readyz` answers 503.
#[tokio::test]
async fn a_binary_without_its_hash_file_is_a_missing_site() {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/site");
    let hashed = std::fs::read_dir(site.join("pkg"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|entry| entry.file_name().to_string_lossy().matches('.').count() == 2)
        })
        .unwrap_or(false);
    assert!(
        hashed,
        "scripts/build names the site's files by their hashes: {}",
        site.display()
    );
    let scratch = scratch_dir();
    let copied = scratch.path().join("standmeet");
    std::fs::copy(BIN, &copied).unwrap();
    let without_hashes = |args: &[&str]| {
        let mut cmd = standmeet_at(&copied);
        cmd.args(args).env("LEPTOS_SITE_ROOT", &site);
        cmd
    };
    let checked = without_hashes(&["check-config"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("hash.txt"), "{stderr}");

    let (url, admin_url) = scratch_database("nohash");
    let mut cmd = without_hashes(&["serve"]);
    cmd.env("DATABASE_URL", url.as_str());
    let mut server = Server::start(cmd);
    let health = server.wait_healthy().await;
    assert_eq!(health["site"], "missing", "{health}");
    let ready = reqwest::get(format!("http://127.0.0.1:{}/readyz", server.port))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    server.stop();
    drop_database(&admin_url, &url).await;
}

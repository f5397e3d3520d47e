//! Every setting StandMeet reads, its default, and the validation that names a bad one.
//!
//! Settings come from the environment (docs/reference/settings.md). They are parsed once, at
//! start, into [`Settings`]; everything else takes the parsed values and never reads the
//! environment itself. A bad value stops the start with a [`ConfigError`] that names the
//! setting, says what was wrong and what would be accepted. Secret values (passwords,
//! tokens, database URLs) are never echoed back in such a message.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use crate::types::EmailAddress;

/// Where mail goes (`STANDMEET_MAIL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailSupplier {
    /// The default: mail is written to the log and to the mail log page, nothing is sent.
    Log,
    /// No mail at all: operations that must mail answer 400 at once.
    None,
    /// A real SMTP server: `smtp://host:port` (STARTTLS when offered, and required
    /// when the URL carries a user and password), `smtps://host:port` (TLS from the
    /// start) or `smtp+insecure://user:password@host:port` (no TLS even with a password,
    /// when the operator says so).
    Smtp(Url),
}

/// One setting StandMeet reads: its name in the environment, its default, and what it
/// does. The table below is the only list of them: `standmeet --help` prints it, and
/// [`Settings::from_lookup`] reads each setting through its entry, so no setting is
/// read without being listed, and a default is written once.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    pub name: &'static str,
    pub when_unset: WhenUnset,
    pub meaning: &'static str,
}

/// What an unset setting means.
#[derive(Clone, Copy, Debug)]
pub enum WhenUnset {
    /// This value, read as if it had been given.
    Value(&'static str),
    /// Nothing; what that means, in words for `--help`.
    Nothing(&'static str),
}

impl WhenUnset {
    /// How `--help` shows it.
    pub fn shown(self) -> &'static str {
        match self {
            WhenUnset::Value(value) | WhenUnset::Nothing(value) => value,
        }
    }
}

/// Declares each setting once, as a constant of [`env`] (read by the parser) and as an
/// entry of [`SETTINGS`] (listed by `--help`).
macro_rules! settings {
    ($($name:ident: $default:expr, $meaning:expr;)*) => {
        /// Every setting, by its name in the environment.
        pub mod env {
            use super::{DEFAULT_LOG_FILTER, Setting, WhenUnset::*};
            $(pub const $name: Setting = Setting {
                name: stringify!($name),
                when_unset: $default,
                meaning: $meaning,
            };)*
        }

        /// Every setting, in the order `--help` lists them.
        pub const SETTINGS: &[Setting] = &[$(env::$name),*];
    };
}

settings! {
    DATABASE_URL: Nothing("unset: a private cluster"),
        "the PostgreSQL database to use";
    STANDMEET_DATA_DIR: Value(".standmeet"),
        "where the private cluster lives (<dir>/pg)";
    LEPTOS_SITE_ADDR: Value("127.0.0.1:3000"),
        "the address the server listens on";
    LEPTOS_SITE_ROOT: Value("target/site"),
        "where the site's files are (the target/site of the build, copied)";
    STANDMEET_PUBLIC_URL: Nothing("http://<LEPTOS_SITE_ADDR>"),
        "how people reach StandMeet (links in mail, cookies)";
    STANDMEET_MAIL: Value("log"),
        "log, none, smtp://host:port, smtps://host:port or smtp+insecure://user:password@host:port";
    STANDMEET_MAIL_FROM: Nothing("standmeet@<public host>"),
        "the sender of every mail: an address, or Name <address>";
    STANDMEET_OWNER_EMAIL: Nothing("the first admin"),
        "the owner's address";
    STANDMEET_ADMIN_EMAIL: Nothing("unset"),
        "with the password, an admin created or given it at every start; alone, the first admin's address";
    STANDMEET_ADMIN_PASSWORD: Nothing("unset"),
        "that admin's password (8 characters or more); while set, it wins over one changed elsewhere";
    STANDMEET_MCP_TOKEN: Nothing("unset: MCP off"),
        "the bearer token of /mcp, 32 characters or more";
    STANDMEET_APPROVE_WAIT_MS: Value("2000"),
        "how long an approval waits for its mail";
    STANDMEET_FETCH_WAIT_MS: Value("20000"),
        "how long \"fetch new listings\" waits";
    STANDMEET_INDEX_WAIT_MS: Value("2000"),
        "how long a corpus write waits for its index job";
    STANDMEET_MAX_WAITERS: Value("64"),
        "callers that may wait for jobs at once";
    STANDMEET_MAX_LIVE_CLIENTS: Value("256"),
        "live streams (/api/live) one process serves at once";
    STANDMEET_MAX_BODY_BYTES: Value("2097152"),
        "the largest request body taken, on every route (more: 413)";
    STANDMEET_RETRY_BASE_MS: Value("1000"),
        "the retry backoff unit (base × attempt⁴)";
    STANDMEET_MAIL_PER_RECIPIENT_PER_HOUR: Value("5"),
        "mails one address gets at most an hour";
    STANDMEET_CONFIRM_LINK_HOURS: Value("24"),
        "how long an address confirmation link works";
    STANDMEET_JOB_LEASE_MS: Value("30000"),
        "how long a running job stays its worker's without renewal";
    STANDMEET_KEEP_COMPLETED_HOURS: Value("24"),
        "how long completed and cancelled jobs are kept";
    STANDMEET_KEEP_DISCARDED_HOURS: Value("168"),
        "how long discarded jobs are kept";
    STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE: Value("10"),
        "failed sign-ins (and access codes) per client address a minute";
    STANDMEET_FETCH_ALLOW_PRIVATE: Value("false"),
        "let job boards and webhooks be on private addresses";
    STANDMEET_WEBHOOK_TIMEOUT_MS: Value("10000"),
        "how long one webhook delivery attempt may take";
    STANDMEET_KEEP_EVENTS_DAYS: Value("30"),
        "how long events and their deliveries are kept";
    STANDMEET_LISTEN_DATABASE_URL: Nothing("DATABASE_URL"),
        "where the one LISTEN connection goes (behind a transaction-pooling PgBouncer: a direct URL)";
    STANDMEET_LOG_FORMAT: Value("text"),
        "text, or json: one JSON object per line with the span fields";
    STANDMEET_MCP_TOOL_NAMES: Value("dots"),
        "dots (access_requests.list) or underscore (access_requests_list) in MCP tool names";
    STANDMEET_METRICS_TOKEN: Nothing("unset: loopback only"),
        "the bearer token of /metrics";
    STANDMEET_DB_POOL_SIZE: Value("16"),
        "database connections for requests (the job engine and the listener have their own)";
    STANDMEET_DATABASE_WAIT_MS: Value("60000"),
        "how long serve, migrate and the admin commands wait for DATABASE_URL's server to answer (0: not at all)";
    STANDMEET_HEADER_TIMEOUT_MS: Value("10000"),
        "how long a connection may take to send a request's headers before it is closed";
    STANDMEET_TRUSTED_PROXIES: Nothing("unset: none"),
        "reverse proxies (CIDRs) whose forwarded header names the client";
    STANDMEET_TRUSTED_PROXY_HEADER: Value("x-forwarded-for"),
        "the header those proxies name the client in: x-forwarded-for or forwarded";
    STANDMEET_TIMEZONE: Value("UTC"),
        "the owner's IANA time zone, for the booking windows and the schedules";
    STANDMEET_BOOKING: Value("access"),
        "who may book: access, open or off";
    STANDMEET_VAULT: Nothing("unset: no vault"),
        "an Obsidian vault (a folder of Markdown notes) the corpus is rebuilt from";
    STANDMEET_TRACE_URL: Nothing("unset: the trace id as text"),
        "a trace viewer's address for one trace, with {trace_id} in it (a job's page links there)";
    STANDMEET_VAULT_WATCH: Value("false"),
        "rebuild the corpus within 2 s of a change under the vault";
    RUST_LOG: Value(DEFAULT_LOG_FILTER),
        "the log filter";
}

/// The settings as `standmeet --help` lists them.
pub fn settings_help() -> String {
    let width = SETTINGS
        .iter()
        .map(|setting| setting.name.len())
        .max()
        .unwrap_or(0);
    let mut text =
        String::from("Settings (from the environment; a bad value stops the start, naming it):\n");
    for setting in SETTINGS {
        text.push_str(&format!(
            "  {:<width$}  {} [default: {}]\n",
            setting.name,
            setting.meaning,
            setting.when_unset.shown()
        ));
    }
    text
}

/// How the log is written (`STANDMEET_LOG_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Lines for people (the default).
    Text,
    /// One JSON object per line, with the span fields, for log collectors.
    Json,
}

/// Which header the trusted proxies name the client in
/// (`STANDMEET_TRUSTED_PROXY_HEADER`): only that one is read, so a client cannot put its
/// own claim in the other one, which the proxy passes on untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProxyHeader {
    /// `X-Forwarded-For: client, proxy1, …` (the default).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
}

/// How MCP tools are named (`STANDMEET_MCP_TOOL_NAMES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolNames {
    /// `access_requests.list`: the default, as docs/reference/mcp-tools.md names them.
    Dots,
    /// `access_requests_list`: for MCP clients that refuse dots in tool names.
    Underscore,
}

/// Who may book a meeting (`STANDMEET_BOOKING`, docs/bookings.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookingMode {
    /// The default: a visitor whose session redeemed an access code (and the owner's
    /// agent over MCP).
    Access,
    /// Any visitor.
    Open,
    /// Nobody: `/book` says bookings are closed, the booking tools refuse.
    Off,
}

impl BookingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BookingMode::Access => "access",
            BookingMode::Open => "open",
            BookingMode::Off => "off",
        }
    }
}

/// The parsed settings of one StandMeet process.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `DATABASE_URL`; `None` means "start and own the private cluster".
    pub database_url: Option<String>,
    /// `STANDMEET_DATA_DIR`: the private cluster lives under `<data_dir>/pg`.
    pub data_dir: PathBuf,
    /// `LEPTOS_SITE_ADDR`: the address the HTTP server binds.
    pub site_addr: SocketAddr,
    /// `STANDMEET_PUBLIC_URL`: how people reach StandMeet (links in mail, cookie flags).
    /// Defaults to `http://<site_addr>`.
    pub public_url: Url,
    /// `STANDMEET_MAIL`.
    pub mail: MailSupplier,
    /// `STANDMEET_MAIL_FROM`: the sender of every mail.
    pub mail_from: MailFrom,
    /// `STANDMEET_OWNER_EMAIL`: who is told about new access requests (else the first admin).
    pub owner_email: Option<EmailAddress>,
    /// `STANDMEET_ADMIN_EMAIL` (+ `STANDMEET_ADMIN_PASSWORD`): see [`AdminBootstrap`].
    pub admin: Option<AdminBootstrap>,
    /// `STANDMEET_MCP_TOKEN`: the bearer token of `/mcp`; `None` disables MCP.
    pub mcp_token: Option<String>,
    /// `STANDMEET_APPROVE_WAIT_MS`: how long an approval waits for its mail.
    pub approve_wait: Duration,
    /// `STANDMEET_FETCH_WAIT_MS`: how long "fetch new listings" waits for its jobs.
    pub fetch_wait: Duration,
    /// `STANDMEET_INDEX_WAIT_MS`: how long a corpus write waits for its index job.
    pub index_wait: Duration,
    /// `STANDMEET_DATABASE_WAIT_MS`: how long a start or a command waits for the operator's
    /// PostgreSQL to answer (one booting with the machine), trying again with backoff.
    pub database_wait: Duration,
    /// `STANDMEET_HEADER_TIMEOUT_MS`: how long a connection may take to send a
    /// request's headers (a slow client holds a connection, not the server).
    pub header_timeout: Duration,
    /// `STANDMEET_MAX_WAITERS`: how many callers may wait for jobs at once.
    pub max_waiters: usize,
    /// `STANDMEET_MAX_LIVE_CLIENTS`: how many live streams (`/api/live`) one process
    /// serves at once; more get 503 and their pages poll instead.
    pub max_live_clients: usize,
    /// `STANDMEET_MAX_BODY_BYTES`: the largest request body any route takes; a larger
    /// one is answered 413 in words (`security::body_limit`).
    pub max_body_bytes: usize,
    /// `STANDMEET_RETRY_BASE_MS`: the unit of the retry backoff (base × attempt⁴).
    pub retry_base: Duration,
    /// `STANDMEET_MAIL_PER_RECIPIENT_PER_HOUR`: mails one address gets at most in an
    /// hour; more wait their turn (never dropped).
    pub mail_per_recipient_per_hour: u32,
    /// `STANDMEET_CONFIRM_LINK_HOURS`: how long an address-confirmation link works.
    pub confirm_link_valid: Duration,
    /// `STANDMEET_JOB_LEASE_MS`: how long a running job stays its worker's without the
    /// worker renewing it; a dead worker's jobs are taken back after this.
    pub job_lease: Duration,
    /// `STANDMEET_KEEP_COMPLETED_HOURS`: how long completed and cancelled jobs are kept.
    pub keep_completed: Duration,
    /// `STANDMEET_KEEP_DISCARDED_HOURS`: how long discarded jobs are kept.
    pub keep_discarded: Duration,
    /// `STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE`: sign-in attempts allowed per client address
    /// and per email (a burst of this many, refilled at this rate).
    pub login_attempts_per_minute: std::num::NonZeroU32,
    /// `STANDMEET_FETCH_ALLOW_PRIVATE`: whether job boards and webhook URLs may be on
    /// loopback, private or link-local addresses (`false`: they are refused).
    pub fetch_allow_private: bool,
    /// `STANDMEET_WEBHOOK_TIMEOUT_MS`: how long one webhook delivery attempt may take.
    pub webhook_timeout: Duration,
    /// `STANDMEET_LISTEN_DATABASE_URL`: where the one LISTEN connection goes, when
    /// `DATABASE_URL` goes through a transaction-pooling PgBouncer.
    pub listen_database_url: Option<String>,
    /// `STANDMEET_LOG_FORMAT`: text or json.
    pub log_format: LogFormat,
    /// `STANDMEET_MCP_TOOL_NAMES`: dots (the default) or underscores in tool names.
    pub mcp_tool_names: ToolNames,
    /// `STANDMEET_METRICS_TOKEN`: the bearer token of `/metrics`; `None`: loopback
    /// clients only.
    pub metrics_token: Option<String>,
    /// `STANDMEET_DB_POOL_SIZE`: connections for requests (the job engine keeps its own
    /// ten and the listener one, beside these).
    pub db_pool_size: u32,
    /// `STANDMEET_TRUSTED_PROXIES`: the reverse proxies (CIDRs) whose `X-Forwarded-For`
    /// names the client; none by default.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `STANDMEET_TRUSTED_PROXY_HEADER`: the header they write the client into.
    pub trusted_proxy_header: ProxyHeader,
    /// `STANDMEET_TIMEZONE`: the owner's IANA time zone, in which the weekly booking
    /// windows are read (`UTC`).
    pub timezone: jiff::tz::TimeZone,
    /// `STANDMEET_BOOKING`: who may book a meeting.
    pub booking: BookingMode,
    /// `STANDMEET_KEEP_EVENTS_DAYS`: how long events (and their deliveries) are kept.
    pub keep_events: Duration,
    /// `STANDMEET_VAULT`: the Obsidian vault the corpus is rebuilt from (a folder, or
    /// where one will be: not a file); `None`: no vault.
    pub vault: Option<PathBuf>,
    /// `STANDMEET_VAULT_WATCH`: whether a change under the vault queues a rebuild.
    pub vault_watch: bool,
    /// `STANDMEET_TRACE_URL`: a trace viewer's address for one trace, holding
    /// `{trace_id}`; `None`: a job's trace id is shown as text.
    pub trace_url: Option<String>,
    /// `RUST_LOG`: the tracing filter (already checked to parse).
    pub log_filter: String,
}

/// The admin that `STANDMEET_ADMIN_EMAIL` and `STANDMEET_ADMIN_PASSWORD` ask for: with
/// a password, created or given that password at every start; without one, the address
/// of the first admin, made with a generated password while there is no admin at all.
#[derive(Clone)]
pub struct AdminBootstrap {
    pub email: EmailAddress,
    pub password: Option<String>,
}

/// The shortest admin password StandMeet takes, from the settings or the command line.
pub const MIN_PASSWORD_CHARS: usize = 8;

impl std::fmt::Debug for AdminBootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminBootstrap")
            .field("email", &self.email)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A setting that could not be used. Its message names the setting.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid setting {setting}{shown}: {problem}", shown = self.shown_value())]
pub struct ConfigError {
    pub setting: &'static str,
    /// The value as given, or `None` when it is secret (or missing).
    pub value: Option<String>,
    pub problem: String,
}

impl ConfigError {
    fn shown_value(&self) -> String {
        match &self.value {
            Some(value) => format!("={value:?}"),
            None => String::new(),
        }
    }
}

/// The default filter when `RUST_LOG` is unset: our own events at info, chatty
/// dependencies only when they warn.
pub const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,tower_http=info";

/// Directives added to every filter that does not name their target itself:
/// - `sqlx::pool`: the warning sqlx's pool gives for each connection it finds broken when
///   it takes it back (dozens while PostgreSQL restarts) says what StandMeet reports
///   itself, once, in its own words (a failed request, the listener reconnecting, a job
///   retried);
/// - `rmcp`: the MCP library writes three info lines for every tool call, one of them
///   the client's whole request; StandMeet's access log already has the call.
pub const QUIET_DEPENDENCIES: [(&str, &str); 2] = [
    ("sqlx::pool", "sqlx::pool::connection=error"),
    ("rmcp", "rmcp=warn"),
];

/// How StandMeet runs a queue: how many of its jobs at once in each process, and how
/// often it looks for work when no notification came. Callers wait on `mail`, `index`
/// and `fetch`, so those look every 100 ms at most even if a notification is lost.
pub fn queue_config(name: &str) -> standmeet_jobs::QueueConfig {
    use standmeet_jobs::QueueConfig;
    let quick = Duration::from_millis(100);
    match name {
        "mail" => QueueConfig::new(name, 5, quick),
        "index" => QueueConfig::new(name, 2, quick),
        "fetch" => QueueConfig::new(name, 8, quick),
        // A delivery mostly waits (for the receiver, for its commit): 32 at once keep
        // up with 1,000 events/s to one endpoint (`bench --only events`).
        "webhooks" => QueueConfig::new(name, 32, quick),
        _ => QueueConfig::new(name, 10, Duration::from_secs(1)),
    }
}

impl Settings {
    /// The host part of calendar UIDs (`booking-7@host`): the public URL's host.
    pub fn calendar_uid_host(&self) -> &str {
        self.public_url.host_str().unwrap_or("standmeet")
    }

    /// Reads every setting from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads every setting through `lookup` (the environment, or a map in tests).
    /// An empty value counts as unset, as shells make it easy to export `X=`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Environment { lookup: &lookup };
        // Group by group, each read and checked on its own (see the functions below).
        let Place {
            database_url,
            data_dir,
            site_addr,
            public_url,
            listen_database_url,
            db_pool_size,
        } = place(&vars)?;
        let MailSettings {
            mail,
            mail_from,
            owner_email,
            mail_per_recipient_per_hour,
            confirm_link_valid,
        } = mail_settings(&vars, &public_url)?;
        let Doors {
            admin,
            mcp_token,
            login_attempts_per_minute,
            mcp_tool_names,
            metrics_token,
            trusted_proxies,
            trusted_proxy_header,
        } = doors(&vars)?;
        let Limits {
            approve_wait,
            fetch_wait,
            index_wait,
            database_wait,
            header_timeout,
            max_waiters,
            max_live_clients,
            max_body_bytes,
        } = limits(&vars)?;
        let JobSettings {
            retry_base,
            job_lease,
            keep_completed,
            keep_discarded,
            fetch_allow_private,
            webhook_timeout,
            keep_events,
        } = job_settings(&vars)?;
        let Desk {
            timezone,
            booking,
            vault,
            vault_watch,
        } = desk(&vars)?;
        let Observing {
            log_format,
            trace_url,
            log_filter,
        } = observing(&vars)?;

        Ok(Settings {
            database_url,
            data_dir,
            site_addr,
            public_url,
            mail,
            mail_from,
            owner_email,
            admin,
            mcp_token,
            approve_wait,
            fetch_wait,
            index_wait,
            database_wait,
            header_timeout,
            max_waiters,
            max_live_clients,
            max_body_bytes,
            retry_base,
            mail_per_recipient_per_hour,
            confirm_link_valid,
            job_lease,
            keep_completed,
            keep_discarded,
            login_attempts_per_minute,
            fetch_allow_private,
            webhook_timeout,
            keep_events,
            vault,
            vault_watch,
            listen_database_url,
            log_format,
            mcp_tool_names,
            metrics_token,
            db_pool_size,
            trusted_proxies,
            trusted_proxy_header,
            timezone,
            booking,
            trace_url,
            log_filter,
        })
    }

    /// Whether people reach StandMeet over https (session cookies are then `Secure`).
    /// The job engine of a StandMeet process: a queue for each queue `registry`'s kinds
    /// use (tuned by [`queue_config`]), with the backoff, lease and retention set here.
    pub fn engine_config(
        &self,
        registry: &standmeet_jobs::Registry,
    ) -> standmeet_jobs::EngineConfig {
        standmeet_jobs::EngineConfig {
            queues: registry.queues().map(queue_config).collect(),
            retry_base: self.retry_base,
            lease: self.job_lease,
            rescue_interval: (self.job_lease / 2).max(Duration::from_millis(100)),
            keep_completed: self.keep_completed,
            keep_discarded: self.keep_discarded,
            listen_database_url: self.listen_database_url.clone(),
            schedules: Some(self.timezone.clone()),
            ..standmeet_jobs::EngineConfig::default()
        }
    }

    pub fn is_https(&self) -> bool {
        self.public_url.scheme() == "https"
    }

    /// The private cluster's directory, `<STANDMEET_DATA_DIR>/pg`.
    pub fn private_cluster_dir(&self) -> PathBuf {
        self.data_dir.join("pg")
    }
}

/// What the process was given, as the settings read it.
struct Environment<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Environment<'_> {
    /// The value given for `setting`; a blank one is none.
    fn given(&self, setting: &Setting) -> Option<String> {
        (self.lookup)(setting.name).filter(|value| !value.trim().is_empty())
    }

    /// What `setting` holds: the value given, else its default value (nothing for a
    /// setting that is off, or made from others, when unset).
    fn read(&self, setting: &Setting) -> Option<String> {
        self.given(setting).or_else(|| match setting.when_unset {
            WhenUnset::Value(value) => Some(value.to_string()),
            WhenUnset::Nothing(_) => None,
        })
    }

    /// The value of `name` exactly as given, blank or not.
    fn lookup_raw(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
    }
}

/// Where StandMeet keeps its data, listens and is reached, and its database.
struct Place {
    database_url: Option<String>,
    data_dir: PathBuf,
    site_addr: SocketAddr,
    public_url: Url,
    listen_database_url: Option<String>,
    db_pool_size: u32,
}

fn place(vars: &Environment<'_>) -> Result<Place, ConfigError> {
    let given = |setting: &Setting| vars.given(setting);
    let read = |setting: &Setting| vars.read(setting);
    let database_url = given(&env::DATABASE_URL)
        .map(|raw| parse_database_url(&raw))
        .transpose()?;
    let data_dir = PathBuf::from(read(&env::STANDMEET_DATA_DIR).unwrap_or_default());

    let raw = read(&env::LEPTOS_SITE_ADDR).unwrap_or_default();
    let site_addr = raw.trim().parse::<SocketAddr>().map_err(|_| ConfigError {
        setting: env::LEPTOS_SITE_ADDR.name,
        value: Some(raw.clone()),
        problem: "expected an IP address and port, such as 127.0.0.1:3000".into(),
    })?;

    let public_url = match given(&env::STANDMEET_PUBLIC_URL) {
        Some(raw) => parse_public_url(&raw)?,
        None => Url::parse(&format!("http://{site_addr}")).expect("a socket address makes a URL"),
    };

    let listen_database_url = given(&env::STANDMEET_LISTEN_DATABASE_URL)
        .map(|raw| {
            parse_database_url(&raw).map_err(|err| ConfigError {
                setting: env::STANDMEET_LISTEN_DATABASE_URL.name,
                ..err
            })
        })
        .transpose()?;
    let db_pool_size = parse_count(&read, &env::STANDMEET_DB_POOL_SIZE, 1..=1000)? as u32;
    Ok(Place {
        database_url,
        data_dir,
        site_addr,
        public_url,
        listen_database_url,
        db_pool_size,
    })
}

/// How StandMeet mails, as whom, and how often.
struct MailSettings {
    mail: MailSupplier,
    mail_from: MailFrom,
    owner_email: Option<EmailAddress>,
    mail_per_recipient_per_hour: u32,
    confirm_link_valid: Duration,
}

fn mail_settings(vars: &Environment<'_>, public_url: &Url) -> Result<MailSettings, ConfigError> {
    let given = |setting: &Setting| vars.given(setting);
    let read = |setting: &Setting| vars.read(setting);
    let mail = parse_mail_supplier(&read(&env::STANDMEET_MAIL).unwrap_or_default())?;

    let mail_from = match given(&env::STANDMEET_MAIL_FROM) {
        Some(raw) => parse_mail_from(&raw)?,
        None => MailFrom {
            name: DEFAULT_SENDER_NAME.to_string(),
            address: default_mail_from(public_url),
        },
    };

    let owner_email = given(&env::STANDMEET_OWNER_EMAIL)
        .map(|raw| parse_email(env::STANDMEET_OWNER_EMAIL.name, &raw))
        .transpose()?;

    let mail_per_recipient_per_hour = parse_count(
        &read,
        &env::STANDMEET_MAIL_PER_RECIPIENT_PER_HOUR,
        1..=10_000,
    )? as u32;
    let confirm_link_valid = parse_count(&read, &env::STANDMEET_CONFIRM_LINK_HOURS, 1..=24 * 30)
        .map(|hours| Duration::from_secs(hours as u64 * 3600))?;
    Ok(MailSettings {
        mail,
        mail_from,
        owner_email,
        mail_per_recipient_per_hour,
        confirm_link_valid,
    })
}

/// Who may come in, and through which door: the first admin, the MCP and metrics tokens, sign-in attempts, the proxies trusted to say who a client is.
struct Doors {
    admin: Option<AdminBootstrap>,
    mcp_token: Option<String>,
    login_attempts_per_minute: std::num::NonZeroU32,
    mcp_tool_names: ToolNames,
    metrics_token: Option<String>,
    trusted_proxies: Vec<ipnet::IpNet>,
    trusted_proxy_header: ProxyHeader,
}

fn doors(vars: &Environment<'_>) -> Result<Doors, ConfigError> {
    let given = |setting: &Setting| vars.given(setting);
    let read = |setting: &Setting| vars.read(setting);
    let admin = match (
        given(&env::STANDMEET_ADMIN_EMAIL),
        vars.lookup_raw(env::STANDMEET_ADMIN_PASSWORD.name),
    ) {
        (None, None) => None,
        (Some(email), Some(password)) if !password.is_empty() => {
            let email = parse_email(env::STANDMEET_ADMIN_EMAIL.name, &email)?;
            if password.chars().count() < MIN_PASSWORD_CHARS {
                return Err(ConfigError {
                    setting: env::STANDMEET_ADMIN_PASSWORD.name,
                    value: None,
                    problem: "the password must be at least 8 characters long".into(),
                });
            }
            Some(AdminBootstrap {
                email,
                password: Some(password),
            })
        }
        // The address alone names the first admin, made with a generated password
        // while there is no admin at all.
        (Some(email), _) => Some(AdminBootstrap {
            email: parse_email(env::STANDMEET_ADMIN_EMAIL.name, &email)?,
            password: None,
        }),
        (None, Some(_)) => {
            return Err(ConfigError {
                setting: env::STANDMEET_ADMIN_EMAIL.name,
                value: None,
                problem: "it must be set when STANDMEET_ADMIN_PASSWORD is set".into(),
            });
        }
    };

    let mcp_token = given(&env::STANDMEET_MCP_TOKEN)
        .map(|token| check_token(env::STANDMEET_MCP_TOKEN.name, token))
        .transpose()?;
    // Anyone who reaches /mcp may guess it: it must be long enough not to be.
    if let Some(token) = &mcp_token
        && token.chars().count() < MIN_MCP_TOKEN_CHARS
    {
        return Err(ConfigError {
            setting: env::STANDMEET_MCP_TOKEN.name,
            value: None,
            problem: format!(
                "the token must be at least {MIN_MCP_TOKEN_CHARS} characters long (it has {}); make one with `openssl rand -hex 32`",
                token.chars().count()
            ),
        });
    }

    let login_attempts_per_minute =
        parse_count(&read, &env::STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE, 1..=10_000)
            .map(|n| std::num::NonZeroU32::new(n as u32).expect("the range starts at 1"))?;

    let mcp_tool_names = parse_choice(
        &read,
        &env::STANDMEET_MCP_TOOL_NAMES,
        &[
            ("dots", ToolNames::Dots),
            ("underscore", ToolNames::Underscore),
        ],
        "it must be dots (access_requests.list) or underscore (access_requests_list)",
    )?;
    let metrics_token = given(&env::STANDMEET_METRICS_TOKEN)
        .map(|token| check_token(env::STANDMEET_METRICS_TOKEN.name, token))
        .transpose()?;
    let trusted_proxies = match given(&env::STANDMEET_TRUSTED_PROXIES) {
        None => Vec::new(),
        Some(raw) => raw
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(|part| {
                part.parse::<ipnet::IpNet>()
                    .or_else(|_| part.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| ConfigError {
                        setting: env::STANDMEET_TRUSTED_PROXIES.name,
                        value: Some(raw.clone()),
                        problem: format!(
                            "{part:?} is not an address or a CIDR; write them comma-separated, such as 10.0.0.0/8, 192.0.2.7"
                        ),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let trusted_proxy_header = parse_choice(
        &read,
        &env::STANDMEET_TRUSTED_PROXY_HEADER,
        &[
            ("x-forwarded-for", ProxyHeader::XForwardedFor),
            ("forwarded", ProxyHeader::Forwarded),
        ],
        "it must be x-forwarded-for or forwarded",
    )?;
    Ok(Doors {
        admin,
        mcp_token,
        login_attempts_per_minute,
        mcp_tool_names,
        metrics_token,
        trusted_proxies,
        trusted_proxy_header,
    })
}

/// How long callers wait, and how much the server takes at once.
struct Limits {
    approve_wait: Duration,
    fetch_wait: Duration,
    index_wait: Duration,
    database_wait: Duration,
    header_timeout: Duration,
    max_waiters: usize,
    max_live_clients: usize,
    max_body_bytes: usize,
}

fn limits(vars: &Environment<'_>) -> Result<Limits, ConfigError> {
    let read = |setting: &Setting| vars.read(setting);
    let approve_wait = parse_millis(&read, &env::STANDMEET_APPROVE_WAIT_MS)?;
    let fetch_wait = parse_millis(&read, &env::STANDMEET_FETCH_WAIT_MS)?;
    let index_wait = parse_millis(&read, &env::STANDMEET_INDEX_WAIT_MS)?;
    let database_wait = parse_millis(&read, &env::STANDMEET_DATABASE_WAIT_MS)?;
    let header_timeout = parse_millis(&read, &env::STANDMEET_HEADER_TIMEOUT_MS)?;
    if header_timeout.is_zero() {
        return Err(ConfigError {
            setting: env::STANDMEET_HEADER_TIMEOUT_MS.name,
            value: Some("0".into()),
            problem: "it must be more than 0: a connection needs some time to send its headers"
                .into(),
        });
    }
    let max_waiters = parse_count(&read, &env::STANDMEET_MAX_WAITERS, 0..=100_000)?;
    let max_live_clients = parse_count(&read, &env::STANDMEET_MAX_LIVE_CLIENTS, 0..=100_000)?;
    let max_body_bytes = parse_count(
        &read,
        &env::STANDMEET_MAX_BODY_BYTES,
        1024..=1024 * 1024 * 1024,
    )?;
    Ok(Limits {
        approve_wait,
        fetch_wait,
        index_wait,
        database_wait,
        header_timeout,
        max_waiters,
        max_live_clients,
        max_body_bytes,
    })
}

/// The jobs: retries, the lease, what is kept and how long, and what fetches and webhooks may do.
struct JobSettings {
    retry_base: Duration,
    job_lease: Duration,
    keep_completed: Duration,
    keep_discarded: Duration,
    fetch_allow_private: bool,
    webhook_timeout: Duration,
    keep_events: Duration,
}

fn job_settings(vars: &Environment<'_>) -> Result<JobSettings, ConfigError> {
    let given = |setting: &Setting| vars.given(setting);
    let read = |setting: &Setting| vars.read(setting);
    let retry_base = parse_millis(&read, &env::STANDMEET_RETRY_BASE_MS)?;
    let job_lease = parse_millis(&read, &env::STANDMEET_JOB_LEASE_MS)?;
    if job_lease < Duration::from_millis(300) {
        return Err(ConfigError {
            setting: env::STANDMEET_JOB_LEASE_MS.name,
            value: given(&env::STANDMEET_JOB_LEASE_MS),
            problem: "at least 300 milliseconds".into(),
        });
    }
    let hours = |n: usize| Duration::from_secs(n as u64 * 3600);
    let keep_completed =
        parse_count(&read, &env::STANDMEET_KEEP_COMPLETED_HOURS, 1..=24 * 365).map(hours)?;
    let keep_discarded =
        parse_count(&read, &env::STANDMEET_KEEP_DISCARDED_HOURS, 1..=24 * 365).map(hours)?;
    let fetch_allow_private = parse_bool(&read, &env::STANDMEET_FETCH_ALLOW_PRIVATE)?;
    let webhook_timeout = parse_millis(&read, &env::STANDMEET_WEBHOOK_TIMEOUT_MS)?;
    if webhook_timeout < Duration::from_millis(100) || webhook_timeout > MAX_WEBHOOK_TIMEOUT {
        return Err(ConfigError {
            setting: env::STANDMEET_WEBHOOK_TIMEOUT_MS.name,
            value: given(&env::STANDMEET_WEBHOOK_TIMEOUT_MS),
            problem: format!(
                "it must be between 100 and {} milliseconds",
                MAX_WEBHOOK_TIMEOUT.as_millis()
            ),
        });
    }
    let keep_events = parse_count(&read, &env::STANDMEET_KEEP_EVENTS_DAYS, 1..=3650)
        .map(|days| Duration::from_secs(days as u64 * 24 * 3600))?;
    Ok(JobSettings {
        retry_base,
        job_lease,
        keep_completed,
        keep_discarded,
        fetch_allow_private,
        webhook_timeout,
        keep_events,
    })
}

/// The owner's desk: its time zone, bookings and the vault of notes.
struct Desk {
    timezone: jiff::tz::TimeZone,
    booking: BookingMode,
    vault: Option<PathBuf>,
    vault_watch: bool,
}

fn desk(vars: &Environment<'_>) -> Result<Desk, ConfigError> {
    let read = |setting: &Setting| vars.read(setting);
    let raw = read(&env::STANDMEET_TIMEZONE).unwrap_or_default();
    let timezone = jiff::tz::TimeZone::get(raw.trim()).map_err(|_| ConfigError {
        setting: env::STANDMEET_TIMEZONE.name,
        value: Some(raw.clone()),
        problem:
            "not a time zone name; use an IANA name such as Europe/Berlin, America/New_York or UTC"
                .into(),
    })?;
    let booking = parse_choice(
        &read,
        &env::STANDMEET_BOOKING,
        &[
            ("access", BookingMode::Access),
            ("open", BookingMode::Open),
            ("off", BookingMode::Off),
        ],
        "it must be access (visitors with an access code), open (anyone) or off",
    )?;

    let vault = match read(&env::STANDMEET_VAULT).map(|raw| raw.trim().to_string()) {
        None => None,
        Some(raw) if raw.is_empty() => None,
        Some(raw) => {
            // A folder that is not there yet (a mount that comes up after the
            // server) is no bad setting: the watcher waits for it and a rebuild
            // says so in words. A file there is a wrong name, said now.
            let is_a_file = std::fs::metadata(&raw).is_ok_and(|meta| !meta.is_dir());
            if is_a_file {
                let problem = "it is a file; name the folder that holds the notes";
                return Err(ConfigError {
                    setting: env::STANDMEET_VAULT.name,
                    value: Some(raw),
                    problem: problem.into(),
                });
            }
            Some(PathBuf::from(raw))
        }
    };
    let vault_watch = parse_bool(&read, &env::STANDMEET_VAULT_WATCH)?;
    if vault_watch && vault.is_none() {
        return Err(ConfigError {
            setting: env::STANDMEET_VAULT_WATCH.name,
            value: Some("true".into()),
            problem: "there is no vault to watch: set STANDMEET_VAULT too".into(),
        });
    }
    Ok(Desk {
        timezone,
        booking,
        vault,
        vault_watch,
    })
}

/// What the process says of itself: its log's format and filter, and where a trace is shown.
struct Observing {
    log_format: LogFormat,
    trace_url: Option<String>,
    log_filter: String,
}

fn observing(vars: &Environment<'_>) -> Result<Observing, ConfigError> {
    let read = |setting: &Setting| vars.read(setting);
    let log_format = parse_choice(
        &read,
        &env::STANDMEET_LOG_FORMAT,
        &[("text", LogFormat::Text), ("json", LogFormat::Json)],
        "it must be text or json",
    )?;
    let trace_url = match read(&env::STANDMEET_TRACE_URL).map(|raw| raw.trim().to_string()) {
        None => None,
        Some(raw) if raw.is_empty() => None,
        Some(raw) => {
            let web = url::Url::parse(&raw.replace("{trace_id}", "0"))
                .is_ok_and(|url| matches!(url.scheme(), "http" | "https"));
            let problem = if !web {
                Some("it must be an http or https address")
            } else if !raw.contains("{trace_id}") {
                Some("it must hold {trace_id}, where the trace's id goes")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(ConfigError {
                    setting: env::STANDMEET_TRACE_URL.name,
                    value: Some(raw),
                    problem: problem.into(),
                });
            }
            Some(raw)
        }
    };

    let raw = read(&env::RUST_LOG).unwrap_or_default();
    tracing_subscriber::EnvFilter::builder()
        .parse(&raw)
        .map_err(|err| ConfigError {
            setting: env::RUST_LOG.name,
            value: Some(raw.clone()),
            problem: format!(
                "not a tracing filter ({err}); try RUST_LOG=info or RUST_LOG=standmeet=debug"
            ),
        })?;
    let log_filter = raw;
    Ok(Observing {
        log_format,
        trace_url,
        log_filter,
    })
}

/// The shortest MCP token StandMeet accepts.
pub const MIN_MCP_TOKEN_CHARS: usize = 32;

/// The longest wait any setting may ask for: past ten minutes an HTTP client has
/// long given up, so a bigger number is a typo.
const MAX_WAIT_MS: u64 = 600_000;

/// The longest `STANDMEET_WEBHOOK_TIMEOUT_MS`: an attempt must end well within the
/// delivery job's own time limit (`webhooks.deliver`'s one minute).
pub const MAX_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(50);

fn parse_millis(
    read: &impl Fn(&Setting) -> Option<String>,
    setting: &Setting,
) -> Result<Duration, ConfigError> {
    let raw = read(setting).unwrap_or_default();
    let setting = setting.name;
    match raw.trim().parse::<u64>() {
        Ok(ms) if ms <= MAX_WAIT_MS => Ok(Duration::from_millis(ms)),
        Ok(_) => Err(ConfigError {
            setting,
            value: Some(raw.clone()),
            problem: format!("at most {MAX_WAIT_MS} milliseconds (ten minutes)"),
        }),
        Err(_) => Err(ConfigError {
            setting,
            value: Some(raw.clone()),
            problem: "expected a whole number of milliseconds, such as 2000".into(),
        }),
    }
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
fn parse_bool(
    read: &impl Fn(&Setting) -> Option<String>,
    setting: &Setting,
) -> Result<bool, ConfigError> {
    let raw = read(setting).unwrap_or_default();
    let setting = setting.name;
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(ConfigError {
            setting,
            value: Some(raw.clone()),
            problem: "it must be true or false".into(),
        }),
    }
}

/// One of a few words (case and spaces ignored).
fn parse_choice<T: Copy>(
    read: &impl Fn(&Setting) -> Option<String>,
    setting: &Setting,
    choices: &[(&str, T)],
    problem: &str,
) -> Result<T, ConfigError> {
    let raw = read(setting).unwrap_or_default();
    let setting = setting.name;
    let word = raw.trim().to_ascii_lowercase();
    choices
        .iter()
        .find(|(name, _)| *name == word)
        .map(|(_, value)| *value)
        .ok_or_else(|| ConfigError {
            setting,
            value: Some(raw.clone()),
            problem: problem.to_string(),
        })
}

/// A bearer token as a setting: no spaces or control characters (never echoed back).
fn check_token(setting: &'static str, token: String) -> Result<String, ConfigError> {
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError {
            setting,
            value: None,
            problem: "a bearer token cannot contain spaces or control characters".into(),
        });
    }
    Ok(token)
}

fn parse_count(
    read: &impl Fn(&Setting) -> Option<String>,
    setting: &Setting,
    allowed: std::ops::RangeInclusive<usize>,
) -> Result<usize, ConfigError> {
    let raw = read(setting).unwrap_or_default();
    let setting = setting.name;
    match raw.trim().parse::<usize>() {
        Ok(n) if allowed.contains(&n) => Ok(n),
        _ => Err(ConfigError {
            setting,
            value: Some(raw.clone()),
            problem: format!(
                "expected a whole number from {} to {}",
                allowed.start(),
                allowed.end()
            ),
        }),
    }
}

fn parse_database_url(raw: &str) -> Result<String, ConfigError> {
    let problem = match Url::parse(raw.trim()) {
        Ok(url) if matches!(url.scheme(), "postgres" | "postgresql") => {
            return Ok(raw.trim().to_string());
        }
        Ok(url) => format!(
            "expected a postgres:// or postgresql:// URL, not {}://",
            url.scheme()
        ),
        Err(err) => {
            format!("not a URL ({err}); expected postgres://user:password@host:port/database")
        }
    };
    // The URL may hold a password: never repeat it.
    Err(ConfigError {
        setting: env::DATABASE_URL.name,
        value: None,
        problem,
    })
}

fn parse_public_url(raw: &str) -> Result<Url, ConfigError> {
    let error = |problem: &str| ConfigError {
        setting: env::STANDMEET_PUBLIC_URL.name,
        value: Some(raw.to_string()),
        problem: problem.to_string(),
    };
    let url = Url::parse(raw.trim())
        .map_err(|_| error("expected an absolute URL such as https://standmeet.example.com"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(error("expected an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(error("the URL needs a host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(error("the URL cannot have a query or a fragment"));
    }
    Ok(url)
}

fn parse_mail_supplier(raw: &str) -> Result<MailSupplier, ConfigError> {
    let trimmed = raw.trim();
    match trimmed {
        "log" => return Ok(MailSupplier::Log),
        "none" => return Ok(MailSupplier::None),
        _ => {}
    }
    // An SMTP URL may carry credentials: show the value only when it has none.
    let shown = Url::parse(trimmed)
        .ok()
        .filter(|url| url.password().is_none())
        .map(|_| raw.to_string());
    let error = |problem: String| ConfigError {
        setting: env::STANDMEET_MAIL.name,
        value: shown.clone(),
        problem,
    };
    let url = Url::parse(trimmed).map_err(|_| {
        error("expected log, none, smtp://host:port or smtps://host:port".to_string())
    })?;
    if !matches!(url.scheme(), "smtp" | "smtps" | "smtp+insecure") {
        return Err(error(format!(
            "unknown mail supplier {:?}; expected log, none, smtp://host:port, smtps://host:port or smtp+insecure://host:port",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(error(
            "the SMTP URL needs a host, as in smtp://127.0.0.1:2525".to_string(),
        ));
    }
    Ok(MailSupplier::Smtp(url))
}

fn parse_email(setting: &'static str, raw: &str) -> Result<EmailAddress, ConfigError> {
    EmailAddress::parse(raw).map_err(|err| ConfigError {
        setting,
        value: Some(raw.to_string()),
        problem: err.to_string(),
    })
}

/// The sender of every mail: the name people see (`StandMeet` unless the setting names
/// one) and the address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailFrom {
    pub name: String,
    pub address: EmailAddress,
}

/// The sender's name when `STANDMEET_MAIL_FROM` gives an address alone.
pub const DEFAULT_SENDER_NAME: &str = "StandMeet";

/// `desk@example.com`, or with a display name `Front desk <desk@example.com>` (the name
/// may be in double quotes). A name with a line break or another control character is
/// refused: it would end the header it is written into.
fn parse_mail_from(raw: &str) -> Result<MailFrom, ConfigError> {
    let setting = env::STANDMEET_MAIL_FROM.name;
    let refuse = |problem: &str| ConfigError {
        setting,
        value: Some(raw.to_string()),
        problem: problem.to_string(),
    };
    let raw_trimmed = raw.trim();
    let Some(open) = raw_trimmed.find('<') else {
        return Ok(MailFrom {
            name: DEFAULT_SENDER_NAME.to_string(),
            address: parse_email(setting, raw_trimmed)?,
        });
    };
    let Some(address) = raw_trimmed[open + 1..].strip_suffix('>') else {
        return Err(refuse(
            "a sender with a name is written `Name <address>`, ending with `>`",
        ));
    };
    let name = raw_trimmed[..open].trim();
    let name = name
        .strip_prefix('"')
        .and_then(|name| name.strip_suffix('"'))
        .unwrap_or(name)
        .trim();
    if name.chars().any(char::is_control) {
        return Err(refuse(
            "the sender's name holds a line break or another control character",
        ));
    }
    Ok(MailFrom {
        name: if name.is_empty() {
            DEFAULT_SENDER_NAME
        } else {
            name
        }
        .to_string(),
        address: parse_email(setting, address.trim())?,
    })
}

/// `standmeet@<public host>`, or `standmeet@localhost` when the host is an IP address.
fn default_mail_from(public_url: &Url) -> EmailAddress {
    let host = match public_url.host() {
        Some(url::Host::Domain(domain)) => domain.to_string(),
        _ => "localhost".to_string(),
    };
    EmailAddress::parse(&format!("standmeet@{host}"))
        .unwrap_or_else(|_| EmailAddress::parse("standmeet@localhost").expect("a valid address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn no_settings_gives_the_documented_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.database_url, None);
        assert_eq!(s.data_dir, PathBuf::from(".standmeet"));
        assert_eq!(s.site_addr.to_string(), "127.0.0.1:3000");
        assert_eq!(s.public_url.as_str(), "http://127.0.0.1:3000/");
        assert_eq!(s.mail, MailSupplier::Log);
        assert_eq!(s.mail_from.address.as_str(), "standmeet@localhost");
        assert_eq!(s.approve_wait, Duration::from_millis(2_000));
        assert_eq!(s.fetch_wait, Duration::from_millis(20_000));
        assert_eq!(s.index_wait, Duration::from_millis(2_000));
        assert_eq!(s.max_waiters, 64);
        assert_eq!(s.max_live_clients, 256);
        assert_eq!(s.max_body_bytes, 2 * 1024 * 1024);
        assert_eq!(s.retry_base, Duration::from_millis(1_000));
        assert_eq!(s.login_attempts_per_minute.get(), 10);
        assert_eq!(s.job_lease, Duration::from_secs(30));
        assert_eq!(s.mail_per_recipient_per_hour, 5);
        assert_eq!(s.keep_completed, Duration::from_secs(24 * 3600));
        assert_eq!(s.keep_discarded, Duration::from_secs(7 * 24 * 3600));
        assert!(s.admin.is_none());
        assert!(s.mcp_token.is_none());
        assert_eq!(s.timezone, jiff::tz::TimeZone::UTC);
        assert_eq!(s.booking, BookingMode::Access);
        assert_eq!(s.db_pool_size, 16);
        assert_eq!(
            settings(&[("STANDMEET_DB_POOL_SIZE", "40")])
                .unwrap()
                .db_pool_size,
            40
        );
        assert_eq!(
            settings(&[("STANDMEET_DB_POOL_SIZE", "0")])
                .unwrap_err()
                .setting,
            "STANDMEET_DB_POOL_SIZE"
        );
    }

    #[test]
    fn every_default_in_the_table_is_what_an_unset_setting_gives() {
        let unset = format!("{:?}", settings(&[]).unwrap());
        for setting in SETTINGS {
            if let WhenUnset::Value(value) = setting.when_unset {
                let given = settings(&[(setting.name, value)]).unwrap_or_else(|err| {
                    panic!("{}'s default does not parse: {err:?}", setting.name)
                });
                assert_eq!(format!("{given:?}"), unset, "{} = {value}", setting.name);
            }
        }
        // The pool `db::connect` makes without settings is the default's size.
        assert_eq!(
            settings(&[]).unwrap().db_pool_size,
            crate::db::APP_POOL_SIZE
        );
        let help = settings_help();
        for setting in SETTINGS {
            assert!(help.contains(setting.name), "{help}");
        }
        assert!(
            help.contains("STANDMEET_BOOKING") && help.contains("[default: access]"),
            "{help}"
        );
    }

    #[test]
    fn a_trace_url_needs_the_trace_id_and_a_web_address() {
        assert_eq!(settings(&[]).unwrap().trace_url, None);
        let given = "https://tempo.example/trace/{trace_id}";
        let s = settings(&[("STANDMEET_TRACE_URL", given)]).unwrap();
        assert_eq!(s.trace_url.as_deref(), Some(given));
        for (bad, words) in [
            ("https://tempo.example/trace/", "{trace_id}"),
            ("javascript:alert({trace_id})", "http or https"),
            ("tempo/{trace_id}", "http or https"),
        ] {
            let refused = settings(&[("STANDMEET_TRACE_URL", bad)]).unwrap_err();
            assert_eq!(refused.setting, "STANDMEET_TRACE_URL");
            assert!(
                refused.problem.contains(words),
                "{bad}: {}",
                refused.problem
            );
        }
    }

    #[test]
    fn booking_settings_parse_and_bad_ones_are_named() {
        let s = settings(&[
            ("STANDMEET_TIMEZONE", "Europe/Berlin"),
            ("STANDMEET_BOOKING", "open"),
        ])
        .unwrap();
        assert_eq!(s.timezone.iana_name(), Some("Europe/Berlin"));
        assert_eq!(s.booking, BookingMode::Open);
        let err = settings(&[("STANDMEET_TIMEZONE", "Mars/Olympus")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_TIMEZONE");
        let err = settings(&[("STANDMEET_BOOKING", "maybe")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_BOOKING");
    }

    #[test]
    fn the_vault_is_a_folder_or_not_there_yet_never_a_file_and_watching_needs_one() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.vault.clone(), s.vault_watch), (None, false));
        let folder = std::env::temp_dir();
        let s = settings(&[
            ("STANDMEET_VAULT", folder.to_str().unwrap()),
            ("STANDMEET_VAULT_WATCH", "true"),
        ])
        .unwrap();
        assert_eq!(s.vault.as_deref(), Some(folder.as_path()));
        assert!(s.vault_watch);
        // Not there yet: the watcher waits for it (a mount that comes up later).
        let later = settings(&[("STANDMEET_VAULT", "/no/such/vault")]).unwrap();
        assert_eq!(
            later.vault.as_deref(),
            Some(std::path::Path::new("/no/such/vault"))
        );
        let file = settings(&[("STANDMEET_VAULT", "/etc/hostname")]).unwrap_err();
        assert!(file.problem.contains("is a file"), "{}", file.problem);
        let watch = settings(&[("STANDMEET_VAULT_WATCH", "true")]).unwrap_err();
        assert_eq!(watch.setting, "STANDMEET_VAULT_WATCH");
    }

    #[test]
    fn a_short_mcp_token_stops_the_start() {
        let err = settings(&[("STANDMEET_MCP_TOKEN", "short-token")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_MCP_TOKEN");
        assert!(
            err.problem.contains("at least 32 characters"),
            "{}",
            err.problem
        );
        assert!(
            !err.to_string().contains("short-token"),
            "never echoed: {err}"
        );
        let long = "x".repeat(32);
        assert_eq!(
            settings(&[("STANDMEET_MCP_TOKEN", &long)])
                .unwrap()
                .mcp_token,
            Some(long)
        );
    }

    #[test]
    fn trusted_proxies_are_cidrs_or_addresses() {
        let s = settings(&[(
            "STANDMEET_TRUSTED_PROXIES",
            "10.0.0.0/8, 192.0.2.7,2001:db8::/32",
        )])
        .unwrap();
        assert_eq!(s.trusted_proxies.len(), 3);
        assert_eq!(s.trusted_proxies[1].to_string(), "192.0.2.7/32");
        assert!(settings(&[]).unwrap().trusted_proxies.is_empty());
        let err = settings(&[("STANDMEET_TRUSTED_PROXIES", "10.0.0.0/33")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_TRUSTED_PROXIES");
    }

    #[test]
    fn a_non_numeric_max_waiters_is_refused_by_name() {
        let err = settings(&[("STANDMEET_MAX_WAITERS", "abc")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_MAX_WAITERS");
        assert!(
            err.to_string().contains("STANDMEET_MAX_WAITERS=\"abc\""),
            "{err}"
        );
    }

    #[test]
    fn each_wait_setting_is_checked_by_name() {
        for name in [
            "STANDMEET_APPROVE_WAIT_MS",
            "STANDMEET_FETCH_WAIT_MS",
            "STANDMEET_INDEX_WAIT_MS",
            "STANDMEET_RETRY_BASE_MS",
        ] {
            assert_eq!(settings(&[(name, "-5")]).unwrap_err().setting, name);
            assert_eq!(settings(&[(name, "2s")]).unwrap_err().setting, name);
            assert_eq!(settings(&[(name, "99999999")]).unwrap_err().setting, name);
            assert!(settings(&[(name, "250")]).is_ok());
        }
    }

    #[test]
    fn mail_suppliers_parse() {
        assert_eq!(
            settings(&[("STANDMEET_MAIL", "none")]).unwrap().mail,
            MailSupplier::None
        );
        let smtp = settings(&[("STANDMEET_MAIL", "smtp://127.0.0.1:2525")])
            .unwrap()
            .mail;
        assert!(matches!(smtp, MailSupplier::Smtp(url) if url.port() == Some(2525)));
        let insecure = settings(&[("STANDMEET_MAIL", "smtp+insecure://u:p@127.0.0.1:2525")])
            .unwrap()
            .mail;
        assert!(matches!(insecure, MailSupplier::Smtp(url) if url.scheme() == "smtp+insecure"));
        let err = settings(&[("STANDMEET_MAIL", "carrier-pigeon")]).unwrap_err();
        assert_eq!(err.setting, "STANDMEET_MAIL");
    }

    #[test]
    fn secrets_are_never_echoed_in_errors() {
        let err = settings(&[("DATABASE_URL", "mysql://u:hunter2@db/x")]).unwrap_err();
        assert_eq!(err.setting, "DATABASE_URL");
        assert!(!err.to_string().contains("hunter2"), "{err}");

        let err = settings(&[("STANDMEET_MAIL", "ftp://u:hunter2@mail")]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");

        let err = settings(&[
            ("STANDMEET_ADMIN_EMAIL", "a@b.example"),
            ("STANDMEET_ADMIN_PASSWORD", "short"),
        ])
        .unwrap_err();
        assert_eq!(err.setting, "STANDMEET_ADMIN_PASSWORD");
        assert!(!err.to_string().contains("short\""), "{err}");
    }

    #[test]
    fn an_admin_password_needs_its_address_and_the_address_alone_names_the_first_admin() {
        let first = settings(&[("STANDMEET_ADMIN_EMAIL", "a@b.example")])
            .unwrap()
            .admin
            .unwrap();
        assert_eq!(first.email.as_str(), "a@b.example");
        assert_eq!(first.password, None);
        assert_eq!(
            settings(&[("STANDMEET_ADMIN_PASSWORD", "long enough")])
                .unwrap_err()
                .setting,
            "STANDMEET_ADMIN_EMAIL"
        );
        let s = settings(&[
            ("STANDMEET_ADMIN_EMAIL", "Owner@Example.COM"),
            ("STANDMEET_ADMIN_PASSWORD", "long enough"),
        ])
        .unwrap();
        assert_eq!(s.admin.unwrap().email.as_str(), "Owner@example.com");
    }

    #[test]
    fn outbound_settings_have_their_defaults_and_parse() {
        let s = settings(&[]).unwrap();
        assert!(!s.fetch_allow_private);
        assert_eq!(s.webhook_timeout, Duration::from_secs(10));
        assert_eq!(s.keep_events, Duration::from_secs(30 * 24 * 3600));
        let s = settings(&[
            ("STANDMEET_FETCH_ALLOW_PRIVATE", "true"),
            ("STANDMEET_WEBHOOK_TIMEOUT_MS", "250"),
            ("STANDMEET_KEEP_EVENTS_DAYS", "2"),
        ])
        .unwrap();
        assert!(s.fetch_allow_private);
        assert_eq!(s.webhook_timeout, Duration::from_millis(250));
        assert_eq!(s.keep_events, Duration::from_secs(2 * 24 * 3600));
    }

    #[test]
    fn the_sender_may_carry_a_display_name() {
        let from = |raw: &str| settings(&[("STANDMEET_MAIL_FROM", raw)]).map(|s| s.mail_from);
        let plain = from("desk@example.com").unwrap();
        assert_eq!(
            (plain.name.as_str(), plain.address.as_str()),
            ("StandMeet", "desk@example.com")
        );
        for raw in [
            "Front desk <desk@example.com>",
            "\"Front desk\" <desk@example.com>",
            "  Front desk   < desk@example.com > ",
        ] {
            let named = from(raw).unwrap();
            assert_eq!(
                (named.name.as_str(), named.address.as_str()),
                ("Front desk", "desk@example.com"),
                "{raw}"
            );
        }
        for raw in [
            "Front desk <desk@example.com",
            "Front\r\nBcc: x@example.com <desk@example.com>",
            "Front desk <not an address>",
        ] {
            let refused = from(raw).unwrap_err();
            assert_eq!(refused.setting, "STANDMEET_MAIL_FROM", "{raw}");
        }
    }

    #[test]
    fn bad_addresses_urls_and_filters_are_refused_by_name() {
        for (name, value) in [
            ("LEPTOS_SITE_ADDR", "localhost"),
            ("STANDMEET_PUBLIC_URL", "ftp://x.example"),
            ("STANDMEET_PUBLIC_URL", "not a url"),
            ("STANDMEET_MAIL_FROM", "nobody"),
            ("STANDMEET_OWNER_EMAIL", "a@@b"),
            ("RUST_LOG", "info,[[["),
            ("STANDMEET_MCP_TOKEN", "two words"),
            ("STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE", "0"),
            ("STANDMEET_JOB_LEASE_MS", "10"),
            ("STANDMEET_KEEP_COMPLETED_HOURS", "0"),
            ("STANDMEET_FETCH_ALLOW_PRIVATE", "maybe"),
            ("STANDMEET_WEBHOOK_TIMEOUT_MS", "5"),
            ("STANDMEET_WEBHOOK_TIMEOUT_MS", "60000"),
            ("STANDMEET_KEEP_EVENTS_DAYS", "0"),
        ] {
            assert_eq!(
                settings(&[(name, value)]).unwrap_err().setting,
                name,
                "{name}={value}"
            );
        }
    }

    #[test]
    fn the_public_url_names_the_sender_domain_by_default() {
        let s = settings(&[("STANDMEET_PUBLIC_URL", "https://desk.example.org")]).unwrap();
        assert_eq!(s.mail_from.address.as_str(), "standmeet@desk.example.org");
    }

    #[test]
    fn empty_values_count_as_unset() {
        let s = settings(&[("STANDMEET_MAX_WAITERS", ""), ("DATABASE_URL", " ")]).unwrap();
        assert_eq!(s.max_waiters, 64);
        assert_eq!(s.database_url, None);
    }
}

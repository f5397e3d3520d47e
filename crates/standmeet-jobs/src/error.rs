//! [`Error`]: the one error the engine's door answers, with the cases a caller acts on.

/// Why a call to the engine ([`JobClient`](crate::JobClient), [`JobRuntime::start`](
/// crate::JobRuntime::start)) did not do what it asked. Each case's words are meant for
/// a person: an application may show `NotFound` and `Refused` as they are.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No job, queue or schedule answers to what was named; the words say which, and
    /// what there is instead when that helps. Nothing changed.
    #[error("{0}")]
    NotFound(String),
    /// What was asked cannot be done as asked (a cron expression that does not parse,
    /// a kind no handler runs here, arguments that are not a JSON object, an engine
    /// pool too small for its queues); the words say why. Nothing changed.
    #[error("{0}")]
    Refused(String),
    /// A row the call needed stayed locked by another session longer than the engine
    /// waits for it (PostgreSQL's `lock_not_available`, 55P03): typically a job whose
    /// holder does not answer. Nothing changed; trying again later may succeed.
    #[error("a job this needs is held by a process that does not answer; try again shortly")]
    Busy(#[source] DatabaseError),
    /// The database could not be reached, or failed the statement. Nothing changed
    /// (each call is one transaction, or part of the caller's).
    #[error("the job database failed: {0}")]
    Database(#[source] DatabaseError),
}

/// What the database under the engine said when it failed a call: its words, and its
/// SQLSTATE code when PostgreSQL gave one. The driver's own error is its
/// [`source`](std::error::Error::source), for a caller that looks down the chain.
#[derive(Debug)]
pub struct DatabaseError(sqlx::Error);

impl DatabaseError {
    /// PostgreSQL's SQLSTATE code (`55P03`, `23505`, …), when the failure was a
    /// statement's rather than the connection's.
    pub fn code(&self) -> Option<String> {
        self.0
            .as_database_error()
            .and_then(|db| db.code())
            .map(|code| code.into_owned())
    }
}

impl std::fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl Error {
    /// The engine's error for what the database answered: [`Error::Busy`] for a row
    /// locked longer than the engine waits (`55P03`), [`Error::Database`] otherwise.
    /// Crate-private, so that the driver's error type stays out of the door.
    pub(crate) fn from_database(err: sqlx::Error) -> Self {
        let lock_not_available = err
            .as_database_error()
            .and_then(|db| db.code())
            .is_some_and(|code| code == "55P03");
        if lock_not_available {
            Error::Busy(DatabaseError(err))
        } else {
            Error::Database(DatabaseError(err))
        }
    }

    /// The database's failure, when that is what this is.
    pub fn database_error(&self) -> Option<&DatabaseError> {
        match self {
            Error::Busy(err) | Error::Database(err) => Some(err),
            Error::NotFound(_) | Error::Refused(_) => None,
        }
    }
}

/// `err` and its causes, `: ` between them, each said once. Many errors put their
/// cause's words in their own as well as answering it as their source (sqlx's
/// "error communicating with database: Connection refused (os error 111)" has the
/// `io::Error` as its source), so anyhow's `{:#}` would say "Connection refused" twice;
/// a cause whose words are already there is left out.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let words = next.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that says its cause's words in its own, as sqlx's do.
    #[derive(Debug)]
    struct Repeats(std::io::Error);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error communicating with database: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_the_words_is_said_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            error_chain(&Repeats(refused)),
            "error communicating with database: refused"
        );
    }
}

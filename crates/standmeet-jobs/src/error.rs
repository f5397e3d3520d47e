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
    Busy(#[source] sqlx::Error),
    /// The database could not be reached, or failed the statement. Nothing changed
    /// (each call is one transaction, or part of the caller's).
    #[error("the job database failed: {0}")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        let lock_not_available = err
            .as_database_error()
            .and_then(|db| db.code())
            .is_some_and(|code| code == "55P03");
        if lock_not_available {
            Error::Busy(err)
        } else {
            Error::Database(err)
        }
    }
}

impl Error {
    /// The database's error, for a caller that must look at its code (a statement that
    /// failed inside the caller's own transaction).
    pub fn database_error(&self) -> Option<&sqlx::Error> {
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
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
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
    use anyhow::Context;

    #[test]
    fn a_cause_already_in_the_words_is_said_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = anyhow::Error::from(sqlx::Error::Io(refused)).context("cannot connect");
        assert_eq!(
            format!("{err:#}"),
            "cannot connect: error communicating with database: refused: refused",
            "what anyhow says"
        );
        assert_eq!(
            error_chain(err.as_ref()),
            "cannot connect: error communicating with database: refused"
        );
    }

    #[test]
    fn causes_with_words_of_their_own_are_all_said() {
        let err: Result<(), _> = Err(std::io::Error::other("disk full"));
        let err = err.context("cannot write the file").unwrap_err();
        assert_eq!(
            error_chain(err.as_ref()),
            "cannot write the file: disk full"
        );
    }
}

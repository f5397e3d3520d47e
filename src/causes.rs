//! An error in words: [`error_chain`], what log lines and messages to the operator say
//! of a failure and its causes.

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

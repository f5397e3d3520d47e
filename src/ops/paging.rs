//! Two things every list does, written once for every operation that lists:
//! a filter word that must name one of a closed set (a job state, a request status, an
//! event type), and a page that knows whether another follows.

use std::future::Future;

use crate::domain::access_requests::RequestStatus;
use crate::domain::events::EventType;
use crate::error::AppError;
use standmeet_jobs::JobState;

/// A closed set of words a list can be filtered by.
pub trait FilterWord: Copy + 'static {
    /// What one is called, in an error: "job state".
    const NOUN: &'static str;
    /// What they are called: "job states".
    const PLURAL: &'static str;
    /// Every one, in the order an error lists them.
    fn all() -> &'static [Self];
    /// The word for it.
    fn word(self) -> &'static str;
}

/// An optional filter, parsed: `None` for none (or a blank one), the member it names,
/// or a 400 that names the bad word and lists the good ones.
pub fn parse_filter<T: FilterWord>(given: Option<&str>) -> Result<Option<T>, AppError> {
    let Some(word) = given.map(str::trim).filter(|word| !word.is_empty()) else {
        return Ok(None);
    };
    match T::all().iter().copied().find(|known| known.word() == word) {
        Some(known) => Ok(Some(known)),
        None => Err(AppError::BadRequest(format!(
            "There is no {} {word:?}; the {} are: {}.",
            T::NOUN,
            T::PLURAL,
            T::all()
                .iter()
                .map(|known| known.word())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

impl FilterWord for JobState {
    const NOUN: &'static str = "job state";
    const PLURAL: &'static str = "job states";
    fn all() -> &'static [Self] {
        &JobState::ALL
    }
    fn word(self) -> &'static str {
        self.as_str()
    }
}

impl FilterWord for RequestStatus {
    const NOUN: &'static str = "request status";
    const PLURAL: &'static str = "request statuses";
    fn all() -> &'static [Self] {
        &RequestStatus::ALL
    }
    fn word(self) -> &'static str {
        self.as_str()
    }
}

impl FilterWord for EventType {
    const NOUN: &'static str = "event type";
    const PLURAL: &'static str = "event types";
    fn all() -> &'static [Self] {
        &EventType::ALL
    }
    fn word(self) -> &'static str {
        self.as_str()
    }
}

/// Up to `limit` rows from `fetch`, and whether more follow: `fetch` is asked for one
/// more than `limit`, which is dropped when it comes.
pub async fn one_page<T, E, Fetched>(
    limit: i64,
    fetch: impl FnOnce(i64) -> Fetched,
) -> Result<(Vec<T>, bool), E>
where
    Fetched: Future<Output = Result<Vec<T>, E>>,
{
    let mut rows = fetch(limit + 1).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit.max(0) as usize);
    Ok((rows, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_word_names_one_of_its_set_or_is_a_400_that_lists_them() {
        assert_eq!(parse_filter::<JobState>(None).unwrap(), None);
        assert_eq!(parse_filter::<JobState>(Some("  ")).unwrap(), None);
        assert_eq!(
            parse_filter::<JobState>(Some(" running ")).unwrap(),
            Some(JobState::Running)
        );
        let Err(AppError::BadRequest(message)) = parse_filter::<JobState>(Some("exploded")) else {
            panic!("a 400");
        };
        assert_eq!(
            message,
            "There is no job state \"exploded\"; the job states are: available, scheduled, running, retryable, completed, discarded, cancelled."
        );
    }

    #[tokio::test]
    async fn a_page_asks_for_one_more_and_says_whether_it_came() {
        let rows = |n: i64| async move { Ok::<_, ()>((0..n.min(5)).collect::<Vec<i64>>()) };
        assert_eq!(one_page(3, rows).await, Ok((vec![0, 1, 2], true)));
        assert_eq!(one_page(5, rows).await, Ok((vec![0, 1, 2, 3, 4], false)));
        assert_eq!(one_page(9, rows).await, Ok((vec![0, 1, 2, 3, 4], false)));
    }
}

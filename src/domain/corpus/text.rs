//! Text for the search index: CJK runs cut into overlapping character pairs, and the
//! snippet of a result with its matched terms marked.
//!
//! PostgreSQL's text search splits words at spaces and punctuation, which CJK text
//! does not have: `東京タワー` would be one "word", and a search for `東京` would not
//! find it. So CJK runs become bigrams (`東京`, `京タ`, `タワ`, `ワー`) on both sides, a
//! query's bigrams must all be present, and everything else goes through English
//! stemming as usual.

use aho_corasick::{AhoCorasick, MatchKind};

/// Whether `c` is written without spaces between words: Han, kana, Hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF66..=0xFF9F    // half-width Katakana
        | 0x20000..=0x2FA1F  // CJK extensions B and later
    )
}

/// Text split in two: the CJK runs as bigrams (a lone CJK character stays as it is),
/// and the rest, with the CJK replaced by spaces, for the word search.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub words: String,
    pub cjk: Vec<String>,
    /// Every CJK character on its own: a document holds these too, so a one-character
    /// query (`桜`) finds it wherever the character stands.
    pub cjk_chars: Vec<String>,
}

impl Split {
    /// The CJK lexemes of a document: bigrams and single characters, each once.
    pub fn document_cjk(&self) -> Vec<String> {
        let mut lexemes: Vec<String> = self.cjk.iter().chain(&self.cjk_chars).cloned().collect();
        lexemes.sort();
        lexemes.dedup();
        lexemes
    }
}

pub fn split(text: &str) -> Split {
    let mut split = Split::default();
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, cjk: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => cjk.push(run[0].to_string()),
            _ => cjk.extend(run.windows(2).map(|pair| pair.iter().collect::<String>())),
        }
        run.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            if run.is_empty() {
                // The run keeps the words on either side apart.
                split.words.push(' ');
            }
            run.push(c);
            split.cjk_chars.push(c.to_string());
        } else {
            flush(&mut run, &mut split.cjk);
            split.words.push(c);
        }
    }
    flush(&mut run, &mut split.cjk);
    split
}

/// The terms of a query, as a reader would mark them in a result: its words and its
/// CJK runs, lower-cased, longest first.
pub fn terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_is_cjk = false;
    for c in query.chars() {
        let cjk = is_cjk(c);
        if c.is_alphanumeric() {
            if !current.is_empty() && cjk != current_is_cjk {
                terms.push(std::mem::take(&mut current));
            }
            current_is_cjk = cjk;
            current.extend(c.to_lowercase());
        } else if !current.is_empty() {
            terms.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        terms.push(current);
    }
    terms.sort_by_key(|term| std::cmp::Reverse(term.chars().count()));
    terms.dedup();
    terms
}

/// A piece of a snippet: plain, or a match to mark.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Piece {
    pub text: String,
    pub mark: bool,
}

/// About this many characters of the body around the first match.
const SNIPPET_CHARS: usize = 180;

/// A query's terms, ready to find in bodies: one automaton for all of them, so that
/// marking a body costs one pass over it whatever the query (a query of a hundred
/// one-letter words costs what one word costs), and stops a snippet's length after
/// the first match.
pub struct Marker {
    /// `None` when the query has no terms (nothing to mark).
    finder: Option<AhoCorasick>,
    /// Per pattern: whether it is a word term (marked only where a word starts, and
    /// to the end of that word), rather than a CJK run (marked wherever it stands).
    word_term: Vec<bool>,
}

impl Marker {
    pub fn new(terms: &[String]) -> Marker {
        let terms: Vec<&String> = terms.iter().filter(|term| !term.is_empty()).collect();
        let word_term = terms.iter().map(|term| !term.chars().any(is_cjk)).collect();
        // Leftmost-longest: where several terms match, the longest one is marked.
        let finder = (!terms.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&terms)
                .expect("a few hundred characters of terms always make an automaton")
        });
        Marker { finder, word_term }
    }

    /// Every match in `lower` (the body lower-cased char by char) that a reader would
    /// mark, as (start, end) in chars, in order, none overlapping; from the first one
    /// up to `SNIPPET_CHARS` after it, since the snippet shows no more.
    fn matches(&self, lower: &[char]) -> Vec<(usize, usize)> {
        let Some(finder) = &self.finder else {
            return Vec::new();
        };
        let text: String = lower.iter().collect();
        // The char index of each byte offset that starts a char.
        let mut char_at = vec![0usize; text.len() + 1];
        for (index, (offset, _)) in text.char_indices().enumerate() {
            char_at[offset] = index;
        }
        char_at[text.len()] = lower.len();
        let mut matches: Vec<(usize, usize)> = Vec::new();
        for found in finder.find_iter(&text) {
            let start = char_at[found.start()];
            let mut end = char_at[found.end()];
            if matches
                .last()
                .is_some_and(|&(_, last_end)| start < last_end)
            {
                // Inside the word a match before this one was widened to.
                continue;
            }
            if let Some(&(first, _)) = matches.first()
                && start >= first + SNIPPET_CHARS
            {
                break;
            }
            if self.word_term[found.pattern().as_usize()] {
                // Terms are letters and digits only, so a match that does not start a
                // word hides no other match that does.
                if start > 0 && lower[start - 1].is_alphanumeric() {
                    continue;
                }
                while end < lower.len() && lower[end].is_alphanumeric() && !is_cjk(lower[end]) {
                    end += 1;
                }
            }
            matches.push((start, end));
        }
        matches
    }
}

/// The part of `body` around the first match of a term, cut into marked and plain
/// pieces. A word term also marks words it starts (a search for `index` marks
/// `indexing`, which stemming found). Without a match, the start of the body.
pub fn snippet(body: &str, marker: &Marker) -> Vec<Piece> {
    let chars: Vec<char> = body.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let matches = marker.matches(&lower);
    let first = matches.first().map_or(0, |&(start, _)| start);
    let mut from = first.saturating_sub(SNIPPET_CHARS / 3);
    // Start at a word boundary when there is one close by.
    if let Some(space) = (from..first)
        .filter(|_| from > 0)
        .find(|&i| chars[i].is_whitespace())
    {
        from = space + 1;
    }
    let to = (from + SNIPPET_CHARS).min(chars.len());
    let mut pieces = Vec::new();
    let mut push = |text: String, mark: bool| {
        if !text.is_empty() {
            pieces.push(Piece { text, mark });
        }
    };
    if from > 0 {
        push("…".into(), false);
    }
    let mut at = from;
    for &(start, end) in matches.iter().filter(|&&(s, e)| s >= from && e <= to) {
        push(chars[at..start].iter().collect(), false);
        push(chars[start..end].iter().collect(), true);
        at = end;
    }
    push(chars[at..to].iter().collect(), false);
    if to < chars.len() {
        push("…".into(), false);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_runs_become_bigrams_and_the_rest_stays_words() {
        let split = split("東京タワー is tall, 山 too");
        assert_eq!(split.cjk, ["東京", "京タ", "タワ", "ワー", "山"]);
        assert_eq!(split.words, "  is tall,   too");
        assert_eq!(super::split("abc東京def").words, "abc def");
    }

    #[test]
    fn a_query_bigram_is_found_among_the_documents() {
        let document = split("東京タワーの夜景").document_cjk();
        for query in ["東京", "タワー", "夜景", "京", "景"] {
            let wanted = split(query).cjk;
            assert!(wanted.iter().all(|pair| document.contains(pair)), "{query}");
        }
        assert!(!split("大阪").cjk.iter().all(|pair| document.contains(pair)));
    }

    #[test]
    fn terms_are_words_and_cjk_runs_longest_first() {
        assert_eq!(
            terms("Rust 東京 search-index"),
            ["search", "index", "rust", "東京"]
        );
        assert_eq!(terms("rustの本"), ["rust", "の本"]);
        assert!(terms("  -- ").is_empty());
    }

    #[test]
    fn the_snippet_marks_matches_and_words_that_start_with_a_term() {
        let body = "StandMeet keeps a corpus. Indexing runs as a job, and search reads the index.";
        let pieces = snippet(body, &Marker::new(&terms("index search")));
        let marked: Vec<&str> = pieces
            .iter()
            .filter(|p| p.mark)
            .map(|p| p.text.as_str())
            .collect();
        assert_eq!(marked, ["Indexing", "search", "index"]);
        // Inside a word is not a match.
        assert!(
            snippet("reindex", &Marker::new(&terms("index")))
                .iter()
                .all(|p| !p.mark)
        );
    }

    #[test]
    fn the_snippet_is_cut_around_the_first_match() {
        let body = format!("{} needle {}", "hay ".repeat(100), "straw ".repeat(100));
        let pieces = snippet(&body, &Marker::new(&terms("needle")));
        let text: String = pieces.iter().map(|p| p.text.as_str()).collect();
        assert!(text.starts_with('…') && text.ends_with('…'), "{text}");
        assert!(text.chars().count() <= SNIPPET_CHARS + 2);
        assert!(pieces.iter().any(|p| p.mark && p.text == "needle"));
        let cjk = snippet("夜の東京タワーはきれい", &Marker::new(&terms("東京")));
        assert_eq!(
            cjk[1],
            Piece {
                text: "東京".into(),
                mark: true
            }
        );
    }

    #[test]
    fn a_query_of_many_short_words_over_a_long_body_costs_one_pass() {
        // Every one-letter word from a to z, over a body of a million letters where
        // each of them matches everywhere: quadratic marking took minutes here.
        let query: String = ('a'..='z').map(|c| format!("{c} ")).collect();
        let body = "a b c d e f g h i j k l m n o p q r s t u v w x y z ".repeat(20_000);
        let marker = Marker::new(&terms(&query));
        let started = std::time::Instant::now();
        let pieces = snippet(&body, &marker);
        let marked = pieces.iter().filter(|p| p.mark).count();
        assert!(marked > 20 && marked <= SNIPPET_CHARS, "{marked} marks");
        // Far below the minutes of the quadratic walk; generous for a busy machine.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn the_longest_term_wins_and_a_widened_word_hides_what_is_inside_it() {
        let pieces = snippet(
            "searching the search index",
            &Marker::new(&terms("se search in")),
        );
        let marked: Vec<&str> = pieces
            .iter()
            .filter(|p| p.mark)
            .map(|p| p.text.as_str())
            .collect();
        assert_eq!(marked, ["searching", "search", "index"]);
        assert!(
            snippet("nothing", &Marker::new(&[]))
                .iter()
                .all(|p| !p.mark)
        );
    }
}

//! An error's message as a user reads it: the error, then each of its sources, `: `-separated.
//!
//! Many errors print their source inside their own message as well as returning it from
//! `source()` (`object_store`'s and `reqwest`'s do, and `parquet`'s `External` variant), so
//! walking the chain as anyhow's `{:#}` does repeats each of them: one failed S3 request read
//! "Error performing HEAD ... - HTTP error: error sending request" twice, then "HTTP error:
//! error sending request" twice more. A link whose text its parent's (the link before it)
//! already holds adds nothing and is left out; every other link is kept, in order, even where
//! its text appears elsewhere in the message (a user's path may read "operation timed out").

use std::any::Any;
use std::fmt::Display;

/// A panic payload's message (a panic's `&str` or `String`), as a report quotes it.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// The links of an error chain, outermost first, as one message, each link left out where its
/// parent's text holds it.
pub fn chain_message<T: Display>(chain: impl IntoIterator<Item = T>) -> String {
    let mut message = String::new();
    let mut parent: Option<String> = None;
    for link in chain {
        let text = link.to_string();
        match &parent {
            None => message.push_str(&text),
            Some(parent) if parent.contains(&text) => {}
            Some(_) => {
                message.push_str(": ");
                message.push_str(&text);
            }
        }
        parent = Some(text);
    }
    message
}

/// `error` and its sources (`Error::source`), outermost first.
pub fn sources<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source inside its own message, as `object_store`'s do.
    #[derive(Debug)]
    struct Wrapping(std::io::Error);

    impl std::fmt::Display for Wrapping {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "request failed - {}", self.0)
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_source_printed_inside_its_error_is_not_repeated() {
        let error = Wrapping(std::io::Error::other("connection refused"));
        assert_eq!(chain_message(sources(&error)), "request failed - connection refused");
    }

    #[test]
    fn sources_not_in_the_message_follow_it_in_order() {
        let inner = std::io::Error::other("disk full");
        let outer = std::io::Error::other(Wrapping(inner));
        let chain = ["writing part-0.parquet".to_string(), outer.to_string(), "no space left".to_string()];
        assert_eq!(
            chain_message(&chain),
            "writing part-0.parquet: request failed - disk full: no space left",
            "each link once, in order"
        );
        assert_eq!(chain_message(["a", "", "b"]), "a: b", "an empty link adds nothing");
        assert_eq!(chain_message(Vec::<String>::new()), "");
    }

    /// Only a link's parent can make it a repeat: a cause whose words also appear earlier (in
    /// a user's path) is still the cause.
    #[test]
    fn a_cause_named_elsewhere_in_the_message_is_kept() {
        let chain = ["cannot read s3://b/operation timed out/_SUCCESS", "error sending request", "operation timed out"];
        assert_eq!(
            chain_message(chain),
            "cannot read s3://b/operation timed out/_SUCCESS: error sending request: operation timed out"
        );
        // A chain where each link prints the next inside it, and one that does not.
        let nested = ["A - B - C", "B - C", "C", "D", "D"];
        assert_eq!(chain_message(nested), "A - B - C: D", "a repeat of its parent only");
    }
}

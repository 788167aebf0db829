//! Secrets never reach a message: a URI's user information (`scheme://user:secret@host`) is
//! replaced before a URI is shown, and the values of secret-looking keys in a job file's text
//! are never quoted back.

/// `text` with the user information of every URI in it (`://user:password@`) replaced by
/// `***`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends at the first `/`, whitespace or quote; user information at its
        // last `@`. A password may hold whitespace: an `@` before the next `/`, quote or line
        // end masks up to it all the same (masking too much is the safe side).
        let stop = |c: char| c == '/' || c == '"' || c == '\'' || c == '\n';
        let line = after.find(stop).unwrap_or(after.len());
        let end = match after[..line].rfind('@') {
            Some(_) => line,
            None => after.find(|c: char| stop(c) || c.is_whitespace()).unwrap_or(after.len()),
        };
        match after[..end].rfind('@') {
            Some(user) => {
                out.push_str("***");
                out.push_str(&after[user..end]);
            }
            None => out.push_str(&after[..end]),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Whether a job-file key names a secret (`secret_access_key`, `password`, `token`, ...):
/// such keys are refused without quoting their values.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["secret", "password", "token", "credential", "access_key", "session"].iter().any(|s| key.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_replaced() {
        assert_eq!(redact("http://key:secret@host:9000/x"), "http://***@host:9000/x");
        assert_eq!(redact("s3://bucket/a@b"), "s3://bucket/a@b");
        assert_eq!(redact("endpoint \"http://a:b@h\" and s3://k:s@b/p"), "endpoint \"http://***@h\" and s3://***@b/p");
        assert_eq!(redact("no uri here"), "no uri here");
        // Whitespace in a password does not end the user information.
        assert_eq!(redact("output = \"s3://user:pa ss\tword@bucket/m\""), "output = \"s3://***@bucket/m\"");
        assert_eq!(redact("# s3://user:pa ss@bucket\nnext line"), "# s3://***@bucket\nnext line");
        assert_eq!(redact("s3://bucket is gone"), "s3://bucket is gone");
    }

    #[test]
    fn secret_keys_are_recognised() {
        assert!(is_secret_key("aws_secret_access_key"));
        assert!(is_secret_key("Password"));
        assert!(!is_secret_key("endpoint"));
    }
}

//! A local write made again when another run's commit moved its folder.
//!
//! Two runs may commit into one output at once (a retried job beside the one it retries). A
//! commit moves the output's folders (`_temporary/`, a layout's) into its next version, so a
//! writer of the other run may make a folder and find it gone at the write. Writing again makes
//! the folder again; after [`TRIES_IF_MOVED`] tries the error stands, and the commit that finds
//! its staged files gone fails with 75 ("two runs into one output at once").

/// How many times a local write is made in all when its folder is gone ([`again_if_moved`]).
pub const TRIES_IF_MOVED: usize = 3;

/// `write` (which makes its file's folders first), made again while it finds a file or folder
/// gone, at most [`TRIES_IF_MOVED`] times in all: another run's commit into the same output
/// may move the output's folders (`_temporary/`, a layout's) into its next version between a
/// writer's making a folder and writing into it.
pub fn again_if_moved<T>(mut write: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut tries = 1;
    loop {
        match write() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < TRIES_IF_MOVED => tries += 1,
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_whose_folder_moved_is_made_again_a_few_times() {
        let gone = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let mut calls = 0;
        let done = again_if_moved(|| {
            calls += 1;
            if calls < TRIES_IF_MOVED { Err(gone()) } else { Ok(calls) }
        });
        assert_eq!(done.unwrap(), TRIES_IF_MOVED);
        let mut calls = 0;
        let error = again_if_moved(|| -> std::io::Result<()> {
            calls += 1;
            Err(gone())
        });
        assert_eq!((error.unwrap_err().kind(), calls), (std::io::ErrorKind::NotFound, TRIES_IF_MOVED));
        let mut calls = 0;
        let error = again_if_moved(|| -> std::io::Result<()> {
            calls += 1;
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        });
        assert_eq!((error.unwrap_err().kind(), calls), (std::io::ErrorKind::PermissionDenied, 1));
    }
}

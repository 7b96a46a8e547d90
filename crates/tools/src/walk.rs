//! The folder walk shared by `glob`, `grep` and `list_dir`: ripgrep's `ignore`
//! walker, configured the same way for all three.
//!
//! Rules: `.gitignore`, `.ignore` and git's exclude files are honoured even
//! outside a git repository; hidden files are included (models look for
//! `.github/` and `.env.example`), but version-control folders are skipped;
//! symlinks are not followed, so a walk cannot leave the sandbox.

use std::path::Path;

use ignore::WalkBuilder;

/// Folders never walked into.
const SKIPPED_DIRS: &[&str] = &[".git", ".hg", ".svn", ".jj"];

/// A walker over `root` with ferroclaw's rules.
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder.hidden(false).require_git(false).follow_links(false).filter_entry(|entry| {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        !(is_dir && entry.file_name().to_str().is_some_and(|n| SKIPPED_DIRS.contains(&n)))
    });
    builder
}

/// How many threads a parallel walk uses: the available cores, at most 12
/// (ripgrep's own cap).
pub(crate) fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}

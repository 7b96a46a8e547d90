//! The heartbeat: every N minutes, if `HEARTBEAT.md` in the agent workspace
//! has real content, the agent gets a turn to act on it. An answer meaning
//! "nothing to report" (`HEARTBEAT_OK`) is not delivered.

use std::path::Path;

/// The file read on each beat, in the agent workspace.
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";
/// The token of a "nothing to report" answer, as nanobot and OpenClaw.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// Characters besides `HEARTBEAT_OK` an answer may have and still count as
/// "nothing to report" (OpenClaw's `ackMaxChars`).
pub const OK_EXTRA_CHARS: usize = 300;

/// The heartbeat's instructions when the file has something in it.
pub fn prompt(path: &Path, content: &str) -> Option<String> {
    has_real_content(content).then(|| {
        format!(
            "[Heartbeat] This is a periodic check. {file} ({path}) says:\n\n{content}\n\n\
             Do what it asks that is due now. If nothing needs attention, reply with exactly \
             {HEARTBEAT_OK} and nothing else.",
            file = HEARTBEAT_FILE,
            path = path.display(),
        )
    })
}

/// True unless the text is only headings, comments, blank lines and empty checkboxes.
pub fn has_real_content(text: &str) -> bool {
    let mut in_comment = false;
    for line in text.lines() {
        let mut line = line.trim();
        if in_comment {
            match line.find("-->") {
                Some(end) => {
                    in_comment = false;
                    line = line[end + 3..].trim();
                }
                None => continue,
            }
        }
        while let Some(start) = line.find("<!--") {
            let (before, after) = line.split_at(start);
            match after.find("-->") {
                Some(_) if !before.trim().is_empty() => return true,
                Some(end) => line = after[end + 3..].trim(),
                None => {
                    in_comment = true;
                    line = before.trim();
                    break;
                }
            }
        }
        let empty_checkbox = matches!(line, "- [ ]" | "* [ ]" | "- [x]" | "* [x]" | "-" | "*");
        if !(line.is_empty() || line.starts_with('#') || empty_checkbox) {
            return true;
        }
    }
    false
}

/// True when an answer means "nothing to report": `HEARTBEAT_OK` at its start
/// or end with little else.
pub fn is_nothing_to_report(answer: &str) -> bool {
    let t = answer.trim().trim_matches(|c: char| c == '*' || c == '`' || c == '.');
    let rest = t.strip_prefix(HEARTBEAT_OK).or_else(|| t.strip_suffix(HEARTBEAT_OK)).map(str::trim);
    rest.is_some_and(|r| r.chars().count() <= OK_EXTRA_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_comments_and_empty_checkboxes_are_not_real_content() {
        let template = "# Heartbeat\n\n<!-- Add tasks below.\nThey run every 30 minutes. -->\n\n## Tasks\n- [ ]\n";
        assert!(!has_real_content(template));
        assert!(!has_real_content(""));
        assert!(has_real_content("# Tasks\n- [ ] water the plants\n"));
        assert!(has_real_content("<!-- x --> check the mail"));
    }

    #[test]
    fn heartbeat_ok_is_nothing_to_report_but_a_finding_is_delivered() {
        assert!(is_nothing_to_report("HEARTBEAT_OK"));
        assert!(is_nothing_to_report("**HEARTBEAT_OK**"));
        assert!(is_nothing_to_report("All quiet. HEARTBEAT_OK"));
        assert!(!is_nothing_to_report("The build is broken: 3 tests fail."));
        assert!(!is_nothing_to_report(&format!("{} HEARTBEAT_OK", "x".repeat(400))));
    }
}

//! The skills compiled into the binary, from `crates/core/builtin-skills/`.
//! A project or user skill of the same name replaces one of these.

/// `(folder name, SKILL.md text)` of every built-in skill.
pub const BUILTIN_SKILLS: &[(&str, &str)] = &[
    ("github", include_str!("../../builtin-skills/github/SKILL.md")),
    ("skill-creator", include_str!("../../builtin-skills/skill-creator/SKILL.md")),
    ("summarize", include_str!("../../builtin-skills/summarize/SKILL.md")),
];

//! Reading skill files: `NAME/SKILL.md` checked against the Agent Skills
//! standard, nanoAgent's single-file `NAME.md` and `NAME.json`, and the
//! built-ins. Every problem names the file; nothing here panics on bad input.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::fields::{Extras, metadata, optional_string, required_string, words};
use super::{Skill, SkillProblem, SkillSource};
use crate::frontmatter;

/// Longest skill name (Agent Skills standard).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description (Agent Skills standard).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` field (Agent Skills standard).
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// Frontmatter fields the standard defines.
const STANDARD_FIELDS: &[&str] =
    &["name", "description", "license", "compatibility", "metadata", "allowed-tools"];

/// Fields other agents add that we accept without a warning (nanobot's
/// `always`, nanoAgent's `when_to_use`/`triggers`, Claude Code's extras).
const KNOWN_EXTRA_FIELDS: &[&str] = &[
    "always",
    "when_to_use",
    "triggers",
    "requires",
    "version",
    "argument-hint",
    "disable-model-invocation",
    "user-invocable",
    "model",
];

/// A parsed skill and the warnings about it, or why it was skipped.
pub(super) type Parsed = Result<(Skill, Vec<SkillProblem>), SkillProblem>;

/// Checks a name against the standard: 1-64 characters of `a-z`, `0-9` and
/// single hyphens, neither first nor last.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("name is empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("name {name:?} is longer than {MAX_NAME_CHARS} characters"));
    }
    if let Some(c) =
        name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("name {name:?} has {c:?}; use only a-z, 0-9 and hyphens"));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(format!("name {name:?} must not start or end with a hyphen or contain \"--\""));
    }
    Ok(())
}

/// Every skill file directly in `dir` (a missing folder holds none), in
/// name order.
pub(super) fn read_root(dir: &Path, source: SkillSource) -> Vec<Parsed> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let file_name =
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if file_name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            let skill_md = path.join("SKILL.md");
            if skill_md.is_file() {
                out.push(read_file(&skill_md).and_then(|text| {
                    parse_skill_md(&skill_md, &file_name, &text, source).map(|(mut s, w)| {
                        s.dir = Some(path.clone());
                        (s, w)
                    })
                }));
            }
            continue;
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        match path.extension().and_then(|e| e.to_str()) {
            Some("md") if !stem.eq_ignore_ascii_case("readme") => {
                out.push(read_file(&path).and_then(|t| parse_single_md(&path, &stem, &t, source)));
            }
            Some("json") => {
                out.push(read_file(&path).and_then(|t| parse_json(&path, &stem, &t, source)));
            }
            _ => {}
        }
    }
    out
}

fn read_file(path: &Path) -> Result<String, SkillProblem> {
    ferroclaw_tools::repo_file::read_repo_text(
        path,
        ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES,
    )
    .map_err(|e| fatal(path, format!("cannot read: {e}")))
}

fn fatal(path: &Path, message: impl Into<String>) -> SkillProblem {
    SkillProblem { path: path.to_path_buf(), message: message.into(), fatal: true }
}

fn warning(path: &Path, message: impl Into<String>) -> SkillProblem {
    SkillProblem { path: path.to_path_buf(), message: message.into(), fatal: false }
}

/// A built-in skill (compiled in; `name` is its folder).
pub(super) fn parse_builtin(name: &str, text: &str) -> Parsed {
    let path = PathBuf::from(format!("builtin:{name}/SKILL.md"));
    parse_skill_md(&path, name, text, SkillSource::Builtin)
}

/// A standard `FOLDER/SKILL.md`: every rule of the standard is checked and
/// all violations are reported together.
pub fn parse_skill_md(path: &Path, folder: &str, text: &str, source: SkillSource) -> Parsed {
    let doc = frontmatter::parse(text).map_err(|e| fatal(path, e.to_string()))?;
    if !doc.has_frontmatter {
        return Err(fatal(
            path,
            "no frontmatter: SKILL.md must start with a --- block holding name and description",
        ));
    }
    let f = &doc.fields;
    let mut errors = Vec::new();
    let name = required_string(f, "name", &mut errors);
    if let Some(name) = &name {
        if let Err(e) = check_name(name) {
            errors.push(e);
        } else if name != folder {
            errors.push(format!("name {name:?} differs from its folder name {folder:?}"));
        }
    }
    let description = required_string(f, "description", &mut errors);
    check_length("description", description.as_deref(), MAX_DESCRIPTION_CHARS, &mut errors);
    let compatibility = optional_string(f, "compatibility", &mut errors);
    check_length("compatibility", compatibility.as_deref(), MAX_COMPATIBILITY_CHARS, &mut errors);
    let license = optional_string(f, "license", &mut errors);
    let metadata = metadata(f, &mut errors);
    let allowed_tools = words(f.get("allowed-tools"), "allowed-tools", &mut errors);
    let extras = Extras::read(f, &metadata, &mut errors);
    let (Some(name), Some(description), true) = (name, description, errors.is_empty()) else {
        return Err(fatal(path, errors.join("; ")));
    };
    let warnings = f
        .keys()
        .filter(|k| {
            !STANDARD_FIELDS.contains(&k.as_str()) && !KNOWN_EXTRA_FIELDS.contains(&k.as_str())
        })
        .map(|k| {
            warning(
                path,
                format!(
                    "unknown frontmatter field {k:?} (the standard defines {})",
                    STANDARD_FIELDS.join(", ")
                ),
            )
        })
        .collect();
    let skill = Skill {
        name,
        description,
        body: doc.body,
        source,
        path: path.to_path_buf(),
        dir: None,
        always: extras.always,
        when_to_use: extras.when_to_use,
        triggers: extras.triggers,
        license,
        compatibility,
        allowed_tools,
        requires: extras.requires,
        unavailable: None,
    };
    Ok((skill, warnings))
}

/// nanoAgent's single-file skill `NAME.md`: frontmatter `name` (default:
/// the file stem), `description` (or `when_to_use`), `when_to_use`, `triggers`.
fn parse_single_md(path: &Path, stem: &str, text: &str, source: SkillSource) -> Parsed {
    let doc = frontmatter::parse(text).map_err(|e| fatal(path, e.to_string()))?;
    legacy(path, stem, &doc.fields, doc.body, source)
}

/// nanoAgent's older `NAME.json`: an object with `name`, `description`,
/// `when_to_use`, `triggers` and the instructions in `content` (or
/// `instructions`, `prompt`, `body`).
fn parse_json(path: &Path, stem: &str, text: &str, source: SkillSource) -> Parsed {
    let value: Value =
        serde_json::from_str(text).map_err(|e| fatal(path, format!("not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(fatal(
            path,
            format!("must be a JSON object, not {}", frontmatter::kind(&value)),
        ));
    };
    let body = ["content", "instructions", "prompt", "body"]
        .iter()
        .find_map(|k| fields.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| {
            fatal(
                path,
                "no instructions: set \"content\" (or \"instructions\", \"prompt\", \"body\") to a string",
            )
        })?;
    legacy(path, stem, &fields, body, source)
}

/// The common part of nanoAgent's formats, which predate the standard: the
/// name is not held to the standard's character rules, but must be usable.
fn legacy(
    path: &Path,
    stem: &str,
    f: &Map<String, Value>,
    body: String,
    source: SkillSource,
) -> Parsed {
    let mut errors = Vec::new();
    let name = optional_string(f, "name", &mut errors).unwrap_or_else(|| stem.to_string());
    if name.trim().is_empty() || name.chars().count() > MAX_NAME_CHARS {
        errors.push(format!("name {name:?} must be 1-{MAX_NAME_CHARS} characters"));
    }
    let metadata = metadata(f, &mut errors);
    let extras = Extras::read(f, &metadata, &mut errors);
    let description = optional_string(f, "description", &mut errors)
        .or_else(|| extras.when_to_use.clone())
        .filter(|d| !d.trim().is_empty());
    let Some(description) = description else {
        errors.push("no description (nor when_to_use)".into());
        return Err(fatal(path, errors.join("; ")));
    };
    if !errors.is_empty() {
        return Err(fatal(path, errors.join("; ")));
    }
    let mut warnings = Vec::new();
    if let Err(e) = check_name(&name) {
        warnings.push(warning(
            path,
            format!(
                "{e} (fine for a nanoAgent skill, but not portable to the Agent Skills standard)"
            ),
        ));
    }
    let skill = Skill {
        name,
        description,
        body,
        source,
        path: path.to_path_buf(),
        dir: None,
        always: extras.always,
        when_to_use: extras.when_to_use,
        triggers: extras.triggers,
        license: None,
        compatibility: None,
        allowed_tools: Vec::new(),
        requires: extras.requires,
        unavailable: None,
    };
    Ok((skill, warnings))
}

/// Records an error when `value` is longer than `max` characters.
fn check_length(field: &str, value: Option<&str>, max: usize, errors: &mut Vec<String>) {
    if let Some(v) = value
        && v.chars().count() > max
    {
        errors.push(format!("{field} is {} characters; the limit is {max}", v.chars().count()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(folder: &str, text: &str) -> Parsed {
        parse_skill_md(Path::new("x/SKILL.md"), folder, text, SkillSource::Project)
    }

    fn error(folder: &str, text: &str) -> String {
        match parse(folder, text) {
            Err(p) => p.message,
            Ok((s, _)) => panic!("accepted {s:?}"),
        }
    }

    #[test]
    fn names_follow_the_standard() {
        for good in ["a", "pdf-tools", "x9", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "PDF", "pdf_tools", "-pdf", "pdf-", "pdf--tools", "ünï", &"a".repeat(65)]
        {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_name_must_equal_its_folder() {
        let e = error("other", "---\nname: pdf\ndescription: d\n---\n");
        assert!(e.contains("differs from its folder name \"other\""), "{e}");
    }

    #[test]
    fn all_violations_are_reported_at_once() {
        let long = "d".repeat(1025);
        let e = error(
            "Bad_Name",
            &format!(
                "---\nname: Bad_Name\ndescription: {long}\ncompatibility: {}\n---\n",
                "c".repeat(501)
            ),
        );
        assert!(e.contains("use only a-z"), "{e}");
        assert!(e.contains("description is 1025 characters"), "{e}");
        assert!(e.contains("compatibility is 501 characters"), "{e}");
    }

    #[test]
    fn missing_or_mistyped_fields_are_named() {
        assert!(error("x", "---\nname: x\n---\n").contains("description is missing"));
        assert!(
            error("x", "---\nname: x\ndescription: [a]\n---\n")
                .contains("description must be a string, not a list")
        );
        assert!(error("x", "no frontmatter").contains("no frontmatter"));
        assert!(
            error("x", "---\nname: x\ndescription: d\nalways: maybe\n---\n")
                .contains("always must be true or false")
        );
    }

    #[test]
    fn metadata_is_accepted_as_a_map_or_a_json_string() {
        let as_map = "---\nname: gh\ndescription: d\nmetadata:\n  nanobot:\n    requires:\n      bins: [gh]\n      env: [GH_TOKEN]\n    always: true\n---\n";
        let as_string = "---\nname: gh\ndescription: d\nmetadata: '{\"nanobot\":{\"requires\":{\"bins\":[\"gh\"],\"env\":[\"GH_TOKEN\"]},\"always\":true}}'\n---\n";
        for text in [as_map, as_string] {
            let (skill, warnings) = parse("gh", text).unwrap();
            assert_eq!(skill.requires.bins, ["gh"]);
            assert_eq!(skill.requires.env, ["GH_TOKEN"]);
            assert!(skill.always);
            assert!(warnings.is_empty());
        }
        let e = error("gh", "---\nname: gh\ndescription: d\nmetadata: '{not json'\n---\n");
        assert!(e.contains("metadata is a string but not valid JSON"), "{e}");
    }

    #[test]
    fn os_and_allowed_tools_and_unknown_fields() {
        let (skill, warnings) = parse(
            "mac",
            "---\nname: mac\ndescription: d\nallowed-tools: Bash(git:*) Read\nmetadata:\n  os: [darwin]\nflavour: x\n---\nbody",
        )
        .unwrap();
        assert_eq!(skill.requires.os, ["darwin"]);
        assert_eq!(skill.allowed_tools, ["Bash(git:*)", "Read"]);
        assert_eq!(skill.body, "body");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].message.contains("unknown frontmatter field \"flavour\""));
    }

    #[test]
    fn nanoagent_single_file_and_json_skills_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("review.md"),
            "---\ndescription: Review a diff\nwhen_to_use: before committing\ntriggers: [review, diff]\n---\nLook for bugs.",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("Deploy Steps.json"),
            r#"{"name": "Deploy Steps", "when_to_use": "when asked to deploy", "content": "run make deploy"}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("empty.json"), r#"{"name": "empty"}"#).unwrap();
        std::fs::write(dir.path().join("README.md"), "not a skill").unwrap();
        let found = read_root(dir.path(), SkillSource::Project);
        assert_eq!(found.len(), 3);
        let (deploy, warnings) = found[0].clone().unwrap();
        assert_eq!(deploy.name, "Deploy Steps");
        assert_eq!(deploy.description, "when asked to deploy");
        assert_eq!(deploy.body, "run make deploy");
        assert!(warnings[0].message.contains("not portable"), "{warnings:?}");
        let empty = found[1].clone().unwrap_err();
        assert!(empty.message.contains("no instructions"), "{empty}");
        let (review, _) = found[2].clone().unwrap();
        assert_eq!(review.name, "review");
        assert_eq!(review.triggers, ["review", "diff"]);
        assert_eq!(review.when_to_use.as_deref(), Some("before committing"));
    }
}

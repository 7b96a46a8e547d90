//! What `ferroclaw mcp serve` offers besides tools: prompts (the caller
//! fills them from skills) and resources (files in folders the caller names:
//! memory files, session transcripts), as plain data and pure functions the
//! server handler calls. A resource is `PREFIX NAME` where NAME is one file
//! in the folder: no separators, no `..`, so a URI cannot reach outside it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

/// A prompt: a template with named arguments.
#[derive(Debug, Clone)]
pub struct PromptDef {
    pub name: String,
    pub description: String,
    /// (name, description, required).
    pub arguments: Vec<(String, String, bool)>,
    /// The text; `$ARGUMENTS` becomes the `arguments` argument, `$NAME` each named one.
    pub body: String,
}

/// A folder whose files are offered as resources `uri_prefix + file name`.
#[derive(Debug, Clone)]
pub struct ResourceFolder {
    /// `ferroclaw://memory/`.
    pub uri_prefix: String,
    pub dir: PathBuf,
    /// Only files ending with this (`.md`, `.jsonl`).
    pub extension: String,
    pub mime_type: String,
    /// What the folder holds, for the resource template.
    pub description: String,
}

/// Everything offered besides tools.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub prompts: Vec<PromptDef>,
    pub folders: Vec<ResourceFolder>,
}

/// The biggest resource read in full (a longer transcript is cut at its head).
pub(crate) const MAX_RESOURCE_BYTES: u64 = 4 * 1024 * 1024;
/// Completion values returned at most (the protocol's cap).
const MAX_COMPLETIONS: usize = 100;

impl ResourceFolder {
    /// The files offered, sorted by name.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(&self.extension) && !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    /// The file a URI names in this folder, if it is one of its files.
    fn file_of(&self, uri: &str) -> Option<PathBuf> {
        let name = uri.strip_prefix(&self.uri_prefix)?;
        let plain = !name.is_empty()
            && !name.contains(['/', '\\'])
            && name != ".."
            && !name.starts_with('.')
            && name.ends_with(&self.extension);
        plain.then(|| self.dir.join(name))
    }
}

impl Catalog {
    /// `resources/list`: every file of every folder.
    pub fn list_resources(&self) -> Value {
        let resources: Vec<Value> = self
            .folders
            .iter()
            .flat_map(|f| {
                f.files().into_iter().map(move |name| {
                    json!({
                        "uri": format!("{}{name}", f.uri_prefix),
                        "name": name,
                        "mimeType": f.mime_type,
                    })
                })
            })
            .collect();
        json!({ "resources": resources })
    }

    /// `resources/templates/list`: one template per folder.
    pub fn list_templates(&self) -> Value {
        let templates: Vec<Value> = self
            .folders
            .iter()
            .map(|f| {
                json!({
                    "uriTemplate": format!("{}{{name}}", f.uri_prefix),
                    "name": f.uri_prefix.trim_end_matches('/').rsplit('/').next().unwrap_or("files"),
                    "description": f.description,
                    "mimeType": f.mime_type,
                })
            })
            .collect();
        json!({ "resourceTemplates": templates })
    }

    /// The file behind a URI, when it is one this catalog offers.
    pub fn resource_path(&self, uri: &str) -> Option<(PathBuf, &ResourceFolder)> {
        self.folders.iter().find_map(|f| f.file_of(uri).map(|p| (p, f)))
    }

    /// `resources/read`: the file's text, or why not.
    pub fn read_resource(&self, uri: &str) -> Result<Value, String> {
        let (path, folder) = self.resource_path(uri).ok_or_else(|| format!("no resource {uri}"))?;
        let text = read_capped(&path).map_err(|e| format!("{uri}: {e}"))?;
        Ok(json!({"contents": [{"uri": uri, "mimeType": folder.mime_type, "text": text}]}))
    }

    /// When the file behind a URI last changed (`None`: it does not exist).
    pub fn modified(&self, uri: &str) -> Option<SystemTime> {
        let (path, _) = self.resource_path(uri)?;
        std::fs::symlink_metadata(path).and_then(|m| m.modified()).ok()
    }

    /// `prompts/list`.
    pub fn list_prompts(&self) -> Value {
        let prompts: Vec<Value> = self
            .prompts
            .iter()
            .map(|p| {
                let arguments: Vec<Value> = p
                    .arguments
                    .iter()
                    .map(|(name, description, required)| {
                        json!({"name": name, "description": description, "required": required})
                    })
                    .collect();
                json!({"name": p.name, "description": p.description, "arguments": arguments})
            })
            .collect();
        json!({ "prompts": prompts })
    }

    /// `prompts/get`: the body with the arguments filled in.
    pub fn get_prompt(
        &self,
        name: &str,
        arguments: &serde_json::Map<String, Value>,
    ) -> Result<Value, String> {
        let prompt = self.prompts.iter().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.prompts.iter().map(|p| p.name.as_str()).collect();
            format!("no prompt {name:?}; prompts: {}", names.join(", "))
        })?;
        for (arg, _, required) in &prompt.arguments {
            if *required && !arguments.contains_key(arg) {
                return Err(format!("prompt {name} needs the argument {arg:?}"));
            }
        }
        let mut text = prompt.body.clone();
        // Longest names first, so `$ARGUMENTS` is not taken as `$ARG` + `UMENTS`.
        let mut names: Vec<&String> = arguments.keys().collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for arg in names {
            let value = arguments.get(arg).and_then(Value::as_str).unwrap_or_default();
            text = text.replace(&format!("${}", arg.to_uppercase()), value);
            text = text.replace(&format!("${arg}"), value);
        }
        text = text.replace("$ARGUMENTS", "");
        Ok(json!({
            "description": prompt.description,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }))
    }

    /// `completion/complete`: file names for a resource template's `name`;
    /// nothing to offer for prompt arguments, which are free text.
    pub fn complete(&self, reference: &Value, argument: &str, prefix: &str) -> Value {
        let mut values = Vec::new();
        if reference["type"] == "ref/resource" && argument == "name" {
            let template = reference["uri"].as_str().unwrap_or_default();
            for folder in &self.folders {
                if template == format!("{}{{name}}", folder.uri_prefix) {
                    values.extend(folder.files().into_iter().filter(|n| n.starts_with(prefix)));
                }
            }
        }
        let total = values.len();
        values.truncate(MAX_COMPLETIONS);
        json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_COMPLETIONS}})
    }
}

/// A file's text, at most [`MAX_RESOURCE_BYTES`] of its end. Only a regular
/// file, opened without following a link: a link in the folder
/// (`MEMORY.md -> ~/.ssh/id_rsa`) or a FIFO (which would hang the read) is
/// refused.
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::other("a link, not a file; links are not read"),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let len = meta.len();
    if len > MAX_RESOURCE_BYTES {
        file.seek(SeekFrom::Start(len - MAX_RESOURCE_BYTES))?;
    }
    let mut bytes = Vec::new();
    file.take(MAX_RESOURCE_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(dir: &Path) -> Catalog {
        Catalog {
            prompts: vec![PromptDef {
                name: "review".into(),
                description: "Review a change".into(),
                arguments: vec![("arguments".into(), "what to review".into(), false)],
                body: "Review $ARGUMENTS carefully.".into(),
            }],
            folders: vec![ResourceFolder {
                uri_prefix: "ferroclaw://memory/".into(),
                dir: dir.to_path_buf(),
                extension: ".md".into(),
                mime_type: "text/markdown".into(),
                description: "memory files".into(),
            }],
        }
    }

    #[test]
    fn resources_are_the_folders_files_and_a_uri_cannot_leave_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "facts").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not offered").unwrap();
        let c = catalog(dir.path());
        let listed = c.list_resources();
        assert_eq!(listed["resources"].as_array().unwrap().len(), 1);
        assert_eq!(listed["resources"][0]["uri"], "ferroclaw://memory/MEMORY.md");
        let read = c.read_resource("ferroclaw://memory/MEMORY.md").unwrap();
        assert_eq!(read["contents"][0]["text"], "facts");
        for bad in [
            "ferroclaw://memory/../x.md",
            "ferroclaw://memory/a/b.md",
            "ferroclaw://memory/notes.txt",
        ] {
            assert!(c.read_resource(bad).is_err(), "{bad}");
        }
        let done = c.complete(
            &json!({"type": "ref/resource", "uri": "ferroclaw://memory/{name}"}),
            "name",
            "ME",
        );
        assert_eq!(done["completion"]["values"], json!(["MEMORY.md"]));
    }

    #[test]
    fn a_link_or_fifo_in_a_resource_folder_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "ssh key").unwrap();
        let memory = dir.path().join("memory");
        std::fs::create_dir(&memory).unwrap();
        std::os::unix::fs::symlink(&secret, memory.join("key.md")).unwrap();
        let fifo = std::ffi::CString::new(memory.join("pipe.md").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let c = catalog(&memory);
        let linked = c.read_resource("ferroclaw://memory/key.md").unwrap_err();
        assert!(linked.contains("link"), "{linked}");
        // Before, this open waited for a writer forever.
        let piped = c.read_resource("ferroclaw://memory/pipe.md").unwrap_err();
        assert!(piped.contains("not a regular file"), "{piped}");
        assert_eq!(c.list_resources()["resources"], json!([]), "neither is listed");
    }

    #[test]
    fn a_prompt_fills_in_its_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let c = catalog(dir.path());
        let args = json!({"arguments": "the parser"});
        let got = c.get_prompt("review", args.as_object().unwrap()).unwrap();
        assert_eq!(got["messages"][0]["content"]["text"], "Review the parser carefully.");
        assert!(c.get_prompt("nope", &Default::default()).is_err());
    }
}

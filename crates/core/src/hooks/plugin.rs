//! The hooks of Claude Code plugins given with `--plugin-dir DIR` (as
//! `claude --plugin-dir DIR` loads them): `DIR/hooks/hooks.json`, or the
//! `hooks` of the manifest `DIR/.claude-plugin/plugin.json` (an object, or
//! a path relative to `DIR`). They run after the settings' hooks.
//!
//! As in Claude Code, `${CLAUDE_PLUGIN_ROOT}` (the plugin's folder),
//! `${CLAUDE_PLUGIN_DATA}` (a folder the plugin may keep files in) and
//! `${CLAUDE_PROJECT_DIR}` in a plugin hook's command are replaced by their
//! paths before a shell sees the command, and the command gets the three as
//! environment variables.

use std::path::{Path, PathBuf};

use super::HookError;
use super::settings::{self, Hook, HookTable};

/// One plugin folder's hooks, ready to run in `workspace`; `data_root` holds
/// the plugins' data folders (`data_root/NAME`, made when a hook needs it).
pub fn hooks(dir: &Path, workspace: &Path, data_root: &Path) -> Result<Vec<Hook>, HookError> {
    let manifest_path = dir.join(".claude-plugin").join("plugin.json");
    let manifest = read_json(&manifest_path)?;
    let name = manifest
        .as_ref()
        .and_then(|m| m["name"].as_str().map(str::to_string))
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".to_string());
    let (table, source) = match manifest.as_ref().map(|m| &m["hooks"]) {
        Some(serde_json::Value::Object(_)) => {
            let hooks = manifest.as_ref().map(|m| m["hooks"].clone()).unwrap_or_default();
            (table_of(hooks, &manifest_path)?, manifest_path.clone())
        }
        Some(serde_json::Value::String(rel)) => {
            let file = dir.join(rel);
            (settings::read_claude_file(&file)?, file)
        }
        _ => {
            let file = dir.join("hooks").join("hooks.json");
            (settings::read_claude_file(&file)?, file)
        }
    };
    let Some(table) = table else { return Ok(Vec::new()) };
    let data = data_root.join(&name);
    let paths = [
        ("CLAUDE_PLUGIN_ROOT", dir.to_path_buf()),
        ("CLAUDE_PLUGIN_DATA", data.clone()),
        ("CLAUDE_PROJECT_DIR", workspace.to_path_buf()),
    ];
    let mut out = settings::compile(&table, &source)?;
    for hook in &mut out {
        if hook.options.http.is_some() || hook.options.prompt.is_some() {
            continue;
        }
        if hook.command.contains("${CLAUDE_PLUGIN_DATA}")
            && let Err(e) = std::fs::create_dir_all(&data)
        {
            tracing::warn!("plugin {name}: {}: {e}", data.display());
        }
        hook.command = substitute(&hook.command, &paths);
        hook.options.env =
            paths.iter().map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned())).collect();
    }
    Ok(out)
}

/// `${NAME}` replaced by its path for each of `paths`; other `$`s are left
/// for the shell.
fn substitute(command: &str, paths: &[(&str, PathBuf)]) -> String {
    paths.iter().fold(command.to_string(), |text, (name, path)| {
        text.replace(&format!("${{{name}}}"), &path.to_string_lossy())
    })
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>, HookError> {
    let bad = |message: String| HookError::Bad { path: path.to_path_buf(), message };
    let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
    match ferroclaw_tools::repo_file::read_repo_text(path, max) {
        Ok(text) => {
            serde_json::from_str(&text).map(Some).map_err(|e| bad(format!("not valid JSON: {e}")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(bad(e.to_string())),
    }
}

fn table_of(hooks: serde_json::Value, path: &Path) -> Result<Option<HookTable>, HookError> {
    serde_json::from_value(hooks).map(Some).map_err(|e| HookError::Bad {
        path: path.to_path_buf(),
        message: format!("\"hooks\": {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_paths_in_a_hook_command_are_replaced_and_set_in_its_environment() {
        let plugin = tempfile::tempdir().unwrap();
        let hooks_dir = plugin.path().join("hooks");
        std::fs::create_dir_all(&hooks_dir).unwrap();
        let command = r#""${CLAUDE_PLUGIN_ROOT}/scripts/check.sh" ${CLAUDE_PLUGIN_DATA} $HOME"#;
        let table = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": command}]}]}});
        std::fs::write(hooks_dir.join("hooks.json"), table.to_string()).unwrap();
        let data = tempfile::tempdir().unwrap();
        let hooks = hooks(plugin.path(), Path::new("/project"), data.path()).unwrap();
        let root = plugin.path().to_string_lossy();
        let name = plugin.path().file_name().unwrap().to_string_lossy();
        let data_dir = data.path().join(&*name);
        let expected = format!("\"{root}/scripts/check.sh\" {} $HOME", data_dir.display());
        assert_eq!(hooks[0].command, expected);
        assert!(data_dir.is_dir(), "the data folder is made for a hook that names it");
        let env = &hooks[0].options.env;
        assert!(env.contains(&("CLAUDE_PLUGIN_ROOT".into(), root.into_owned())), "{env:?}");
        assert!(env.contains(&("CLAUDE_PROJECT_DIR".into(), "/project".into())), "{env:?}");
    }
}

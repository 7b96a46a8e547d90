//! What a skill needs from the machine (nanobot's `metadata.requires`):
//! binaries on `PATH`, environment variables, an operating system.

use std::path::Path;

/// A skill's requirements; empty lists mean no requirement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// Programs that must be on `PATH` (`gh`, `ffmpeg`).
    pub bins: Vec<String>,
    /// Environment variables that must be set and non-empty.
    pub env: Vec<String>,
    /// Operating systems it runs on (`linux`, `darwin`/`macos`, `windows`);
    /// empty for any.
    pub os: Vec<String>,
}

impl Requirements {
    /// Why the skill cannot be used here, or `None` when every requirement
    /// is met. Names every missing piece so the user can install it.
    pub fn missing(&self) -> Option<String> {
        let mut reasons = Vec::new();
        if !self.os.is_empty() && !self.os.iter().any(|os| os_matches(os, std::env::consts::OS)) {
            reasons.push(format!(
                "only for {} (this is {})",
                self.os.join(", "),
                std::env::consts::OS
            ));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        for bin in &self.bins {
            if !on_path(bin, &path) {
                reasons.push(format!("needs `{bin}` on PATH"));
            }
        }
        for var in &self.env {
            if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
                reasons.push(format!("needs environment variable {var}"));
            }
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// True when a requirement's OS name denotes `current` (`std::env::consts::OS`).
fn os_matches(wanted: &str, current: &str) -> bool {
    let wanted = wanted.to_ascii_lowercase();
    let wanted = match wanted.as_str() {
        "darwin" | "mac" | "osx" => "macos",
        "win32" | "win" => "windows",
        other => other,
    };
    wanted == current
}

/// True when an executable file called `bin` is in one of the `PATH` folders
/// (or `bin` is itself a path to one).
fn on_path(bin: &str, path: &std::ffi::OsStr) -> bool {
    if bin.contains('/') {
        return is_executable(Path::new(bin));
    }
    std::env::split_paths(path).any(|dir| {
        is_executable(&dir.join(bin))
            || (cfg!(windows) && is_executable(&dir.join(format!("{bin}.exe"))))
    })
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn met_requirements_give_no_reason() {
        let r = Requirements {
            bins: vec!["sh".into()],
            env: vec!["PATH".into()],
            os: vec![std::env::consts::OS.into()],
        };
        assert_eq!(r.missing(), None);
        assert_eq!(Requirements::default().missing(), None);
    }

    #[test]
    fn every_missing_requirement_is_named() {
        let r = Requirements {
            bins: vec!["ferroclaw-no-such-binary".into()],
            env: vec!["FERROCLAW_NO_SUCH_VARIABLE".into()],
            os: vec!["plan9".into()],
        };
        let reason = r.missing().unwrap();
        assert!(reason.contains("only for plan9"), "{reason}");
        assert!(reason.contains("needs `ferroclaw-no-such-binary` on PATH"), "{reason}");
        assert!(
            reason.contains("needs environment variable FERROCLAW_NO_SUCH_VARIABLE"),
            "{reason}"
        );
    }

    #[test]
    fn os_aliases_are_understood() {
        assert!(os_matches("darwin", "macos"));
        assert!(os_matches("Linux", "linux"));
        assert!(os_matches("win32", "windows"));
        assert!(!os_matches("darwin", "linux"));
    }
}

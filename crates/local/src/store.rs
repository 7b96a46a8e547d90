//! The model store: GGUF files in `$FERROCLAW_HOME/models/`, one per model,
//! named `NAME.gguf`. `local/NAME` refers to `NAME.gguf` there. Files land
//! atomically (written beside, then renamed), so a listed model is whole.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::LocalError;

/// The first bytes of every GGUF file.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Extension of model files.
pub const EXTENSION: &str = "gguf";

/// Suffix of a download in progress (kept to resume it).
pub const PARTIAL_SUFFIX: &str = ".part";

/// An installed model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledModel {
    /// The name in `local/NAME`.
    pub name: String,
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
}

/// The models folder of one ferroclaw home.
#[derive(Debug, Clone)]
pub struct ModelStore {
    dir: PathBuf,
}

impl ModelStore {
    /// The store of `home` (`$FERROCLAW_HOME`): `home/models`.
    pub fn new(home: &Path) -> Self {
        Self { dir: home.join("models") }
    }

    /// The folder the models live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Installed models, sorted by name; a missing folder is an empty store.
    pub fn list(&self) -> Result<Vec<InstalledModel>, LocalError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(self.io(source)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
                continue;
            }
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let size = entry.metadata().map_or(0, |m| m.len());
            out.push(InstalledModel { name: name.to_string(), path: path.clone(), size });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Where the model `name` lives (whether or not it is installed).
    pub fn path_of(&self, name: &str) -> Result<PathBuf, LocalError> {
        check_name(name)?;
        Ok(self.dir.join(format!("{name}.{EXTENSION}")))
    }

    /// The installed model `name`, or an error listing what is installed.
    pub fn find(&self, name: &str) -> Result<InstalledModel, LocalError> {
        let path = self.path_of(name)?;
        match std::fs::metadata(&path) {
            Ok(m) => Ok(InstalledModel { name: name.to_string(), path, size: m.len() }),
            Err(_) => {
                let installed: Vec<String> = self.list()?.into_iter().map(|m| m.name).collect();
                Err(LocalError::NotInstalled {
                    name: name.to_string(),
                    installed: if installed.is_empty() {
                        "none".into()
                    } else {
                        installed.join(", ")
                    },
                })
            }
        }
    }

    /// Copies a GGUF file into the store as `name` (default: the file's stem).
    pub fn import(&self, source: &Path, name: Option<&str>) -> Result<InstalledModel, LocalError> {
        check_gguf(source)?;
        let name = match name {
            Some(n) => n.to_string(),
            None => source
                .file_stem()
                .and_then(|s| s.to_str())
                .ok_or_else(|| LocalError::BadName { name: source.display().to_string() })?
                .to_string(),
        };
        let dest = self.path_of(&name)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| self.io(e))?;
        let tmp = self.dir.join(format!(".{name}.{EXTENSION}.import"));
        let copied = std::fs::copy(source, &tmp)
            .and_then(|_| std::fs::rename(&tmp, &dest))
            .map_err(|source| LocalError::Io { path: dest.clone(), source });
        if copied.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        copied?;
        self.find(&name)
    }

    /// Deletes the model `name`, and any partial download of it.
    pub fn remove(&self, name: &str) -> Result<InstalledModel, LocalError> {
        let model = self.find(name)?;
        std::fs::remove_file(&model.path)
            .map_err(|source| LocalError::Io { path: model.path.clone(), source })?;
        let _ = std::fs::remove_file(partial_path(&model.path));
        Ok(model)
    }

    fn io(&self, source: std::io::Error) -> LocalError {
        LocalError::Io { path: self.dir.clone(), source }
    }
}

/// Where a download of `dest` accumulates until it is complete.
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(PARTIAL_SUFFIX);
    dest.with_file_name(name)
}

/// Names are plain file stems: no separators, no leading dot.
fn check_name(name: &str) -> Result<(), LocalError> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok { Ok(()) } else { Err(LocalError::BadName { name: name.to_string() }) }
}

/// Checks that `path` is a readable GGUF file (by its magic bytes).
pub fn check_gguf(path: &Path) -> Result<(), LocalError> {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|source| LocalError::ModelFile { path: path.to_path_buf(), source })?;
    if &magic == GGUF_MAGIC {
        Ok(())
    } else {
        Err(LocalError::NotGguf { path: path.to_path_buf() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_gguf(dir: &Path, file: &str) -> PathBuf {
        let p = dir.join(file);
        std::fs::write(&p, b"GGUF\x03\x00\x00\x00rest").unwrap();
        p
    }

    #[test]
    fn import_list_find_and_remove_round_trip() {
        let home = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        let store = ModelStore::new(home.path());
        assert_eq!(store.list().unwrap(), []);
        let f = fake_gguf(src.path(), "Tiny-1B.Q4.gguf");
        let m = store.import(&f, None).unwrap();
        assert_eq!(m.name, "Tiny-1B.Q4");
        assert_eq!(store.list().unwrap(), std::slice::from_ref(&m));
        assert_eq!(store.find("Tiny-1B.Q4").unwrap(), m);
        store.remove("Tiny-1B.Q4").unwrap();
        assert_eq!(store.list().unwrap(), []);
    }

    #[test]
    fn a_missing_model_error_lists_the_installed_ones() {
        let home = tempfile::tempdir().unwrap();
        let store = ModelStore::new(home.path());
        let src = fake_gguf(home.path(), "x.gguf");
        store.import(&src, Some("alpha")).unwrap();
        let err = store.find("beta").unwrap_err().to_string();
        assert!(err.contains("\"beta\"") && err.contains("alpha"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_gguf_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.gguf");
        std::fs::write(&p, b"hello").unwrap();
        let err = ModelStore::new(dir.path()).import(&p, None).unwrap_err();
        assert!(matches!(err, LocalError::NotGguf { .. }), "{err}");
    }

    #[test]
    fn names_with_separators_are_refused() {
        let store = ModelStore::new(Path::new("/h"));
        for bad in ["../x", "a/b", ".hidden", ""] {
            assert!(store.path_of(bad).is_err(), "{bad}");
        }
        assert!(store.path_of("qwen2.5-0.5b_q4").is_ok());
    }
}

//! `ferroclaw model list | pull | import | rm`: the local model store (the
//! runtime opens the models: `ferroclaw_runtime`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Subcommand;
use ferroclaw_core::Config;
use ferroclaw_local::{CATALOGUE, ModelStore, Progress, catalogue};

use crate::exit;
use crate::setup::SetupError;

/// How often the progress bar is redrawn.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(150);

#[derive(Debug, Subcommand)]
pub(crate) enum ModelAction {
    /// Installed models, then the catalogue of models to pull.
    List,
    /// Download a model: a catalogue name, or the URL of a GGUF file.
    Pull {
        /// Catalogue name (see `ferroclaw model list`) or https URL.
        model: String,
        /// Install under this name (default: the catalogue name or the file's name).
        #[arg(long)]
        name: Option<String>,
        /// Expected SHA-256 of a URL download.
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
    },
    /// Copy a GGUF file into the store.
    Import {
        path: PathBuf,
        /// Install under this name (default: the file's name without .gguf).
        #[arg(long)]
        name: Option<String>,
    },
    /// Delete an installed model.
    Rm { name: String },
}

/// Runs a `model` subcommand.
pub(crate) async fn run(action: &ModelAction, config: &Config) -> Result<i32, SetupError> {
    let store = ModelStore::new(&config.home);
    let local = |e: ferroclaw_local::LocalError| SetupError::Other(e.to_string());
    match action {
        ModelAction::List => {
            list(&store).map_err(local)?;
            Ok(exit::OK)
        }
        ModelAction::Pull { model, name, sha256 } => {
            pull(&store, model, name.as_deref(), sha256.as_deref()).await
        }
        ModelAction::Import { path, name } => {
            let m = store.import(path, name.as_deref()).map_err(local)?;
            println!("imported {} as local/{} ({})", path.display(), m.name, size(m.size));
            Ok(exit::OK)
        }
        ModelAction::Rm { name } => {
            let m = store.remove(name).map_err(local)?;
            println!("removed local/{} ({})", m.name, m.path.display());
            Ok(exit::OK)
        }
    }
}

fn list(store: &ModelStore) -> Result<(), ferroclaw_local::LocalError> {
    let installed = store.list()?;
    println!("installed in {}:", store.dir().display());
    if installed.is_empty() {
        println!("  (none)");
    }
    for m in &installed {
        println!("  local/{:<28} {:>9}", m.name, size(m.size));
    }
    println!("catalogue (ferroclaw model pull NAME):");
    for e in &CATALOGUE {
        let mark = if installed.iter().any(|m| m.name == e.name) { "*" } else { " " };
        let checksum = if e.sha256.is_some() { "" } else { " [no checksum]" };
        println!("{mark} {:<30} {:>9}  {}{checksum}", e.name, size(e.size), e.description);
    }
    Ok(())
}

async fn pull(
    store: &ModelStore,
    model: &str,
    name: Option<&str>,
    sha256: Option<&str>,
) -> Result<i32, SetupError> {
    let (url, default_name, expected) =
        if model.starts_with("https://") || model.starts_with("http://") {
            let stem = url_stem(model).ok_or_else(|| {
                SetupError::Other(format!("cannot tell a model name from {model}; pass --name"))
            })?;
            (model.to_string(), stem, sha256.map(str::to_string))
        } else {
            let entry = catalogue::find(model).ok_or_else(|| {
                SetupError::Other(format!(
                    "no model {model:?} in the catalogue ({}); or pass the URL of a .gguf file",
                    catalogue::names()
                ))
            })?;
            let expected = sha256.or(entry.sha256).map(str::to_string);
            (entry.url.to_string(), entry.name.to_string(), expected)
        };
    let name = name.unwrap_or(&default_name);
    let dest = store.path_of(name).map_err(|e| SetupError::Other(e.to_string()))?;
    if dest.exists() {
        println!("local/{name} is already installed ({})", dest.display());
        return Ok(exit::OK);
    }
    eprintln!("downloading {url}");
    let mut bar = ProgressBar::new(name);
    let result = ferroclaw_local::download(&url, &dest, expected.as_deref(), |p| bar.draw(p)).await;
    bar.finish();
    let got = result.map_err(|e| match e {
        // Offline, or the host is blocked: the file can still come another way.
        ferroclaw_local::DownloadError::Connect { .. } => SetupError::Other(format!(
            "{e}; without a way to that host, get the .gguf file another way and add it with \
             `ferroclaw model import FILE`"
        )),
        e => SetupError::Other(e.to_string()),
    })?;
    if !got.verified {
        eprintln!(
            "warning: no published checksum to compare with; sha256 of the download is {}",
            got.sha256
        );
    }
    println!("installed local/{name} ({}, {})", size(got.size), dest.display());
    Ok(exit::OK)
}

/// The file name of a URL without `.gguf`, query and fragment.
fn url_stem(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?;
    let file = path.rsplit('/').next()?;
    let stem = file.strip_suffix(".gguf").unwrap_or(file);
    (!stem.is_empty()).then(|| stem.to_string())
}

/// A progress bar on stderr: redrawn in place on a terminal, a line per 10%
/// otherwise.
struct ProgressBar {
    label: String,
    tty: bool,
    last_draw: Option<Instant>,
    last_tenth: u64,
    started: Instant,
}

impl ProgressBar {
    fn new(label: &str) -> Self {
        Self {
            label: label.to_string(),
            tty: std::io::stderr().is_terminal(),
            last_draw: None,
            last_tenth: u64::MAX,
            started: Instant::now(),
        }
    }

    fn draw(&mut self, p: Progress) {
        let complete = p.total.is_some_and(|t| p.done >= t);
        let percent = p.total.filter(|t| *t > 0).map(|t| p.done * 100 / t);
        let rate =
            (p.done - p.resumed_from) as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        let mut stderr = std::io::stderr();
        if self.tty {
            if !complete && self.last_draw.is_some_and(|t| t.elapsed() < PROGRESS_INTERVAL) {
                return;
            }
            self.last_draw = Some(Instant::now());
            let bar = match percent {
                Some(pc) => {
                    let filled = (pc as usize * 30 / 100).min(30);
                    format!("[{}{}] {pc:>3}%", "#".repeat(filled), ".".repeat(30 - filled))
                }
                None => String::new(),
            };
            let total = p.total.map(|t| format!("/{}", size(t))).unwrap_or_default();
            let _ = write!(
                stderr,
                "\r{} {bar} {}{total} {}/s   ",
                self.label,
                size(p.done),
                size(rate as u64)
            );
        } else {
            let tenth = percent.map_or(0, |pc| pc / 10);
            if tenth == self.last_tenth {
                return;
            }
            self.last_tenth = tenth;
            let _ =
                writeln!(stderr, "{}: {}% ({})", self.label, percent.unwrap_or(0), size(p.done));
        }
        let _ = stderr.flush();
    }

    fn finish(&self) {
        if self.tty && self.last_draw.is_some() {
            eprintln!();
        }
    }
}

/// Bytes for people: `98.4 MB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_the_model_by_its_file() {
        assert_eq!(
            url_stem("https://h/x/Qwen3-4B-Q4_K_M.gguf?download=true").as_deref(),
            Some("Qwen3-4B-Q4_K_M")
        );
        assert_eq!(url_stem("https://h/"), None);
    }

    #[test]
    fn sizes_read_like_a_person_wrote_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(98_362_432), "98.4 MB");
        assert_eq!(size(1_834_426_016), "1.8 GB");
    }
}

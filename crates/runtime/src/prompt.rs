//! The prompt layers and the tools that go with them, built once per change
//! and shared (`Arc`) by every agent opened from them. A build is reused
//! until a file it read changes (memory, bootstrap and project files, rules,
//! skills) or it is [`PROMPT_MAX_AGE`] old (the runtime layer's clock and git
//! state).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use ferroclaw_core::context::{BOOTSTRAP_FILES, PromptProfile, instructions};
use ferroclaw_core::memory::Target;
use ferroclaw_core::recall::Recall;
use ferroclaw_core::skills::SkillSet;
use ferroclaw_core::{Config, ContextBuilder};
use ferroclaw_tools::ToolRegistry;

use crate::RuntimeError;

/// How long a build's runtime layer (date and time, git state) is used
/// before it is built again: a minute-old clock is close enough for a model,
/// and `git status` is not run for every chat opened.
pub const PROMPT_MAX_AGE: Duration = Duration::from_secs(60);

/// One build: the system prompt and the shared tools of a profile.
pub(crate) struct Prompt {
    pub(crate) system: Arc<str>,
    pub(crate) tools: ToolRegistry,
    stamp: Stamp,
    built: Instant,
}

/// The builds so far, by profile.
#[derive(Default)]
pub(crate) struct Prompts {
    builds: Mutex<Vec<(PromptProfile, Arc<Prompt>)>>,
}

impl Prompts {
    /// The build for `profile`, reused while its sources are unchanged.
    pub(crate) fn get(
        &self,
        profile: PromptProfile,
        build: impl FnOnce() -> Result<Prompt, RuntimeError>,
    ) -> Result<Arc<Prompt>, RuntimeError> {
        let cached = self.lock().iter().find(|(p, _)| *p == profile).map(|(_, b)| b.clone());
        if let Some(prompt) = cached
            && prompt.built.elapsed() < PROMPT_MAX_AGE
            && prompt.stamp.is_current()
        {
            return Ok(prompt);
        }
        let fresh = Arc::new(build()?);
        let mut builds = self.lock();
        builds.retain(|(p, _)| *p != profile);
        builds.push((profile, fresh.clone()));
        Ok(fresh)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PromptProfile, Arc<Prompt>)>> {
        self.builds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Builds the layers of `profile` from `config`'s workspace and the tools
/// that go with them (the task board and worktree tools on `project`'s);
/// returns the problems found (skipped skills) for the caller to report once.
pub(crate) fn build(
    config: &Config,
    project: &Config,
    profile: PromptProfile,
    shared: &ToolRegistry,
    recall: Option<Arc<Recall>>,
) -> Result<(Prompt, Vec<String>), RuntimeError> {
    let stamp = Stamp::of(config);
    let context = ContextBuilder::for_config(config)
        .profile(profile)
        .repo_map(repo_map_layer(config))
        .build();
    let mut tools = shared.clone();
    context.register_tools(&mut tools, recall);
    crate::tools::after_context_tools(project, &mut tools)?;
    let prompt =
        Prompt { system: context.system_prompt().into(), tools, stamp, built: Instant::now() };
    Ok((prompt, context.warnings))
}

/// The repo map for the prompt when `[context] repo_map = true` and the
/// project has a code index (`ferroclaw index`); empty otherwise, or when
/// the index cannot be read (logged). The map comes from the index as it is
/// (edits re-index their files; nothing is walked here) and is cached in it
/// by the files' hashes.
pub fn repo_map_layer(config: &Config) -> String {
    let section = config.file.context.unwrap_or_default();
    if section.repo_map != Some(true) {
        return String::new();
    }
    let tokens = section.repo_map_tokens.unwrap_or(ferroclaw_codegraph::DEFAULT_REPO_MAP_TOKENS);
    let map = ferroclaw_codegraph::CodeIndex::open_existing(&config.workspace, &config.home)
        .and_then(|index| index.repo_map(tokens));
    match map {
        Ok(map) => map,
        Err(ferroclaw_codegraph::Error::NoIndex(_)) => String::new(),
        Err(e) => {
            tracing::warn!(error = %e, "repo map left out of the prompt");
            String::new()
        }
    }
}

/// What the files a build read looked like: size and modification time of
/// each (a folder's time changes when an entry is added or removed).
struct Stamp(Vec<(PathBuf, Option<(SystemTime, u64)>)>);

impl Stamp {
    fn of(config: &Config) -> Stamp {
        let (home, workspace) = (&config.home, &config.workspace);
        let mut paths = Vec::new();
        let memory = ferroclaw_core::memory::MemoryStore::new(home);
        paths.push(memory.path(Target::Memory));
        let bootstrap = ferroclaw_core::memory::workspace_dir(home);
        paths.extend(BOOTSTRAP_FILES.iter().map(|f| bootstrap.join(f)));
        let claude = instructions::claude_home();
        let outside = instructions::outside_imports_allowed(config);
        paths.extend(instructions::candidate_paths(workspace, claude.as_deref(), outside));
        for dir in [home.join("rules"), workspace.join(".agent").join("rules")] {
            paths.extend(entries(&dir));
            paths.push(dir);
        }
        for root in SkillSet::roots(workspace, home) {
            paths.extend(entries(&root.dir).into_iter().map(|d| d.join("SKILL.md")));
            paths.push(root.dir);
        }
        Stamp(paths.into_iter().map(|p| (p.clone(), look(&p))).collect())
    }

    fn is_current(&self) -> bool {
        self.0.iter().all(|(path, seen)| look(path) == *seen)
    }
}

fn look(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    out.sort();
    out
}

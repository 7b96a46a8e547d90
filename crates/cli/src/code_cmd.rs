//! `ferroclaw index` and `ferroclaw code ...`: build or update this
//! project's code graph, and ask it the questions the model's `code_*`
//! tools ask (outline, find, definition, callers, callees, impact).

use std::time::Instant;

use clap::{Args, Subcommand};
use ferroclaw_codegraph::render::{self, LEGEND, Page};
use ferroclaw_codegraph::{CodeIndex, Staleness, SymbolKind};
use ferroclaw_core::Config;

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// `ferroclaw code ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum CodeAction {
    /// A file's symbols, nested, with line ranges and signatures.
    Outline {
        /// File path relative to the project.
        path: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Symbols whose name contains QUERY, exact names first.
    Find {
        query: String,
        /// Only this kind: function, method, class, struct, enum, trait, module, constant.
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Where SYMBOL (`name`, `Type::name`, `path:name`) is defined.
    Definition {
        symbol: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Who calls SYMBOL, up to --depth hops.
    Callers {
        symbol: String,
        #[arg(long, default_value_t = 1)]
        depth: usize,
        #[command(flatten)]
        page: PageArgs,
    },
    /// What SYMBOL calls, up to --depth hops.
    Callees {
        symbol: String,
        #[arg(long, default_value_t = 1)]
        depth: usize,
        #[command(flatten)]
        page: PageArgs,
    },
    /// What may break if SYMBOL changes: transitive callers, files, tests.
    Impact {
        symbol: String,
        #[command(flatten)]
        page: PageArgs,
    },
}

/// Paging of an answer.
#[derive(Debug, Args)]
pub(crate) struct PageArgs {
    /// Lines to skip.
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Budget of the answer in characters.
    #[arg(long, default_value_t = render::DEFAULT_MAX_CHARS)]
    max_chars: usize,
}

fn open(cli: &Cli) -> Result<CodeIndex, SetupError> {
    let workspace = setup::workspace(cli)?;
    CodeIndex::open(&workspace, &Config::default_home())
        .map_err(|e| SetupError::Other(e.to_string()))
}

/// `ferroclaw index`: builds or updates the index and says what it did.
pub(crate) fn index(cli: &Cli) -> Result<i32, SetupError> {
    let started = Instant::now();
    let mut index = open(cli)?;
    let stats = index.update().map_err(|e| SetupError::Other(e.to_string()))?;
    let counts = index.counts().map_err(|e| SetupError::Other(e.to_string()))?;
    let wal = index.db_path().with_extension("db-wal");
    let size = [index.db_path(), wal.as_path()]
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum::<u64>();
    println!(
        "indexed {} files ({} parsed, {} removed) in {} ms: {} symbols, {} call sites, {} edges ({} exact)",
        stats.files,
        stats.parsed,
        stats.removed,
        started.elapsed().as_millis(),
        counts.symbols,
        counts.sites,
        counts.edges,
        counts.exact_edges
    );
    println!(
        "  walk {} ms, parse {} ms, write {} ms, link {} ms ({} sites)",
        stats.walk.as_millis(),
        stats.parse.as_millis(),
        stats.write.as_millis(),
        stats.link.as_millis(),
        stats.relinked_sites
    );
    println!("{} ({} KB with its WAL)", index.db_path().display(), size / 1024);
    Ok(exit::OK)
}

/// `ferroclaw code ...`: updates the index (only changed files are parsed), then answers.
pub(crate) fn code(cli: &Cli, action: &CodeAction) -> Result<i32, SetupError> {
    let mut index = open(cli)?;
    let stale = match index.update() {
        Ok(_) => Staleness { changed: Vec::new(), age_secs: Some(0) },
        Err(e) => {
            eprintln!("ferroclaw: code index not updated ({e}); answering from it as it is");
            index.staleness().map_err(|e| SetupError::Other(e.to_string()))?
        }
    };
    let answer = ask(&index, action);
    let (header, lines, page) = match answer {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ferroclaw: {e}");
            return Ok(exit::FAILED);
        }
    };
    let counts = index.counts().map_err(|e| SetupError::Other(e.to_string()))?;
    let header = format!("{header}\n{}\n{LEGEND}", render::freshness(&counts, &stale));
    print!(
        "{}",
        render::paginate(&header, &lines, Page { offset: page.offset, max_chars: page.max_chars })
    );
    Ok(exit::OK)
}

type Answer<'a> = (String, Vec<String>, &'a PageArgs);

fn ask<'a>(index: &CodeIndex, action: &'a CodeAction) -> Result<Answer<'a>, String> {
    let err = |e: ferroclaw_codegraph::Error| match e {
        // The library's wording names the model's tool; here a person types a command.
        ferroclaw_codegraph::Error::UnknownSymbol(name) => format!(
            "no symbol `{name}` in the code index (try `ferroclaw code find` with part of the name)"
        ),
        e => e.to_string(),
    };
    Ok(match action {
        CodeAction::Outline { path, page } => {
            let symbols = index.outline(path).map_err(err)?;
            (
                format!("outline of {path}: {} symbols", symbols.len()),
                render::outline_lines(&symbols),
                page,
            )
        }
        CodeAction::Find { query, kind, page } => {
            let kind = match kind {
                Some(k) => Some(SymbolKind::parse(k).ok_or_else(|| {
                    format!(
                        "unknown kind {k:?}; kinds: function, method, class, struct, enum, trait, \
                         module, constant"
                    )
                })?),
                None => None,
            };
            let found = index.find(query, kind, 500).map_err(err)?;
            (
                format!("{} symbols matching `{query}`", found.len()),
                render::symbol_lines(&found),
                page,
            )
        }
        CodeAction::Definition { symbol, page } => {
            let found = index.definition(symbol).map_err(err)?;
            if found.is_empty() {
                return Err(err(ferroclaw_codegraph::Error::UnknownSymbol(symbol.clone())));
            }
            (
                format!("{} definitions of `{symbol}`", found.len()),
                render::symbol_lines(&found),
                page,
            )
        }
        CodeAction::Callers { symbol, depth, page } => {
            let (h, l) =
                render::callers_lines(&index.callers(symbol, (*depth).clamp(1, 10)).map_err(err)?);
            (h, l, page)
        }
        CodeAction::Callees { symbol, depth, page } => {
            let (h, l) =
                render::callees_lines(&index.callees(symbol, (*depth).clamp(1, 10)).map_err(err)?);
            (h, l, page)
        }
        CodeAction::Impact { symbol, page } => {
            let (h, l) = render::impact_lines(&index.impact(symbol).map_err(err)?);
            (h, l, page)
        }
    })
}

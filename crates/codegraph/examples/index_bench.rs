//! Indexes a project and measures the code graph: full build time, database
//! size, a no-change update, an update after one edit, and query latency.
//! Run by `bench/codegraph.sh`, which copies a pinned repository first
//! (this edits one file of the project it is given).
//!
//! Usage: index_bench PROJECT [QUERIES]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferroclaw_codegraph::{CodeIndex, SymbolKind};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(project) = args.next().map(PathBuf::from) else {
        eprintln!("usage: index_bench PROJECT [QUERIES]");
        std::process::exit(2);
    };
    let queries: usize = args.next().and_then(|q| q.parse().ok()).unwrap_or(200);
    let home = tempfile::tempdir().expect("temp folder");
    if let Err(e) = run(&project, home.path(), queries) {
        eprintln!("index_bench: {e}");
        std::process::exit(1);
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn run(
    project: &std::path::Path,
    home: &std::path::Path,
    queries: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut index = CodeIndex::open(project, home)?;
    let full = index.update()?;
    let counts = index.counts()?;
    let db = index.db_path().to_path_buf();
    let wal = db.with_extension("db-wal");
    let size: u64 = [&db, &wal].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
    println!(
        "full build: {} files, {} symbols, {} sites, {} edges ({} exact) in {} (walk {}, parse {}, write {}, link {})",
        full.files,
        counts.symbols,
        counts.sites,
        counts.edges,
        counts.exact_edges,
        ms(full.elapsed),
        ms(full.walk),
        ms(full.parse),
        ms(full.write),
        ms(full.link)
    );
    println!("database: {:.1} MB (with WAL)", size as f64 / 1e6);

    let again = index.update()?;
    println!("update, nothing changed: {} ({} parsed)", ms(again.elapsed), again.parsed);

    // One edit: a comment at the top of the file whose symbols are called most.
    let target = most_called_file(&index)?;
    let path = project.join(&target);
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, format!("// edited by the benchmark\n{text}"))?;
    let one = index.reindex_file(&path)?;
    println!(
        "reindex_file after one edit of {target}: {} ({} sites re-linked)",
        ms(one.elapsed),
        one.relinked_sites
    );
    std::fs::write(&path, format!("// edited twice\n{text}"))?;
    let walk_one = index.update()?;
    println!(
        "update after one edit (walk + parse + link): {} ({} parsed)",
        ms(walk_one.elapsed),
        walk_one.parsed
    );

    let functions: Vec<String> = index
        .find("", Some(SymbolKind::Function), 100_000)?
        .into_iter()
        .chain(index.find("", Some(SymbolKind::Method), 100_000)?)
        .map(|s| format!("{}:{}", s.path, s.qualified))
        .collect();
    let step = (functions.len() / queries.max(1)).max(1);
    let picked: Vec<&String> = functions.iter().step_by(step).take(queries).collect();
    for (name, f) in [
        (
            "callers",
            &(|i: &CodeIndex, s: &str| i.callers(s, 1).map(|_| ()))
                as &dyn Fn(&CodeIndex, &str) -> _,
        ),
        ("callees", &|i: &CodeIndex, s: &str| i.callees(s, 1).map(|_| ())),
        ("impact", &|i: &CodeIndex, s: &str| i.impact(s).map(|_| ())),
    ] {
        let mut times = Vec::new();
        for spec in &picked {
            let started = Instant::now();
            f(&index, spec)?;
            times.push(started.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
        println!("{name} x{}: median {}, p99 {}", times.len(), ms(median), ms(p99));
    }
    Ok(())
}

/// The file holding the symbol with the most inbound edges.
fn most_called_file(index: &CodeIndex) -> Result<String, Box<dyn std::error::Error>> {
    let mut best = (0, String::new());
    for s in index.find("", Some(SymbolKind::Function), 100_000)?.iter().take(2_000) {
        let callers = index.callers(&format!("{}:{}", s.path, s.qualified), 1)?.edges.len();
        if callers > best.0 {
            best = (callers, s.path.clone());
        }
    }
    if best.1.is_empty() {
        return Err("no function with callers".into());
    }
    Ok(best.1)
}

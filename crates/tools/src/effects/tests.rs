use super::*;
use crate::shell::parse;

fn fx(command: &str) -> Effects {
    of(&parse(command).commands[0].words)
}

#[test]
fn the_table_parses_and_covers_the_common_programs() {
    let table = Table::parse(include_str!("programs.toml")).unwrap();
    let names = table.names();
    assert!(names.len() >= 150, "{} names", names.len());
    for program in [
        "ls", "cat", "find", "xargs", "sed", "awk", "perl", "python3", "node", "ruby", "sort",
        "tar", "git", "cargo", "npm", "npx", "yarn", "pnpm", "rg", "grep", "curl", "wget", "make",
        "docker", "tee", "cp", "mv", "ln", "install", "dd", "rsync", "patch", "zip", "unzip",
        "less", "env", "time", "nice", "timeout", "flock", "stdbuf", "ionice", "coproc",
    ] {
        assert!(table.get(program).is_some(), "{program} is missing");
    }
    for (name, sub) in [("git", "log"), ("git", "status"), ("cargo", "test"), ("docker", "ps")] {
        assert!(table.get(name).unwrap().sub_entry(sub).is_some(), "{name} {sub}");
    }
}

#[test]
fn malformed_entries_are_refused() {
    assert!(Table::parse("[x]\nflags = \"o\"").is_err(), "an option without a dash");
    assert!(
        Table::parse("[x]\nwrites = \"-o\"\nruns = \"-o\"").is_err(),
        "one option, two meanings"
    );
    assert!(Table::parse("[x]\nleading = 1").is_err(), "leading words on a non-wrapper");
    assert!(Table::parse("[x]\nflagz = \"-o\"").is_err(), "an unknown field");
    assert!(Table::parse("[x]\naliases = [\"y\"]\n[y]").is_err(), "two entries for one name");
}

#[test]
fn options_that_write_are_writes_in_every_spelling() {
    for command in [
        "sort -o out.txt in",
        "sort -oout.txt in",
        "sort --output=out.txt in",
        "sort --output out.txt in",
        "sort --out=out.txt in",
        "sort -ro out.txt in",
        "git log --output=out.txt --format=%H",
        "git -C . log --output out.txt",
        "find . -fprint out.txt",
        "sed -n 'w out.txt' in",
        "sed -n -e 's/a/b/w out.txt' in",
        "time -o out.txt ls",
        "curl -o out.txt http://x",
        "cargo build --target-dir out.txt",
    ] {
        let fx = fx(command);
        assert!(fx.writes.iter().any(|w| w.path == "out.txt"), "{command}: {fx:?}");
    }
    for command in ["sort -n in", "git log --oneline -5", "sed -n 1,20p f", "find . -name x -print"]
    {
        assert!(fx(command).plain(), "{command}: {:?}", fx(command));
    }
}

#[test]
fn options_that_run_programs_are_seen() {
    let runs = |c: &str| fx(c).runs.iter().map(|w| w.text.clone()).collect::<Vec<_>>();
    assert_eq!(runs("sort --compress-program=gzip x"), ["gzip"]);
    assert_eq!(runs("rg --pre ./evil x"), ["./evil"]);
    assert_eq!(runs("tar -I 'sh -c id' -cf a.tar x"), ["sh -c id"]);
    assert_eq!(runs("flock /tmp/l -c 'rm -rf x'"), ["rm -rf x"]);
    for opaque in [
        "git -c core.pager=id log",
        "git --config-env=core.pager=X log",
        "cargo --config build.rustc-wrapper='x' build",
        "tar --checkpoint-action=exec=id -cf a.tar x",
        "sed 's/x/id/e' f",
        "awk 'BEGIN{system(\"id\")}'",
        "rg -z x",
    ] {
        assert!(!fx(opaque).opaque.is_empty(), "{opaque}");
    }
    assert!(!fx("sort --frobnicate x").unknown.is_empty());
    // A computed word may be any option; `-o$F` is `-o` whatever F is.
    assert!(!fx("sort $(printf -- -oout) x").unknown.is_empty());
    assert!(fx("sort -o\"$F\" x").writes[0].dynamic);
    assert!(fx("cat \"$F\"").unknown.is_empty(), "cat has no option that writes or runs");
    assert!(!fx("git frobnicate --all").unknown.is_empty());
}

#[test]
fn wrappers_with_separate_option_values_are_seen_through() {
    for command in [
        "xargs --max-args 1 rm -rf",
        "stdbuf --output 0 rm -rf x",
        "ionice --class 3 rm -rf x",
        "env -- X=1 rm -rf x",
        "timeout -s KILL 5 rm -rf x",
        "nice -n 5 rm -rf x",
        "time -p rm -rf x",
        "sudo -u root rm -rf x",
    ] {
        let words = &parse(command).commands[0].words;
        let layers = layers(words);
        let last = layers.starts.last().copied().unwrap_or(0);
        assert_eq!(words[last].text, "rm", "{command}: {layers:?}");
        assert!(layers.certain, "{command}");
    }
    // An option the table does not know, or a name that may come first:
    // every later word may start the command.
    for command in ["stdbuf --weird 0 rm -rf x", "coproc rm -rf x", "coproc X { rm -rf x; }"] {
        let cmd = &parse(command).commands[0];
        assert!(!layers(&cmd.words).certain, "{command}");
        let starts: Vec<&str> =
            cmd.possible_commands().iter().map(|w| w[0].text.as_str()).collect();
        assert!(starts.contains(&"rm"), "{command}: {starts:?}");
    }
}

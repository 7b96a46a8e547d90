//! The spelling grammar: real programs with arguments (harmless ones, and
//! ones that write or run through an option or a script), wrapped in every
//! option form of the wrappers, combined with bash's forms, quoted in
//! several ways. No argument names a network address.

use super::Program;

const fn p(name: &'static str, args: &'static [&'static str]) -> Program {
    Program { name, args }
}

/// The programs and their argument lists; only installed ones are used.
pub(super) const PROGRAMS: &[Program] = &[
    p(
        "ls",
        &["", "-la", "-l src", "-R", "--color=never -1", "-d emptydir", "-lt --time-style=iso"],
    ),
    p("cat", &["a.txt", "-n a.txt", "a.txt b.txt", "-A README.md"]),
    p("head", &["-1 a.txt", "-n 2 names.txt", "-c 3 a.txt", "-5 a.txt"]),
    p("tail", &["-n 1 a.txt", "-1 names.txt", "-c 4 a.txt"]),
    p("wc", &["-l a.txt", "-c a.txt b.txt", "-w README.md", "--files0-from=/dev/null"]),
    p(
        "sort",
        &[
            "names.txt",
            "-r names.txt",
            "-n -t, -k2 data.csv",
            "-u names.txt",
            "-o out.txt names.txt",
            "--output=out.txt names.txt",
            "-ro out.txt names.txt",
            "--out=out.txt names.txt",
            "--compress-program=gzip names.txt",
            "-S 1K -T . names.txt",
        ],
    ),
    p("uniq", &["names.txt", "-c names.txt", "names.txt out.txt"]),
    p("cut", &["-d, -f1 data.csv", "-c1-3 a.txt", "--fields=2 --delimiter=, data.csv"]),
    p("tr", &["a b", "-d x", "-s ' '"]),
    p("echo", &["hi", "-n x", "-e 'a\\tb'", "$HOME"]),
    p("printf", &["'%s\\n' x", "x", "-v v x"]),
    p("true", &[""]),
    p("false", &[""]),
    p("test", &["-f a.txt", "-d src", "1 -eq 1"]),
    p("pwd", &["", "-P"]),
    p("basename", &["src/lib.rs", "-s .rs src/lib.rs"]),
    p("dirname", &["src/lib.rs"]),
    p("realpath", &["a.txt", "--relative-to=src a.txt"]),
    p("readlink", &["-f a.txt"]),
    p("date", &["", "+%s", "-u", "-d @0"]),
    p("uname", &["-a", "-s"]),
    p("id", &["", "-u"]),
    p("whoami", &[""]),
    p("printenv", &["HOME", ""]),
    p("seq", &["3", "-s, 3", "1 2 5"]),
    p("sleep", &["0"]),
    p("expr", &["1 + 2"]),
    p("rev", &["a.txt"]),
    p("fold", &["-w 3 a.txt"]),
    p("paste", &["a.txt b.txt", "-d, a.txt b.txt"]),
    p("join", &["a.txt b.txt"]),
    p("expand", &["a.txt"]),
    p("nl", &["a.txt"]),
    p("tac", &["a.txt"]),
    p("od", &["-c a.txt", "-An -tx1 a.txt"]),
    p("base64", &["a.txt", "-w 0 a.txt"]),
    p("sha256sum", &["a.txt", "a.txt b.txt"]),
    p("md5sum", &["a.txt"]),
    p("cksum", &["a.txt"]),
    p("comm", &["a.txt b.txt", "-12 a.txt b.txt"]),
    p("diff", &["a.txt b.txt", "-u a.txt b.txt", "-q a.txt a.txt", "-r src src"]),
    p("cmp", &["a.txt b.txt", "-s a.txt a.txt"]),
    p(
        "grep",
        &[
            "-n alpha a.txt",
            "-r alpha .",
            "-c a names.txt",
            "-l alpha a.txt b.txt",
            "-e beta a.txt",
        ],
    ),
    p(
        "find",
        &[
            ". -name '*.txt'",
            ". -type f -print",
            "src -maxdepth 1",
            ". -name a.txt -exec cat {} \\;",
            ". -name '*.md' -exec wc -l {} +",
            ". -fprint out.txt",
            ". -name b.txt -delete",
            ". -newer a.txt -type f",
            ". -path ./.git -prune -o -name '*.rs' -print",
        ],
    ),
    p(
        "sed",
        &[
            "-n 1p a.txt",
            "-n '1,2p' a.txt",
            "'s/a/b/' a.txt",
            "-n '$p' names.txt",
            "-e 's/x/y/g' a.txt",
            "-n 'w out.txt' a.txt",
            "-i 's/a/b/' a.txt",
            "'1e touch pwned' a.txt",
            "-n '/alpha/p' a.txt",
            "'s/.*/echo hi/e' a.txt",
            "-n 's/a/b/w out.txt' a.txt",
            "--quiet 2p a.txt",
        ],
    ),
    p(
        "awk",
        &[
            "'{print $1}' a.txt",
            "'BEGIN{print 1}'",
            "-F, '{print $2}' data.csv",
            "'{print > \"out.txt\"}' a.txt",
            "'BEGIN{system(\"touch pwned\")}'",
            "'$1 > 1' data.csv",
            "'{ print | \"cat\" }' a.txt",
        ],
    ),
    p(
        "git",
        &[
            "status",
            "status -s",
            "log --oneline",
            "log -1 --format=%H",
            "log --output=out.txt",
            "diff",
            "diff --stat HEAD",
            "show --stat",
            "branch",
            "rev-parse HEAD",
            "ls-files",
            "-c core.pager=cat log",
            "grep -n alpha",
            "tag -l",
            "blame a.txt",
            "log -p -1",
            "--no-pager log -1",
            "diff --output=out.txt HEAD",
        ],
    ),
    p(
        "tar",
        &[
            "-tf archive.tar",
            "-cf out.tar a.txt",
            "-xf archive.tar",
            "-czf out.tgz a.txt",
            "--to-command=cat -xf archive.tar",
            "-I gzip -cf out.tgz a.txt",
            "tf archive.tar",
            "-tvf archive.tar",
            "-xOf archive.tar a.txt",
        ],
    ),
    p("gzip", &["-k a.txt", "-c a.txt", "-l archive.tar.gz"]),
    p("touch", &["new.txt", "-c a.txt", "src/new.rs"]),
    p("mkdir", &["-p d/e", "newdir"]),
    p("rmdir", &["emptydir"]),
    p("rm", &["-f a.txt", "-rf src", "b.txt"]),
    p("cp", &["a.txt c.txt", "-r src dst", "a.txt b.txt emptydir", "-t emptydir a.txt"]),
    p("mv", &["a.txt c.txt", "b.txt emptydir/", "-t emptydir a.txt"]),
    p("ln", &["-s a.txt link", "a.txt hard", "-sf a.txt emptydir/l"]),
    p("tee", &["out.txt", "-a a.txt"]),
    p(
        "dd",
        &[
            "if=a.txt of=c.txt status=none",
            "if=a.txt status=none",
            "if=a.txt of=/dev/null status=none",
        ],
    ),
    p("truncate", &["-s 0 a.txt"]),
    p("install", &["a.txt d2", "-D a.txt deep/d3"]),
    p("chmod", &["644 a.txt", "-R u+w src"]),
    p("stat", &["a.txt", "-c %s a.txt"]),
    p("du", &["-sh .", "-a src"]),
    p("df", &["-h ."]),
    p("xargs", &["", "echo", "-n 1 echo", "--max-args 1 echo", "-r cat", "touch"]),
    p("env", &["", "X=1 printenv X", "-- X=1 printenv X", "-u HOME printenv PATH"]),
    p("timeout", &["5 true", "-s KILL 5 cat a.txt", "--signal=TERM 5 ls", "5 touch made.txt"]),
    p("nice", &["-n 1 ls", "--adjustment=1 cat a.txt", "ls", "--adjustment 2 true"]),
    p("stdbuf", &["-o0 cat a.txt", "--output 0 ls", "--output=L true"]),
    p("nohup", &["true", "cat a.txt"]),
    p("setsid", &["-w true", "-w ls"]),
    p("flock", &["lockfile true", "lockfile -c 'cat a.txt'", "-n lockfile ls"]),
    p("python3", &["-c 'print(1)'", "-c 'open(\"py.txt\",\"w\")'"]),
    p("perl", &["-e 'print 1'", "-ne 'print' a.txt"]),
    p(
        "curl",
        &["-s file:///etc/hostname", "-s -o out.txt file:///etc/hostname", "-sS file://$PWD/a.txt"],
    ),
    p("jq", &[". <<< '{}'", "-n 1", "-r .a <<< '{\"a\":1}'"]),
    p("rg", &["alpha", "-n alpha a.txt", "--files", "-l beta", "--pre cat alpha"]),
    p("tree", &["", "-a src", "-o out.txt"]),
    p("file", &["a.txt"]),
    p("column", &["-t data.csv", "-s, -t data.csv"]),
    p("xxd", &["a.txt", "a.txt out.txt"]),
    p("strings", &["a.txt"]),
    p("split", &["-l 1 names.txt part"]),
    p("mktemp", &["-p ."]),
    p("make", &["-v"]),
    p("cargo", &["--version", "-V"]),
    p("npm", &["--version"]),
];

/// Wrappers with every option form, as prefixes.
const WRAPPERS: &[&str] = &[
    "timeout 5 ",
    "timeout -s KILL 5 ",
    "timeout --signal=TERM 5 ",
    "timeout -k 1 5 ",
    "nice ",
    "nice -n 1 ",
    "nice --adjustment=1 ",
    "nice -1 ",
    "env ",
    "env X=1 ",
    "env -- X=1 ",
    "env -u HOME ",
    "env -i PATH=/usr/bin:/bin ",
    "stdbuf -o0 ",
    "stdbuf --output 0 ",
    "stdbuf --output=L ",
    "stdbuf -e 0 ",
    "nohup ",
    "command ",
    "setsid -w ",
    "time ",
    "time -p ",
    "xargs ",
    "xargs -r ",
    "xargs -n 1 ",
    "xargs --max-args 1 ",
    "xargs --max-args=1 ",
    "flock lockfile ",
    "flock -n lockfile ",
    "ionice -c 3 ",
    "ionice --class 3 ",
];

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `count` spellings over `programs`, the same for the same seed.
pub(crate) fn generate(programs: &[&Program], count: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let spelling = statement(&mut rng, programs, 2);
        if !out.contains(&spelling) || rng.chance(5) {
            out.push(spelling);
        }
    }
    out
}

/// One simple command, maybe wrapped, its name maybe quoted.
fn simple(rng: &mut Rng, programs: &[&Program]) -> String {
    let program = *rng.pick(programs);
    let args = *rng.pick(program.args);
    let name = match rng.below(10) {
        0 => format!("'{}'", program.name),
        1 => format!("\"{}\"", program.name),
        2 => format!("\\{}", program.name),
        3 if std::path::Path::new("/usr/bin").join(program.name).is_file() => {
            format!("/usr/bin/{}", program.name)
        }
        _ => program.name.to_string(),
    };
    let command = if args.is_empty() { name } else { format!("{name} {args}") };
    if rng.chance(30) { format!("{}{command}", rng.pick(WRAPPERS)) } else { command }
}

/// A statement of bash's forms, `depth` levels deep at most.
fn statement(rng: &mut Rng, programs: &[&Program], depth: usize) -> String {
    if depth == 0 || rng.chance(30) {
        return simple(rng, programs);
    }
    let a = statement(rng, programs, depth - 1);
    let b = statement(rng, programs, depth - 1);
    let single = !a.contains('\'');
    let plain = !a.contains(['"', '$', '`', '\\', '!']);
    match rng.below(26) {
        0 => format!("{a}; {b}"),
        1 => format!("{a} && {b}"),
        2 => format!("{a} || {b}"),
        3 => format!("{a} | {b}"),
        4 => format!("echo $({a})"),
        5 if !a.contains('`') && plain => format!("echo `{a}`"),
        6 => format!("{{ {a}; }}"),
        7 => format!("({a})"),
        8 => format!("coproc {{ {a}; }}; wait"),
        9 => format!("f() {{ {a}; }}; f"),
        10 => format!("cat <<EOF\nline $({a})\nEOF"),
        11 => format!("cat <<'EOF'\n$({a})\nEOF\n{b}"),
        12 => format!("echo {{x,y}}.txt; {a}"),
        13 => format!("echo $((1 + 2)) && {a}"),
        14 if single => format!("bash -c '{a}'"),
        15 if plain => format!("sh -c \"{a}\""),
        16 => format!("time {a}"),
        17 => format!("time {{ {a}; }}"),
        18 => format!("! {a}"),
        19 => format!("if {a}; then {b}; fi"),
        20 => format!("for i in 1 2; do {a}; done"),
        21 => format!("case x in x) {a};; esac"),
        22 => format!("{a} 2>/dev/null"),
        23 => format!("{a} > out.txt"),
        24 => format!("x=$({a}); echo \"$x\""),
        25 => format!("coproc {a}; wait"),
        _ => format!("{a}; {b}"),
    }
}

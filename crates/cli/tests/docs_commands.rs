//! Every `bloatlab ...` command shown in a code block of README.md or
//! docs/*.md parses: the binary is run with the command's arguments plus
//! `--help` (before any `--`), which clap answers only when everything
//! before it is valid. Lines with `[OPTIONAL]` syntax, continuations and
//! program output (e.g. `bloatlab 0.1.0 test to ...`) are not commands.
use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

/// Shell-like split: whitespace, '...' and "..." quoting.
fn split(s: &str) -> Option<Vec<String>> {
    let (mut out, mut cur, mut q, mut any) = (vec![], String::new(), None::<char>, false);
    for c in s.chars() {
        match (q, c) {
            (Some(x), c) if c == x => q = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                q = Some(c);
                any = true
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false
            }
            (None, c) => cur.push(c),
        }
    }
    if q.is_some() {
        return None;
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Some(out)
}

/// The bloatlab commands in a markdown text's code blocks: (line, arguments).
fn commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = vec![];
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        for part in line.split(';') {
            let part = part.split(" #").next().unwrap().split(" | ").next().unwrap().split(" > ").next().unwrap();
            let part = part.split(" && ").next().unwrap().trim().trim_end_matches('&').trim();
            let part = part.strip_prefix("sudo ").unwrap_or(part);
            let Some(rest) = ["bloatlab ", "./target/release/bloatlab ", "target/release/bloatlab "].iter().find_map(|p| part.strip_prefix(p)) else {
                continue;
            };
            if rest.contains('[') || rest.ends_with('\\') || rest.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            if let Some(args) = split(rest) {
                out.push((i + 1, args));
            }
        }
    }
    out
}

#[test]
fn documented_commands_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<PathBuf> = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs")).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")).collect();
    docs.sort();
    files.extend(docs);
    let (mut checked, mut bad) = (0, vec![]);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, mut args) in commands(&text) {
            match args.iter().position(|a| a == "--") {
                Some(k) => args.insert(k, "--help".into()),
                None => args.push("--help".into()),
            }
            let out = Command::new(EXE).args(&args).current_dir(&root).output().unwrap();
            checked += 1;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                bad.push(format!("{}:{line}: bloatlab {}: {}", f.display(), args.join(" "), err.lines().next().unwrap_or("")));
            }
        }
    }
    eprintln!("{checked} documented commands checked");
    assert!(checked >= 40, "only {checked} commands found: is the extraction broken?");
    assert!(bad.is_empty(), "documented commands that do not parse:\n{}", bad.join("\n"));
}

#[test]
fn extraction() {
    let md = "text bloatlab lab --nope\n```\nsudo bloatlab lab --rate 10mbit -- --scenarios 1u0d   # demo\n\
              bloatlab server --bind 127.0.0.1 &\nbloatlab lab cleanup [--id ID]\nbloatlab 0.1.0 test to x\n\
              bloatlab lab --qdisc \"netem delay 20ms\" ; bloatlab lab list\n```\n";
    let c = commands(md);
    let args: Vec<Vec<&str>> = c.iter().map(|(_, a)| a.iter().map(String::as_str).collect()).collect();
    assert_eq!(
        args,
        vec![
            vec!["lab", "--rate", "10mbit", "--", "--scenarios", "1u0d"],
            vec!["server", "--bind", "127.0.0.1"],
            vec!["lab", "--qdisc", "netem delay 20ms"],
            vec!["lab", "list"],
        ]
    );
    assert_eq!(c[0].0, 3);
}

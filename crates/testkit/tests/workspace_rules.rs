//! Rules of the workspace that the compiler does not check by itself:
//! `unsafe` lives only in crates/host. Every other crate forbids it at its
//! root, and no integration test, benchmark or example (separate crates the
//! attribute does not reach) writes an `unsafe` block, function or impl.
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn unsafe_code_only_in_crates_host() {
    let mut roots = 0;
    let mut files = vec![];
    for e in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "host" || !e.path().join("Cargo.toml").exists() {
            continue;
        }
        for root in ["src/lib.rs", "src/main.rs"] {
            let p = e.path().join(root);
            if let Ok(text) = std::fs::read_to_string(&p) {
                roots += 1;
                assert!(text.contains("#![forbid(unsafe_code)]"), "crates/{name}/{root} does not forbid unsafe code (only crates/host may use it)");
            }
        }
        for d in ["src", "tests", "benches", "examples"] {
            rust_files(&e.path().join(d), &mut files);
        }
    }
    assert!(roots >= 15, "found only {roots} crate roots under {}", crates_dir().display());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // (spelled apart so that this line is not one of them)
            for bad in [concat!("unsafe", " {"), concat!("unsafe", " fn "), concat!("unsafe", " impl "), concat!("unsafe", " extern")] {
                assert!(!code.contains(bad), "{}:{}: `{bad}` outside crates/host: {line}", f.display(), n + 1);
            }
        }
    }
}

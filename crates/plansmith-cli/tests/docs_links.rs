//! Every relative link in the repository's Markdown resolves: the file exists and, when the
//! link names an anchor in a Markdown file, that file has a heading with that anchor. The
//! README and docs/ are what users read first; a dead link there is a bug.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Markdown files users read: the top level, docs/, bench/, results/ and each crate's README.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                // Build outputs, downloaded assets and VCS data are not ours to check.
                if !matches!(
                    name.as_str(),
                    "target" | "assets" | ".git" | "node_modules" | ".venv"
                ) {
                    stack.push(path);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `(target, line)` of every inline link `[text](target)` and image outside code blocks.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((after[..end].trim().to_string(), n + 1));
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
fn anchors(text: &str) -> HashSet<String> {
    let mut in_code = false;
    let mut out = HashSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim().to_lowercase();
        let slug: String = title
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")) && files.len() > 10,
        "expected the README and the docs under {}",
        root.display()
    );
    let mut dead = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (target, line) in links(&text) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let target = target.trim_start_matches('<').trim_end_matches('>');
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            checked += 1;
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            if !resolved.exists() {
                dead.push(format!("{rel}:{line}: {target} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                if resolved.extension().is_some_and(|e| e == "md") {
                    let heads = anchors(&fs::read_to_string(&resolved).unwrap());
                    if !heads.contains(anchor) {
                        dead.push(format!("{rel}:{line}: {target} (no heading #{anchor})"));
                    }
                }
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} relative links found: is the link scanner broken?"
    );
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let text = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n <= 200,
        "README.md has {n} lines; measurements go in docs/results, history in docs/experiments"
    );
}

#[test]
fn the_link_scanner_finds_links_and_anchors() {
    let text =
        "# A title, here\n[a](x.md) and ![b](y/z.svg)\n```\n[no](skip.md)\n```\n## Second-part\n";
    let found: Vec<String> = links(text).into_iter().map(|(t, _)| t).collect();
    assert_eq!(found, ["x.md", "y/z.svg"]);
    let heads = anchors(text);
    assert!(
        heads.contains("a-title-here") && heads.contains("second-part"),
        "{heads:?}"
    );
}

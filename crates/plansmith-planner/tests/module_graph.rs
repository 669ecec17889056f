//! The planner crate's modules form no cycle: each module may use the ones below it in the
//! data flow and never the other way round (the backend seam knows no backend, settings know
//! no planner). A cycle is reported with the modules in it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Module -> the crate modules its code names (`crate::m::...`, or a name re-exported by
/// lib.rs), read from the source with comments left out.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    // `pub use module::{A, B};` / `pub use module::A;` in lib.rs: a re-exported name's home.
    let mut home: HashMap<String, String> = HashMap::new();
    for line in lib.lines().filter(|l| l.starts_with("pub use ")) {
        let rest = line.trim_start_matches("pub use ").trim_end_matches(';');
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            home.insert(name.trim().to_string(), module.to_string());
        }
    }
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let module = path.file_stem().unwrap().to_string_lossy().to_string();
        if module == "lib" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut deps = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap();
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                // `crate::{a, b::C}` or `crate::name`
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    group.split('}').next().unwrap().split(',').collect()
                } else {
                    vec![rest]
                };
                for name in names {
                    let first: String = name
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let dep = match first.chars().next() {
                        Some(c) if c.is_uppercase() => home.get(&first).cloned(),
                        Some(_) => Some(first.clone()),
                        None => None,
                    };
                    if let Some(dep) =
                        dep.filter(|d| *d != module && src.join(format!("{d}.rs")).exists())
                    {
                        deps.insert(dep);
                    }
                }
            }
        }
        graph.insert(module, deps);
    }
    graph
}

/// One cycle through the graph, if any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut HashMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for dep in graph.get(node).into_iter().flatten() {
            match state.get(dep.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|m| m == dep).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(dep.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(dep, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = HashMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn the_planner_crate_has_no_module_cycle() {
    let graph = module_graph();
    // The seams this test exists for are where they should be.
    assert!(
        graph["llama"].contains("backend") && graph["tiny"].contains("backend"),
        "{graph:?}"
    );
    assert!(graph["planner"].contains("backend"), "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}\n{graph:#?}", cycle.join(" -> "));
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(find_cycle(&g(&[("a", "b"), ("b", "c")])), None);
    assert_eq!(
        find_cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).unwrap(),
        ["a", "b", "c", "a"]
    );
}

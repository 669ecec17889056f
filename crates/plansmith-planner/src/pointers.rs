//! Tool pointers: a planner that names the tool it calls by its place in the prompt's
//! catalog (`t3`) instead of spelling the tool's name.
//!
//! A tiny planner that spells names copies a new tool's name badly when the name's first
//! sub-word piece never started a tool name in training (README, "Why `wait` gets nothing").
//! With pointers every tool is named by a handful of pieces (`t0` .. `t15`) that every training
//! example uses, in a catalog shuffled per example, so choosing a tool is matching the request
//! against the listed signatures, whatever the new tool is called. The grammar and validator
//! see the catalog with names replaced by pointers; plans leave with the real names.

use plansmith_core::{Catalog, Plan};

/// The pointer of the tool at `index` in the prompt's catalog.
pub fn pointer(index: usize) -> String {
    format!("t{index}")
}

/// The catalog as the grammar sees it: each tool named by its pointer, schemas unchanged.
pub fn pointer_catalog(catalog: &Catalog) -> Catalog {
    let mut aliased = catalog.clone();
    for (i, tool) in aliased.tools.iter_mut().enumerate() {
        tool.name = pointer(i);
    }
    aliased
}

/// `tools: t0=open(target) t1=set(target, value)`: the signatures line, each tool behind its
/// pointer.
pub fn signatures_line(catalog: &Catalog) -> String {
    let mut line = String::from("tools:");
    for (i, tool) in catalog.tools.iter().enumerate() {
        line.push_str(&format!(" {}={}", pointer(i), tool.signature()));
    }
    line
}

/// `plan` with each real tool name replaced by its pointer in `catalog` (names not in the
/// catalog are kept: validation reports them).
pub fn to_pointers(plan: &Plan, catalog: &Catalog) -> Plan {
    let mut out = plan.clone();
    for call in &mut out.calls {
        if let Some(i) = catalog.tools.iter().position(|t| t.name == call.name) {
            call.name = pointer(i);
        }
    }
    out
}

/// `plan` with each pointer replaced by the real name of the tool it points at in `catalog`.
pub fn from_pointers(mut plan: Plan, catalog: &Catalog) -> Plan {
    for call in &mut plan.calls {
        if let Some(tool) = index_of(&call.name).and_then(|i| catalog.tools.get(i)) {
            call.name = tool.name.clone();
        }
    }
    plan
}

fn index_of(name: &str) -> Option<usize> {
    let digits = name.strip_prefix('t')?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    digits.parse().ok()
}

/// The catalog in an order drawn from `seed` (Fisher-Yates over a splitmix64 stream): a
/// training example's catalog, so no pointer comes to mean one tool.
pub fn shuffled(catalog: &Catalog, seed: u64) -> Catalog {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    };
    let mut out = catalog.clone();
    for i in (1..out.tools.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        out.tools.swap(i, j);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use plansmith_core::Call;
    use serde_json::json;

    fn catalog() -> Catalog {
        Catalog::from_value(&json!([
            {"name": "open", "parameters": {"type": "object",
                "properties": {"target": {"type": "string"}}, "required": ["target"]}},
            {"name": "wait", "parameters": {"type": "object",
                "properties": {"condition": {"type": "string"},
                               "timeout_seconds": {"type": "integer"}},
                "required": ["condition"]}},
        ]))
        .unwrap()
    }

    #[test]
    fn the_prompt_lists_each_signature_behind_its_pointer() {
        assert_eq!(
            signatures_line(&catalog()),
            "tools: t0=open(target) t1=wait(condition, timeout_seconds?)"
        );
        let aliased = pointer_catalog(&catalog());
        assert_eq!(aliased.names().collect::<Vec<_>>(), ["t0", "t1"]);
        assert_eq!(aliased.tools[1].parameters, catalog().tools[1].parameters);
    }

    #[test]
    fn plans_round_trip_through_pointers() {
        let plan = Plan::new(vec![
            Call::new("wait", Default::default()),
            Call::new("open", Default::default()),
            Call::new("unknown", Default::default()),
        ]);
        let pointed = to_pointers(&plan, &catalog());
        let names: Vec<_> = pointed.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["t1", "t0", "unknown"]);
        assert_eq!(from_pointers(pointed, &catalog()), plan);
        // Not pointers, or pointing past the catalog: kept for the validator to name.
        for name in ["t2", "t01", "t", "tx", "open"] {
            let p = Plan::new(vec![Call::new(name, Default::default())]);
            assert_eq!(from_pointers(p.clone(), &catalog()).calls[0].name, name);
        }
    }

    #[test]
    fn shuffles_are_permutations_fixed_by_the_seed() {
        let many = Catalog::from_value(&json!((0..12)
            .map(|i| json!({"name": format!("tool{i}"), "parameters": {"type": "object"}}))
            .collect::<Vec<_>>()))
        .unwrap();
        let a = shuffled(&many, 7);
        assert_eq!(a, shuffled(&many, 7));
        assert_ne!(
            a.names().collect::<Vec<_>>(),
            many.names().collect::<Vec<_>>()
        );
        let mut names: Vec<_> = a.names().map(String::from).collect();
        names.sort();
        let mut want: Vec<_> = many.names().map(String::from).collect();
        want.sort();
        assert_eq!(names, want);
        let firsts: std::collections::HashSet<_> = (0..64)
            .map(|s| shuffled(&many, s).tools[0].name.clone())
            .collect();
        assert!(firsts.len() > 6, "first tools over 64 seeds: {firsts:?}");
    }

    proptest::proptest! {
        #[test]
        fn pointers_round_trip_any_plan(
            n in 1usize..40,
            picks in proptest::collection::vec(0usize..64, 0..6),
            stray in "[a-z0-9_]{1,6}",
        ) {
            let many = Catalog::from_value(&json!((0..n)
                .map(|i| json!({"name": format!("tool_{i}"), "parameters": {"type": "object"}}))
                .collect::<Vec<_>>()))
            .unwrap();
            let mut calls: Vec<Call> = picks
                .iter()
                .map(|&i| Call::new(format!("tool_{}", i % n), Default::default()))
                .collect();
            let pointed = to_pointers(&Plan::new(calls.clone()), &many);
            for (call, &i) in pointed.calls.iter().zip(&picks) {
                proptest::prop_assert_eq!(&call.name, &pointer(i % n));
            }
            proptest::prop_assert_eq!(from_pointers(pointed, &many), Plan::new(calls.clone()));
            // Any other name comes back as it went in, or as the tool it points at.
            calls.push(Call::new(stray.clone(), Default::default()));
            let back = from_pointers(Plan::new(calls), &many);
            let last = &back.calls.last().unwrap().name;
            proptest::prop_assert!(last == &stray || many.get(last).is_some());
        }
    }
}

//! The hand-written evaluation sets (`eval/handwritten/`) load with the BFCL loader, have the
//! sizes the generalist and realism issues ask for, and their new tools are new: no data
//! generator of this project makes a tool of that name.

use std::collections::BTreeSet;
use std::path::PathBuf;

use plansmith_eval::{load_category, CheckMode, Expected};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../eval/handwritten")
}

#[test]
fn the_handwritten_sets_load_and_have_their_sizes() {
    let pace = load_category(&dir(), "handwritten_pace").unwrap();
    assert!(pace.len() >= 150, "{}", pace.len());
    assert!(pace.iter().all(|i| i.functions.len() == 10));
    let none = load_category(&dir(), "handwritten_pace_irrelevance").unwrap();
    assert!(none.len() >= 30 && none.iter().all(|i| i.expected == Expected::NoCall));
    let clarify = load_category(&dir(), "handwritten_clarify").unwrap();
    assert!(clarify.len() >= 30);
    assert!(clarify
        .iter()
        .all(|i| i.gold().iter().all(|g| g.name == "clarify")));
    let new = load_category(&dir(), "handwritten_new_tools").unwrap();
    assert!(new.len() >= 100, "{}", new.len());
    let tools: BTreeSet<&str> = new.iter().map(|i| i.gold()[0].name.as_str()).collect();
    assert!(tools.len() >= 20, "{tools:?}");
    for item in &new {
        // the Pace catalog, the new tool and a distractor
        assert_eq!(item.functions.len(), 12, "{}", item.id);
        assert_eq!(item.mode, CheckMode::Multiple, "{}", item.id);
    }
}

#[test]
fn the_new_tools_are_in_no_generator() {
    let new = load_category(&dir(), "handwritten_new_tools").unwrap();
    let tools: BTreeSet<String> = new.iter().map(|i| i.gold()[0].name.clone()).collect();
    let mut generated: BTreeSet<String> = plansmith_data::pace_catalog()
        .names()
        .map(String::from)
        .collect();
    for family in plansmith_data::families() {
        generated.extend(family.catalog().names().map(String::from));
    }
    for extra in ["translate", "water"] {
        generated.insert(extra.into()); // examples/pace/tools-plus-two.json
    }
    // invented tools are one real or made-up word; ours are all snake_case phrases
    assert!(tools.iter().all(|t| t.contains('_')), "{tools:?}");
    let clash: Vec<_> = tools.intersection(&generated).collect();
    assert!(clash.is_empty(), "tools a generator also makes: {clash:?}");
}

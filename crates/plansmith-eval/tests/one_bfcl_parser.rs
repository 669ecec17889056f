//! One BFCL type map and one gold parser serve the whole workspace. Before, catalog import
//! (plansmith-core / plansmith-data) and evaluation (plansmith-eval) each had their own and
//! they disagreed (`int`, `str`, `ArrayList` accepted by one, `null` by the other). On the
//! real BFCL v4 files, both call sites must now read every function doc and every gold call
//! the same way. Needs `scripts/assets.sh`.

use std::collections::BTreeSet;
use std::path::Path;

use plansmith_core::bfcl::GoldCall;
use plansmith_core::schema::from_bfcl;
use plansmith_eval::bfcl_schema::function_parameters_schema;
use plansmith_eval::data::bfcl_dir;
use serde_json::Value;

const CATEGORIES: [&str; 11] = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
];

fn bfcl() -> std::path::PathBuf {
    bfcl_dir().unwrap_or_else(|e| panic!("{e}: run `bash scripts/assets.sh` to fetch BFCL v4"))
}

fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// Every `type` in a schema with the path where it occurs.
fn types(v: &Value, path: &str, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, sub) in m {
                if k == "type" {
                    out.insert((path.to_string(), sub.to_string()));
                } else {
                    types(sub, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, sub) in items.iter().enumerate() {
                types(sub, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn catalog_import_and_evaluation_map_every_bfcl_type_the_same_way() {
    let dir = bfcl();
    let (mut compared, mut mismatches) = (0, Vec::new());
    for category in CATEGORIES {
        for rec in records(&dir.join(format!("BFCL_v4_{category}.json"))) {
            for doc in rec["function"].as_array().into_iter().flatten() {
                let params = doc.get("parameters").cloned().unwrap_or(Value::Null);
                let core = from_bfcl(&params, "p");
                let eval = function_parameters_schema(doc);
                let name = doc["name"].as_str().unwrap_or("?");
                match (core, eval) {
                    (Ok(a), Ok(b)) => {
                        let (mut ta, mut tb) = (BTreeSet::new(), BTreeSet::new());
                        types(&a, "", &mut ta);
                        types(&b, "", &mut tb);
                        if ta != tb {
                            mismatches.push(format!("{category} {name}: {ta:?} vs {tb:?}"));
                        }
                        compared += 1;
                    }
                    (Err(a), Ok(_)) => mismatches.push(format!(
                        "{category} {name}: only catalog import refuses: {a}"
                    )),
                    (Ok(_), Err(b)) => {
                        mismatches.push(format!("{category} {name}: only evaluation refuses: {b}"))
                    }
                    (Err(_), Err(_)) => {}
                }
            }
        }
    }
    assert!(compared > 2000, "only {compared} function docs compared");
    assert!(
        mismatches.is_empty(),
        "{} disagreements, e.g.:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
}

#[test]
fn data_import_and_evaluation_read_every_gold_call_the_same_way() {
    let dir = bfcl();
    let mut compared = 0;
    // Java and JavaScript items are refused by the evaluation loader (no string converters yet).
    for category in CATEGORIES
        .iter()
        .filter(|c| !c.contains("irrelevance") && !c.contains("java"))
    {
        let items = plansmith_eval::load_category(&dir, category).unwrap();
        let answers = records(
            &dir.join("possible_answer")
                .join(format!("BFCL_v4_{category}.json")),
        );
        for (item, answer) in items.iter().zip(&answers) {
            assert_eq!(
                answer["id"],
                Value::String(item.id.clone()),
                "{category}: answers out of order"
            );
            // What `data import --format bfcl` makes a training trace of ...
            // (a few live items list no accepted value for a nested key: both must refuse them)
            let imported = plansmith_data::import::bfcl_expected_calls(&answer["ground_truth"])
                .map_err(|e| e.to_string());
            // ... and what evaluation checks outputs against, resolved the same way.
            let evaluated: Result<Vec<_>, String> = item
                .gold()
                .iter()
                .map(|g| g.first_accepted().map_err(|e| format!("ground_truth: {e}")))
                .collect();
            assert_eq!(imported, evaluated, "{category} {}", item.id);
            let reparsed = GoldCall::parse_list(&answer["ground_truth"]).unwrap();
            assert_eq!(reparsed, item.gold(), "{category} {}", item.id);
            compared += 1;
        }
    }
    assert!(compared > 1500, "only {compared} gold answers compared");
}

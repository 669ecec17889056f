//! Agreement with BFCL's own checker.
//!
//! Builds model outputs from the real BFCL v4 data (correct answers from the possible answers,
//! and many kinds of subtly wrong ones), scores them with our checker and with BFCL's
//! `ast_checker.py` from the unpacked `bfcl-eval` wheel (through
//! `scripts/bfcl_crosscheck.py`), and requires identical verdicts and error types.
//!
//! Needs `scripts/assets.sh` to have run, and python3.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use plansmith_eval::data::assets_dir;
use plansmith_eval::{check_item, load_category, BfclCall, BfclItem, CheckMode, CheckOptions};
use serde_json::{json, Map, Value};

const AST_CATEGORIES: [&str; 8] = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
];
const RELEVANCE_CATEGORIES: [&str; 2] = ["irrelevance", "live_relevance"];
const REQUIRED: [&str; 4] = ["simple_python", "multiple", "parallel", "parallel_multiple"];

struct Case {
    id: String,
    kind: &'static str,
    item: usize,
    calls: Vec<BfclCall>,
    opts: CheckOptions,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// splitmix64: a deterministic choice per (item, kind).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn seed(id: &str, kind: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in id.bytes().chain(kind.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3);
    }
    mix(h)
}

fn is_empty_str(v: &Value) -> bool {
    v.as_str() == Some("")
}

#[derive(Clone, Copy)]
enum Pick {
    First,
    Last,
    Minimal,
}

/// A model value for an accepted gold value: dict answers hold, per key, lists of accepted
/// values (one level deep), so a model's dict takes one of them per key.
fn model_value(accepted: &Value, ty: Option<&str>, pick: Pick) -> Value {
    let unwrap_dict = |m: &Map<String, Value>| {
        let mut out = Map::new();
        for (k, acc) in m {
            let Some(acc) = acc.as_array() else {
                out.insert(k.clone(), acc.clone());
                continue;
            };
            let non_empty: Vec<&Value> = acc.iter().filter(|v| !is_empty_str(v)).collect();
            let chosen = match pick {
                Pick::Last => non_empty.last(),
                Pick::Minimal if non_empty.len() < acc.len() => None,
                _ => non_empty.first(),
            };
            if let Some(v) = chosen {
                out.insert(k.clone(), (*v).clone());
            }
        }
        Value::Object(out)
    };
    match (ty, accepted) {
        (Some("dict"), Value::Object(m)) => unwrap_dict(m),
        (Some("array"), Value::Array(a)) if a.iter().all(Value::is_object) => Value::Array(
            a.iter()
                .map(|e| unwrap_dict(e.as_object().expect("checked")))
                .collect(),
        ),
        _ => accepted.clone(),
    }
}

fn base_calls(item: &BfclItem, pick: Pick) -> Vec<BfclCall> {
    item.gold()
        .iter()
        .map(|g| {
            let doc = doc_for(item, &g.name);
            let mut args = Map::new();
            for (p, acc) in &g.params {
                let acc = acc.as_array().expect("loader checked lists");
                let non_empty: Vec<&Value> = acc.iter().filter(|v| !is_empty_str(v)).collect();
                let optional = non_empty.len() < acc.len();
                let chosen = match pick {
                    Pick::First => non_empty.first(),
                    Pick::Last => non_empty.last(),
                    Pick::Minimal if optional => None,
                    Pick::Minimal => non_empty.first(),
                };
                if let Some(v) = chosen {
                    args.insert(
                        p.clone(),
                        model_value(v, param_type(doc, p).as_deref(), pick),
                    );
                }
            }
            BfclCall::new(g.name.clone(), args)
        })
        .collect()
}

fn doc_for<'a>(item: &'a BfclItem, name: &str) -> Option<&'a Value> {
    if item.mode == CheckMode::Simple {
        return item.functions.first();
    }
    item.functions
        .iter()
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name))
}

fn param_type(doc: Option<&Value>, p: &str) -> Option<String> {
    doc?.get("parameters")?
        .get("properties")?
        .get(p)?
        .get("type")?
        .as_str()
        .map(str::to_string)
}

fn required(doc: Option<&Value>) -> Vec<String> {
    doc.and_then(|d| d.get("parameters")?.get("required")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Applies `f` to one argument (chosen by `s` among those `pred` accepts) of one call.
fn mutate_arg(
    item: &BfclItem,
    base: &[BfclCall],
    s: u64,
    pred: impl Fn(&str, Option<&str>, &Value) -> bool,
    f: impl Fn(&Value) -> Option<Value>,
) -> Option<Vec<BfclCall>> {
    let n = base.len();
    for off in 0..n {
        let ci = (s as usize + off) % n.max(1);
        let call = &base[ci];
        let doc = doc_for(item, &call.name);
        let cands: Vec<&String> = call
            .args
            .iter()
            .filter(|(p, v)| pred(p, param_type(doc, p).as_deref(), v))
            .map(|(p, _)| p)
            .collect();
        if cands.is_empty() {
            continue;
        }
        let p = cands[(mix(s) as usize) % cands.len()].clone();
        let new = f(&call.args[&p])?;
        let mut out = base.to_vec();
        out[ci].args.insert(p, new);
        return Some(out);
    }
    None
}

fn any_arg(_: &str, _: Option<&str>, _: &Value) -> bool {
    true
}

fn wrong_value(v: &Value) -> Option<Value> {
    Some(match v {
        Value::String(s) => Value::String(format!("{s}s")),
        Value::Number(n) if n.is_f64() => json!(n.as_f64()? + 1.5),
        Value::Number(n) => json!(n.as_i64()? + 1),
        Value::Bool(b) => json!(!b),
        Value::Array(a) if a.is_empty() => json!(["extra"]),
        Value::Array(a) => Value::Array(a[..a.len() - 1].to_vec()),
        Value::Object(m) => {
            let mut m = m.clone();
            let k = m.keys().next()?.clone();
            let nv = wrong_value(&m[&k])?;
            m.insert(k, nv);
            Value::Object(m)
        }
        Value::Null => json!("none"),
    })
}

fn wrong_type(v: &Value) -> Option<Value> {
    Some(match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::String(_) => json!(42),
        Value::Bool(b) => Value::String(if *b { "True" } else { "False" }.into()),
        Value::Array(_) | Value::Object(_) => Value::String(v.to_string()),
        Value::Null => json!(0),
    })
}

fn case_punct(v: &Value) -> Option<Value> {
    let s = v.as_str()?;
    if s.is_empty() {
        return None;
    }
    Some(Value::String(
        s.to_uppercase().replace(' ', "_").replace(", ", ",") + ".",
    ))
}

fn build_cases(items: &[BfclItem]) -> Vec<Case> {
    let mut cases = Vec::new();
    let def = CheckOptions::default();
    for (ix, item) in items.iter().enumerate() {
        let mut push = |kind: &'static str, calls: Option<Vec<BfclCall>>, opts: CheckOptions| {
            if let Some(calls) = calls {
                cases.push(Case {
                    id: format!("{}#{kind}", item.id),
                    kind,
                    item: ix,
                    calls,
                    opts,
                });
            }
        };
        match item.mode {
            CheckMode::NoCall | CheckMode::AnyCall => {
                push("no_call", Some(vec![]), def);
                if let Some(f) = item.functions.first() {
                    let name = f["name"].as_str().unwrap_or("f").to_string();
                    push(
                        "some_call",
                        Some(vec![BfclCall::new(name, Map::new())]),
                        def,
                    );
                }
                continue;
            }
            _ => {}
        }
        let base = base_calls(item, Pick::First);
        let s = |k: &str| seed(&item.id, k);
        push("correct_first", Some(base.clone()), def);
        push("correct_last", Some(base_calls(item, Pick::Last)), def);
        push(
            "correct_minimal",
            Some(base_calls(item, Pick::Minimal)),
            def,
        );
        push("no_call", Some(vec![]), def);
        push(
            "wrong_value",
            mutate_arg(item, &base, s("wv"), any_arg, wrong_value),
            def,
        );
        push(
            "wrong_type",
            mutate_arg(item, &base, s("wt"), any_arg, wrong_type),
            def,
        );
        push(
            "null_value",
            mutate_arg(
                item,
                &base,
                s("nv"),
                |_, _, v| !v.is_null(),
                |_| Some(Value::Null),
            ),
            def,
        );
        push(
            "string_case_punct",
            mutate_arg(item, &base, s("cp"), |_, _, v| v.is_string(), case_punct),
            def,
        );
        push(
            "int_for_float",
            mutate_arg(
                item,
                &base,
                s("if"),
                |_, t, v| t == Some("float") && v.is_f64(),
                |v| Some(json!(v.as_f64()?.trunc() as i64)),
            ),
            def,
        );
        push(
            "float_for_int",
            mutate_arg(
                item,
                &base,
                s("fi"),
                |_, t, v| t == Some("integer") && v.is_i64(),
                |v| Some(json!(v.as_i64()? as f64)),
            ),
            def,
        );
        push(
            "bool_for_int",
            mutate_arg(
                item,
                &base,
                s("bi"),
                |_, t, v| t == Some("integer") && v.is_i64(),
                |v| Some(json!(v.as_i64()? != 0)),
            ),
            def,
        );
        push(
            "int_for_bool",
            mutate_arg(
                item,
                &base,
                s("ib"),
                |_, t, v| t == Some("boolean") && v.is_boolean(),
                |v| Some(json!(i64::from(v.as_bool()?))),
            ),
            def,
        );
        push(
            "list_reversed",
            mutate_arg(
                item,
                &base,
                s("lr"),
                |_, _, v| v.as_array().is_some_and(|a| a.len() >= 2),
                |v| {
                    let mut a = v.as_array()?.clone();
                    a.reverse();
                    Some(Value::Array(a))
                },
            ),
            def,
        );
        push(
            "list_items_wrong_type",
            mutate_arg(
                item,
                &base,
                s("lt"),
                |_, _, v| v.as_array().is_some_and(|a| !a.is_empty()),
                |v| {
                    Some(Value::Array(
                        v.as_array()?
                            .iter()
                            .map(|e| {
                                if e.is_string() {
                                    json!(7)
                                } else {
                                    Value::String(e.to_string())
                                }
                            })
                            .collect(),
                    ))
                },
            ),
            def,
        );
        push(
            "int_list_as_floats",
            mutate_arg(
                item,
                &base,
                s("lf"),
                |_, _, v| {
                    v.as_array()
                        .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_i64))
                },
                |v| {
                    Some(Value::Array(
                        v.as_array()?
                            .iter()
                            .map(|e| json!(e.as_i64().unwrap_or(0) as f64))
                            .collect(),
                    ))
                },
            ),
            def,
        );
        push(
            "dict_extra_key",
            mutate_arg(
                item,
                &base,
                s("dk"),
                |_, _, v| v.is_object(),
                |v| {
                    let mut m = v.as_object()?.clone();
                    m.insert("plansmith_extra".into(), json!(1));
                    Some(Value::Object(m))
                },
            ),
            def,
        );
        push(
            "dict_missing_key",
            mutate_arg(
                item,
                &base,
                s("dm"),
                |_, _, v| v.as_object().is_some_and(|m| !m.is_empty()),
                |v| {
                    let mut m = v.as_object()?.clone();
                    let k = m.keys().next()?.clone();
                    m.shift_remove(&k);
                    Some(Value::Object(m))
                },
            ),
            def,
        );
        push(
            "dict_value_case_punct",
            mutate_arg(
                item,
                &base,
                s("dc"),
                |_, _, v| {
                    v.as_object()
                        .is_some_and(|m| m.values().any(Value::is_string))
                },
                |v| {
                    let mut m = v.as_object()?.clone();
                    let k = m.iter().find(|(_, x)| x.is_string())?.0.clone();
                    let nv = case_punct(&m[&k])?;
                    m.insert(k, nv);
                    Some(Value::Object(m))
                },
            ),
            def,
        );
        push(
            "list_of_dicts_value_changed",
            mutate_arg(
                item,
                &base,
                s("ld"),
                |_, _, v| {
                    v.as_array()
                        .is_some_and(|a| a.first().is_some_and(Value::is_object))
                },
                |v| {
                    let mut a = v.as_array()?.clone();
                    a[0] = wrong_value(&a[0])?;
                    Some(Value::Array(a))
                },
            ),
            def,
        );
        push(
            "quotes_swapped",
            mutate_arg(
                item,
                &base,
                s("qs"),
                |_, _, v| {
                    v.as_str()
                        .is_some_and(|s| s.contains('"') || s.contains('\''))
                },
                |v| Some(Value::String(v.as_str()?.replace('"', "'"))),
            ),
            def,
        );
        push(
            "empty_string",
            mutate_arg(
                item,
                &base,
                s("es"),
                |_, t, _| t == Some("string"),
                |_| Some(json!("")),
            ),
            def,
        );

        // Parameter-set mutations on one call.
        let ci = (s("call") as usize) % base.len().max(1);
        if let Some(call) = base.get(ci) {
            let doc = doc_for(item, &call.name);
            let mut c = base.clone();
            c[ci].args.insert("plansmith_extra".into(), json!(1));
            push("extra_param", Some(c), def);
            if let Some(props) = doc.and_then(|d| d["parameters"]["properties"].as_object()) {
                let gold_params = &item.gold()[ci].params;
                if let Some(p) = props.keys().find(|p| !gold_params.contains_key(*p)) {
                    let mut c = base.clone();
                    c[ci].args.insert(p.clone(), json!("x"));
                    push("doc_param_not_in_answer", Some(c), def);
                }
                let req = required(doc);
                if let Some(p) = req.iter().find(|p| call.args.contains_key(*p)) {
                    let mut c = base.clone();
                    c[ci].args.shift_remove(p);
                    push("missing_required", Some(c), def);
                }
                if let Some(p) = call.args.keys().find(|p| !req.contains(p)) {
                    let mut c = base.clone();
                    c[ci].args.shift_remove(p);
                    push("missing_optional", Some(c), def);
                }
            }
            let mut c = base.clone();
            c[ci].name.push_str("_v2");
            push("wrong_name", Some(c), def);
            if call.name.contains('.') {
                let mut c = base.clone();
                c[ci].name = call.name.replace('.', "_");
                push("dots_as_underscores", Some(c.clone()), def);
                push(
                    "dots_as_underscores_opt",
                    Some(c),
                    CheckOptions {
                        underscore_to_dot: true,
                    },
                );
            }
            if let Some(other) = item
                .functions
                .iter()
                .filter_map(|f| f["name"].as_str())
                .find(|n| *n != call.name)
            {
                let mut c = base.clone();
                c[ci].name = other.to_string();
                push("other_function", Some(c), def);
            }
        }
        let mut c = base.clone();
        c.push(base[0].clone());
        push("extra_call", Some(c), def);
        if base.len() > 1 {
            let mut c = base.clone();
            c.reverse();
            push("reordered_reversed", Some(c), def);
            let mut c = base.clone();
            c.rotate_left(1);
            push("reordered_rotated", Some(c), def);
            push("missing_call", Some(base[..base.len() - 1].to_vec()), def);
            // Swap one differing value between two calls of the same function.
            if base[0].name == base[1].name {
                let p = base[0]
                    .args
                    .iter()
                    .find(|(p, v)| base[1].args.get(*p).is_some_and(|w| w != *v))
                    .map(|(p, _)| p.clone());
                if let Some(p) = p {
                    let mut c = base.clone();
                    let a = c[0].args[&p].clone();
                    let b = c[1].args[&p].clone();
                    c[0].args.insert(p.clone(), b);
                    c[1].args.insert(p, a);
                    push("swapped_values", Some(c), def);
                }
            }
        }
    }
    cases
}

#[test]
fn agrees_with_bfcl_ast_checker() {
    let assets = assets_dir();
    let bfcl = assets.join("bfcl");
    let pkg = assets.join("bfcl-eval");
    assert!(
        bfcl.join("BFCL_v4_simple_python.json").is_file()
            && pkg
                .join("bfcl_eval/eval_checker/ast_eval/ast_checker.py")
                .is_file(),
        "BFCL assets missing under {}: run scripts/assets.sh",
        assets.display()
    );

    let mut items = Vec::new();
    for c in AST_CATEGORIES.iter().chain(&RELEVANCE_CATEGORIES) {
        items.extend(load_category(&bfcl, c).unwrap_or_else(|e| panic!("loading {c}: {e}")));
    }
    let cases = build_cases(&items);

    let dir = std::env::temp_dir().join(format!("plansmith-bfcl-agreement-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases_path = dir.join("cases.jsonl");
    let mut text = String::new();
    for c in &cases {
        let item = &items[c.item];
        let possible: Option<Vec<Value>> = match item.mode {
            CheckMode::NoCall | CheckMode::AnyCall => None,
            _ => Some(item.gold().iter().map(|g| g.to_bfcl()).collect()),
        };
        let line = json!({
            "case": c.id,
            "category": item.category,
            "function": item.functions,
            "model_output": BfclCall::list_to_bfcl(&c.calls),
            "possible_answer": possible,
            "underscore_to_dot": c.opts.underscore_to_dot,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(&cases_path, text).unwrap();

    let script = repo_root().join("scripts/bfcl_crosscheck.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&cases_path)
        .env("PYTHONPATH", &pkg)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 must be installed to run BFCL's checker");
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let theirs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("verdict line"))
        .collect();
    assert_eq!(theirs.len(), cases.len(), "one verdict per case");

    // (category -> (n, valid, invalid)), (kind -> (n, valid, invalid))
    let mut by_cat: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut by_kind: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut verdict_mismatch = Vec::new();
    let mut type_mismatch = Vec::new();
    for (c, t) in cases.iter().zip(&theirs) {
        assert_eq!(t["case"], c.id.as_str());
        let item = &items[c.item];
        let ours = check_item(item, Some(&c.calls), &c.opts);
        let their_valid = t["valid"].as_bool().unwrap();
        let their_type = t["error_type"].as_str();
        if let Some(e) = their_type.filter(|e| e.starts_with("python_exception")) {
            panic!("BFCL's checker raised on {}: {e}", c.id);
        }
        if ours.valid != their_valid {
            verdict_mismatch.push(format!(
                "{}: ours {} ({}), BFCL {} ({:?}); output {}",
                c.id,
                ours.valid,
                ours.reason(),
                their_valid,
                their_type,
                BfclCall::list_to_bfcl(&c.calls)
            ));
        } else if !ours.valid && ours.error_type.as_deref() != their_type {
            type_mismatch.push(format!(
                "{}: ours {:?}, BFCL {:?}",
                c.id, ours.error_type, their_type
            ));
        }
        for e in [
            by_cat.entry(item.category.clone()).or_default(),
            by_kind.entry(c.kind).or_default(),
        ] {
            e.0 += 1;
            if their_valid {
                e.1 += 1;
            } else {
                e.2 += 1;
            }
        }
    }

    println!("BFCL agreement: {} outputs", cases.len());
    println!(
        "{:<28} {:>6} {:>6} {:>8}",
        "category", "n", "valid", "invalid"
    );
    for (k, (n, v, i)) in &by_cat {
        println!("{k:<28} {n:>6} {v:>6} {i:>8}");
    }
    println!("{:<28} {:>6} {:>6} {:>8}", "kind", "n", "valid", "invalid");
    for (k, (n, v, i)) in &by_kind {
        println!("{k:<28} {n:>6} {v:>6} {i:>8}");
    }
    println!(
        "verdict mismatches: {}, error-type mismatches: {}",
        verdict_mismatch.len(),
        type_mismatch.len()
    );

    assert!(
        verdict_mismatch.is_empty(),
        "{} verdicts differ from BFCL's:\n{}",
        verdict_mismatch.len(),
        verdict_mismatch
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        type_mismatch.is_empty(),
        "{} error types differ from BFCL's:\n{}",
        type_mismatch.len(),
        type_mismatch
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(cases.len() >= 300, "only {} outputs", cases.len());
    for c in REQUIRED.iter().chain(&["irrelevance"]) {
        let (n, v, i) = by_cat.get(*c).copied().unwrap_or_default();
        assert!(
            n >= 100 && v > 0 && i > 0,
            "{c}: n {n}, valid {v}, invalid {i}"
        );
    }
    for k in [
        "correct_first",
        "wrong_value",
        "wrong_type",
        "int_for_float",
        "float_for_int",
        "bool_for_int",
        "extra_param",
        "missing_required",
        "missing_optional",
        "reordered_reversed",
        "wrong_name",
        "no_call",
    ] {
        assert!(by_kind.get(k).is_some_and(|e| e.0 > 0), "no {k} cases");
    }
}

//! Loader errors, custom categories, the driver and reports; the real BFCL data where noted
//! (needs `scripts/assets.sh`).

use std::path::PathBuf;
use std::time::Duration;

use plansmith_eval::bfcl_schema::function_parameters_schema;
use plansmith_eval::data::assets_dir;
use plansmith_eval::report::records_to_jsonl;
use plansmith_eval::{
    available_categories, load_categories, load_category, run_eval, score_category, BfclCall,
    BfclItem, CheckMode, EvalError, Expected, Subject, SubjectError, SubjectOutput,
    PUBLISHED_ANCHORS,
};
use serde_json::{json, Value};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "plansmith-eval-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("possible_answer")).unwrap();
        TempDir(p)
    }
    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.0.join(rel), text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const DOC: &str = r#"{"name": "light.set", "description": "d", "parameters": {"type": "dict", "properties": {"room": {"type": "string"}, "level": {"type": "integer"}}, "required": ["room"]}}"#;

fn item_line(id: &str) -> String {
    format!(
        r#"{{"id": "{id}", "question": [[{{"role": "user", "content": "dim the kitchen to 3"}}]], "function": [{DOC}]}}"#
    )
}

fn answer_line(id: &str) -> String {
    format!(
        r#"{{"id": "{id}", "ground_truth": [{{"light.set": {{"room": ["kitchen"], "level": [3, ""]}}}}]}}"#
    )
}

#[test]
fn custom_category_loads_and_scores() {
    let d = TempDir::new("custom");
    d.write(
        "BFCL_v4_home.json",
        &format!("{}\n\n{}\n", item_line("home_0"), item_line("home_1")),
    );
    d.write(
        "possible_answer/BFCL_v4_home.json",
        &format!("{}\n{}\n", answer_line("home_1"), answer_line("home_0")),
    );
    d.write(
        "BFCL_v4_home_irrelevance.json",
        &format!("{}\n", item_line("irr_0")),
    );
    assert_eq!(
        available_categories(&d.0).unwrap(),
        vec!["home".to_string(), "home_irrelevance".to_string()]
    );
    let items = load_categories(&d.0, &["home", "home_irrelevance"]).unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].mode, CheckMode::Simple);
    assert_eq!(items[0].request(), Some("dim the kitchen to 3"));
    assert_eq!(items[2].expected, Expected::NoCall);
    assert_eq!(items[2].mode, CheckMode::NoCall);

    let good = BfclCall::new(
        "light.set",
        json!({"room": "Kitchen", "level": 3})
            .as_object()
            .unwrap()
            .clone(),
    );
    let bad = BfclCall::new(
        "light.set",
        json!({"room": "kitchen", "level": 3.0})
            .as_object()
            .unwrap()
            .clone(),
    );
    let s = score_category(&items[..2], &[Some(vec![good.clone()]), Some(vec![bad])]).unwrap();
    assert_eq!((s.n, s.correct, s.accuracy), (2, 1, 0.5));
    let s = score_category(&items[2..], &[None]).unwrap();
    assert_eq!(
        s.correct, 1,
        "an undecodable output is no call, which irrelevance wants"
    );
    assert!(matches!(
        score_category(&items, &[None]),
        Err(EvalError::Mismatch(_))
    ));
}

#[test]
fn malformed_lines_name_file_and_line() {
    let d = TempDir::new("malformed");
    d.write(
        "BFCL_v4_x.json",
        &format!(
            "{}\n{{\"id\": \"x_1\", \"question\": []}}\n",
            item_line("x_0")
        ),
    );
    let err = load_category(&d.0, "x").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, EvalError::Malformed { line: 2, .. }), "{msg}");
    assert!(
        msg.contains("BFCL_v4_x.json:2") && msg.contains("function"),
        "{msg}"
    );

    d.write("BFCL_v4_y.json", &format!("{}\n", item_line("y_0")));
    let err = load_category(&d.0, "y").unwrap_err().to_string();
    assert!(err.contains("possible-answer"), "{err}");

    d.write(
        "possible_answer/BFCL_v4_y.json",
        "{\"id\": \"y_0\", \"ground_truth\": [{\"light.set\": {\"room\": \"kitchen\"}}]}\n",
    );
    let err = load_category(&d.0, "y").unwrap_err().to_string();
    assert!(
        err.contains("possible_answer/BFCL_v4_y.json:1") && err.contains("list of accepted"),
        "{err}"
    );

    d.write("possible_answer/BFCL_v4_y.json", &answer_line("other"));
    let err = load_category(&d.0, "y").unwrap_err().to_string();
    assert!(err.contains("no possible answer for id \"y_0\""), "{err}");

    d.write(
        "BFCL_v4_z.json",
        r#"{"id": "z_0", "question": [], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {"a": {"type": "HashMap"}}, "required": []}}]}"#,
    );
    d.write(
        "possible_answer/BFCL_v4_z.json",
        r#"{"id": "z_0", "ground_truth": [{"f": {"a": [1]}}]}"#,
    );
    let err = load_category(&d.0, "z").unwrap_err().to_string();
    assert!(
        err.contains("BFCL_v4_z.json:1") && err.contains("HashMap"),
        "{err}"
    );

    let err = load_category(&d.0, "simple_java").unwrap_err();
    assert!(matches!(err, EvalError::UnsupportedCategory { .. }));
    let err = load_category(&d.0, "nope").unwrap_err().to_string();
    assert!(err.contains("BFCL_v4_nope.json"), "{err}");
}

/// Answers with the first gold call list (or no call), with a fixed latency.
struct Oracle;

impl Subject for Oracle {
    fn name(&self) -> String {
        "oracle".into()
    }
    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        let calls: Vec<BfclCall> = item
            .gold()
            .iter()
            .map(|g| {
                let args = g
                    .params
                    .iter()
                    .filter_map(|(k, acc)| {
                        acc.as_array()?
                            .iter()
                            .find(|v| v.as_str() != Some(""))
                            .map(|v| (k.clone(), v.clone()))
                    })
                    .collect();
                BfclCall::new(g.name.clone(), args)
            })
            .collect();
        Ok(SubjectOutput {
            text: BfclCall::list_to_bfcl(&calls).to_string(),
            calls: Some(calls),
            latency: Duration::from_millis(2),
            accepted: None,
            confidence: None,
        })
    }
}

struct Failing;

impl Subject for Failing {
    fn call(&mut self, _: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        Err(SubjectError::endpoint("endpoint down"))
    }
}

#[test]
fn run_eval_records_progress_and_reports() {
    let d = TempDir::new("run");
    d.write(
        "BFCL_v4_simple_python.json",
        &format!("{}\n", item_line("s_0")),
    );
    d.write(
        "possible_answer/BFCL_v4_simple_python.json",
        &answer_line("s_0"),
    );
    d.write(
        "BFCL_v4_irrelevance.json",
        &format!("{}\n", item_line("i_0")),
    );
    let items = load_categories(&d.0, &["simple_python", "irrelevance"]).unwrap();
    let mut seen = Vec::new();
    let run = run_eval(&mut Oracle, &items, |p| {
        seen.push((p.done, p.total, p.correct))
    })
    .unwrap();
    assert_eq!(seen, vec![(1, 2, 1), (2, 2, 2)]);
    assert_eq!(run.report.categories["simple_python"].correct, 1);
    assert_eq!(run.report.non_live_ast, Some(1.0));
    assert_eq!(run.report.latency_ms.p50, 2.0);
    let jsonl = records_to_jsonl(&run.records).unwrap();
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["valid"], true);
    assert_eq!(first["calls"][0]["name"], "light.set");
    assert_eq!(first["input"][0][0]["role"], "user");
    assert!(run
        .report
        .to_markdown("oracle", &PUBLISHED_ANCHORS)
        .contains("100.00%"));

    let err = run_eval(&mut Failing, &items, |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("s_0") && err.contains("endpoint down"),
        "{err}"
    );
}

fn real_bfcl() -> PathBuf {
    let dir = assets_dir().join("bfcl");
    assert!(
        dir.join("BFCL_v4_simple_python.json").is_file(),
        "BFCL data missing at {}: run scripts/assets.sh",
        dir.display()
    );
    dir
}

#[test]
fn real_bfcl_counts_and_oracle_score() {
    let dir = real_bfcl();
    let expected = [
        ("simple_python", 400, CheckMode::Simple),
        ("multiple", 200, CheckMode::Multiple),
        ("parallel", 200, CheckMode::Parallel),
        ("parallel_multiple", 200, CheckMode::Parallel),
        ("irrelevance", 240, CheckMode::NoCall),
    ];
    let mut all = Vec::new();
    for (c, n, mode) in expected {
        let items = load_category(&dir, c).unwrap();
        assert_eq!(items.len(), n, "{c}");
        assert!(items.iter().all(|i| i.mode == mode), "{c}");
        all.extend(items);
    }
    let run = run_eval(&mut Oracle, &all, |_| {}).unwrap();
    println!("{}", run.report.to_json().unwrap());
    // Gold answers pass except where BFCL's own data makes them impossible (a gold parameter
    // that the doc lacks) or the first accepted dict value is given raw.
    let non_live = run.report.non_live_ast.unwrap();
    assert!(non_live > 0.97, "{non_live}");
    assert_eq!(run.report.categories["irrelevance"].accuracy, 1.0);
    let svg = run.report.to_svg("oracle", &PUBLISHED_ANCHORS);
    assert!(svg.contains("Qwen3-0.6B"));
}

#[test]
fn real_bfcl_docs_convert_to_json_schema() {
    let dir = real_bfcl();
    let mut n = 0;
    for c in [
        "simple_python",
        "multiple",
        "parallel",
        "parallel_multiple",
        "irrelevance",
        "live_multiple",
    ] {
        for item in load_category(&dir, c).unwrap() {
            for f in &item.functions {
                let s =
                    function_parameters_schema(f).unwrap_or_else(|e| panic!("{}: {e}", item.id));
                assert_eq!(s["type"], "object", "{}", item.id);
                let text = s.to_string();
                for bad in ["\"dict\"", "\"float\"", "\"tuple\"", "\"any\""] {
                    assert!(
                        !text.contains(&format!("\"type\":{bad}")),
                        "{}: {text}",
                        item.id
                    );
                }
                n += 1;
            }
        }
    }
    assert!(n > 1000);
}

/// A gated subject: answers every item with the same call, and says the gate let through only
/// the items whose id ends in an even digit.
struct Gated;

impl Subject for Gated {
    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        let call = BfclCall::new(
            "light.set",
            json!({"room": "kitchen", "level": 3})
                .as_object()
                .unwrap()
                .clone(),
        );
        let even = item.id.ends_with(['0', '2', '4', '6', '8']);
        Ok(SubjectOutput {
            text: BfclCall::list_to_bfcl(std::slice::from_ref(&call)).to_string(),
            calls: Some(vec![call]),
            latency: Duration::from_millis(1),
            accepted: Some(even),
            confidence: Some(if even { -0.5 } else { -3.0 }),
        })
    }
}

#[test]
fn a_gated_subject_reports_what_its_gate_let_through() {
    let d = TempDir::new("gated");
    // home_0..home_3 want the call; irrelevance items want none, so the same call is wrong there
    d.write(
        "BFCL_v4_home.json",
        &(0..4)
            .map(|i| item_line(&format!("home_{i}")) + "\n")
            .collect::<String>(),
    );
    d.write(
        "possible_answer/BFCL_v4_home.json",
        &(0..4)
            .map(|i| answer_line(&format!("home_{i}")) + "\n")
            .collect::<String>(),
    );
    d.write(
        "BFCL_v4_home_irrelevance.json",
        &(0..3)
            .map(|i| item_line(&format!("irr_{i}")) + "\n")
            .collect::<String>(),
    );
    let items = load_categories(&d.0, &["home", "home_irrelevance"]).unwrap();
    let run = run_eval(&mut Gated, &items, |_| {}).unwrap();
    let home = run.report.categories["home"];
    assert_eq!((home.n, home.correct), (4, 4));
    let g = home.gate.unwrap();
    assert_eq!((g.accepted, g.accepted_wrong), (2, 0));
    let irr = run.report.categories["home_irrelevance"];
    assert_eq!(irr.correct, 0);
    let g = irr.gate.unwrap();
    // irr_0 and irr_2 were let through, and acting on them is wrong
    assert_eq!((g.accepted, g.accepted_wrong), (2, 2));
    assert_eq!(run.records[1].accepted, Some(false));
    // each item keeps the confidence its gate weighed, to re-read the run at another floor
    assert_eq!(run.records[1].confidence, Some(-3.0));
    let line = run.records[0].to_jsonl_line().unwrap();
    assert!(line.contains("\"confidence\":-0.5"), "{line}");
    let md = run.report.to_markdown("gated", &[]);
    assert!(md.contains("accepted and wrong"), "{md}");
    assert!(
        md.contains("| home_irrelevance | 3 | 0 | 0.00% | 2 | 2 |"),
        "{md}"
    );
    let json = run.report.to_json().unwrap();
    assert!(json.contains("\"accepted_wrong\": 2"), "{json}");
}

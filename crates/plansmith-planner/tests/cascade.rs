//! A cascade of real planners: each request goes to the first hop, below its floor to the
//! next, after the last to the teacher (harvested); outcomes name the hop that answered and
//! carry every hop's confidence and floor. Bad cascade files fail at load, naming the hop.

use std::path::{Path, PathBuf};

use plansmith_planner::{cascade, PlannerError, Source};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("plansmith-cascade-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load_err(dir: &Path, text: &str) -> String {
    let path = write(dir, "bad.json", text);
    match cascade::load(&path) {
        Err(e @ PlannerError::Cascade { .. }) => e.to_string(),
        Err(e) => panic!("not a cascade error: {e}"),
        Ok(_) => panic!("loaded: {text}"),
    }
}

#[test]
fn requests_go_hop_by_hop_then_to_the_teacher() {
    let dir = tmp("hops");
    // The embedded planner twice, strict then lenient, with a trace-file teacher. Its
    // confidences: "click the blue Submit button" about -0.00003, "open mail" about -0.0014,
    // "zzzz qqq" about -0.27.
    write(
        &dir,
        "teacher.jsonl",
        r#"{"request":"zzzz qqq","calls":[{"name":"say","arguments":{"text":"zzzz qqq"}}]}"#,
    );
    let path = write(
        &dir,
        "cascade.json",
        r#"{"hops": [{"name": "strict", "embedded": true, "floor": -0.0001},
                     {"name": "lenient", "embedded": true, "floor": -0.01}],
            "teacher": "traces:teacher.jsonl", "harvest": "harvest.jsonl"}"#,
    );
    let c = cascade::load(&path).unwrap();
    let planner = c.planner;
    assert_eq!(
        planner
            .hops()
            .iter()
            .map(|h| h.hop_name().unwrap())
            .collect::<Vec<_>>(),
        ["strict", "lenient"]
    );

    let o = planner.plan("click the blue Submit button").unwrap();
    assert_eq!(
        (o.hop.as_deref(), o.source, o.escalated),
        (Some("strict"), Source::Model, false)
    );
    assert_eq!(o.hops.len(), 1);
    assert!(o.hops[0].accepted && o.hops[0].floor == -0.0001);

    let o = planner.plan("open mail").unwrap();
    assert_eq!(
        (o.hop.as_deref(), o.source),
        (Some("lenient"), Source::Model)
    );
    assert_eq!(o.hops.len(), 2);
    assert!(!o.hops[0].accepted && o.hops[1].accepted, "{:?}", o.hops);
    assert!(o.hops[0].reason.as_deref().unwrap().contains("below floor"));
    assert_eq!(o.hops[0].confidence, o.hops[1].confidence, "the same model");

    let o = planner.plan("zzzz qqq").unwrap();
    assert_eq!(
        (o.hop.as_deref(), o.source),
        (Some("teacher"), Source::Teacher)
    );
    assert_eq!(o.calls[0].name, "say");
    assert!(o.hops.iter().all(|h| !h.accepted));
    let harvested = std::fs::read_to_string(dir.join("harvest.jsonl")).unwrap();
    assert!(harvested.contains("zzzz qqq"), "{harvested}");

    // No teacher answer: escalated, with every hop's reason.
    let o = planner.plan("qqqq zzzz xxxx").unwrap();
    assert_eq!((o.hop, o.source, o.escalated), (None, Source::None, true));
    let reason = o.reason.unwrap();
    assert!(
        reason.contains("strict: confidence") && reason.contains("lenient: confidence"),
        "{reason}"
    );

    let counts: Vec<(u64, u64, u64)> = planner
        .hops()
        .iter()
        .map(|h| {
            let c = h.counters();
            (c.requests, c.answered, c.escalated)
        })
        .collect();
    assert_eq!(counts, [(4, 1, 3), (3, 1, 2)]);
    assert_eq!(planner.hops()[1].counters().harvested_traces, 1);

    // The same cascade evaluated on traces: per hop, the teacher, and overall. The teacher's
    // answer for "zzzz qqq" is the reference; "click" is answered wrongly by the first hop
    // against this made-up reference.
    let traces = [
        r#"{"request":"click the blue Submit button","calls":[{"name":"say","arguments":{"text":"no"}}]}"#,
        r#"{"request":"open mail","calls":[{"name":"clarify","arguments":{"kind":"missing_value","question":"open mail"}}]}"#,
        r#"{"request":"zzzz qqq","calls":[{"name":"say","arguments":{"text":"zzzz qqq"}}]}"#,
        r#"{"request":"qqqq zzzz xxxx","calls":[]}"#,
    ];
    let traces: Vec<plansmith_core::Trace> = traces
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    let items = plansmith_planner::eval::items(&traces).unwrap();
    let r = plansmith_planner::eval::evaluate_cascade(&planner, &items, |_, _| {}).unwrap();
    let rows: Vec<(&str, usize, usize, usize, usize)> = r
        .hops
        .iter()
        .map(|h| {
            (
                h.hop.as_str(),
                h.reached,
                h.answered,
                h.correct,
                h.silent_wrong,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("strict", 4, 1, 0, 1),
            ("lenient", 3, 1, 1, 0),
            ("teacher", 2, 1, 1, 0)
        ]
    );
    assert_eq!((r.n, r.unanswered), (4, 1));
    assert_eq!((r.model_coverage, r.silent_wrong_rate), (0.5, 0.25));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `confirmed_by_next`: a plan the first hop accepts leaves only if the next hop would accept
/// it too (its score of the plan at or above its floor). Here both hops are the embedded
/// planner, so the next hop's score is the first hop's own confidence: a next hop whose floor
/// is 0 (no plan reaches it) confirms nothing and the request goes on to it; one at -1
/// confirms the plan, which the first hop answers.
#[test]
fn a_hop_confirmed_by_the_next_answers_only_what_the_next_would_accept() {
    let dir = tmp("confirm");
    let cascade = |floor: &str| {
        let path = write(
            &dir,
            "cascade.json",
            &format!(
                r#"{{"hops": [{{"name": "fast", "embedded": true, "confirmed_by_next": true}},
                             {{"name": "careful", "embedded": true, "floor": {floor}}}]}}"#
            ),
        );
        cascade::load(&path).unwrap().planner
    };
    let request = "click the blue Submit button";
    let doubting = cascade("0.0");
    let o = doubting.plan(request).unwrap();
    assert!(o.escalated, "{o:?}");
    assert!(!o.hops[0].accepted, "{:?}", o.hops);
    let why = o.hops[0].reason.as_deref().unwrap();
    assert!(
        why.contains("careful does not confirm it") && why.contains("< its floor 0.0000"),
        "{why}"
    );
    let confirming = cascade("-1.0");
    let o = confirming.plan(request).unwrap();
    assert_eq!(
        (o.hop.as_deref(), o.escalated, o.hops.len()),
        (Some("fast"), false, 1),
        "{o:?}"
    );
    assert_eq!(o.calls[0].name, "perform");
    // the next hop scored the plan, it did not plan the request
    assert_eq!(confirming.hops()[1].counters().requests, 0);
    // a hop with nothing after it, or an engine after it, cannot be confirmed
    let e = load_err(
        &dir,
        r#"{"hops": [{"embedded": true, "confirmed_by_next": true}]}"#,
    );
    assert!(
        e.contains("hops[0]") && e.contains("needs a hop after"),
        "{e}"
    );
    let e = load_err(
        &dir,
        r#"{"hops": [{"embedded": true, "confirmed_by_next": true},
                     {"backend": "openai:http://127.0.0.1:9/v1#m"}]}"#,
    );
    assert!(e.contains("logits"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hop_refits_its_floor_under_the_guarantee_and_refuses_when_it_cannot_certify() {
    let dir = tmp("refit");
    let cal: Vec<String> = (0..20)
        .map(|i| {
            format!(r#"{{"request":"scroll down {i}","calls":[{{"name":"perform","arguments":{{"action":"scroll","direction":"down","amount":{i}}}}}]}}"#)
        })
        .collect();
    write(&dir, "cal.jsonl", &cal.join("\n"));
    let path = write(
        &dir,
        "cascade.json",
        r#"{"hops": [{"embedded": true, "calibration": "cal.jsonl", "max_wrong": 0.01}]}"#,
    );
    let c = cascade::load(&path).unwrap();
    assert_eq!(c.fits.len(), 1);
    let (name, fit) = &c.fits[0];
    assert_eq!(name, "hop1");
    assert!(!fit.certified && fit.calibration == 20, "{fit:?}");
    let o = c.planner.plan("click the blue Submit button").unwrap();
    assert!(
        o.escalated,
        "a hop that cannot certify its rate accepts nothing"
    );
    // The refit's verdicts are kept beside the calibration file; the next load reads them
    // back instead of decoding and fits the same floor.
    assert!(dir.join("cal.jsonl.hop1.journal.jsonl").exists());
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    let mut seen = 0;
    let again = cascade::load_with_progress(&path, |hop, done, _| {
        assert_eq!(hop, "hop1");
        seen = done;
    })
    .unwrap();
    assert_eq!(seen, 20, "progress reaches every calibration request");
    assert_eq!(again.fits, c.fits);
    assert!(
        again
            .notes
            .iter()
            .any(|n| n.contains("20 calibration verdicts read back")),
        "{:?}",
        again.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_cascade_files_are_refused_at_load_naming_the_hop() {
    let dir = tmp("bad");
    let cases = [
        (r#"{"hops": []}"#, "at least one hop"),
        (r#"{"hops": [{"planner": "nowhere"}]}"#, "hops[0]: "),
        (r#"{"hops": [{"planner": "nowhere"}]}"#, "does not exist"),
        (
            r#"{"hops": [{"embedded": true, "gguf": "x.gguf"}]}"#,
            "exactly one of",
        ),
        (
            r#"{"hops": [{"embedded": true}, {"embedded": true, "lora": "a"}]}"#,
            "hops[1]: `lora` needs `gguf`",
        ),
        (
            r#"{"hops": [{"embedded": true, "calibration": "cal.jsonl", "max_wrong": 1.5}]}"#,
            "alpha must be in (0, 1), got 1.5",
        ),
        (
            r#"{"hops": [{"embedded": true, "calibration": "cal.jsonl", "max_wrong": 0}]}"#,
            "got 0",
        ),
        (
            r#"{"hops": [{"embedded": true, "max_wrong": 0.01}]}"#,
            "need `calibration`",
        ),
        (
            r#"{"hops": [{"embedded": true, "floor": -1, "calibration": "cal.jsonl"}]}"#,
            "not both",
        ),
        (
            r#"{"hops": [{"name": "a b", "embedded": true}]}"#,
            "name `a b`",
        ),
        (
            r#"{"hops": [{"name": "x", "embedded": true}, {"name": "x", "embedded": true}]}"#,
            "earlier hop",
        ),
        (
            r#"{"hops": [{"embedded": true, "flor": -1}]}"#,
            "unknown field `flor`",
        ),
        (
            r#"{"hops": [{"embedded": true}], "teacher": "carrier-pigeon:home"}"#,
            "carrier-pigeon",
        ),
    ];
    write(&dir, "cal.jsonl", "");
    for (text, want) in cases {
        let path = write(&dir, "bad.json", text);
        let err = match cascade::load(&path) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("loaded: {text}"),
        };
        assert!(err.contains(want), "{text}: {err}");
    }
    assert!(load_err(&dir, "{not json").contains("bad.json"));

    // A planner that knows only its own catalog cannot be a later hop of another catalog.
    let fixed = dir.join("fixed");
    std::fs::create_dir_all(&fixed).unwrap();
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("default");
    std::fs::copy(
        default.join("model.safetensors"),
        fixed.join("model.safetensors"),
    )
    .unwrap();
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(default.join("planner.json")).unwrap())
            .unwrap();
    meta["tools_in_prompt"] = serde_json::json!(false);
    meta["catalog"] = serde_json::json!([{"name": "say",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]);
    std::fs::write(fixed.join("planner.json"), meta.to_string()).unwrap();
    let err = load_err(
        &dir,
        r#"{"hops": [{"name": "tiny", "embedded": true}, {"name": "fixed", "planner": "fixed"}]}"#,
    );
    assert!(
        err.contains("hops[1] (fixed)") && err.contains("only its own catalog"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Importers and exporters on records shaped like the public xLAM, OpenAI and BFCL examples.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use plansmith_core::{Catalog, Trace};
use plansmith_data::import::*;
use plansmith_data::DataError;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Traces equal up to the catalog's source form (compared by canonical hash).
fn assert_same(a: &[Trace], b: &[Trace]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (&x.request, &x.calls, &x.spoken_text),
            (&y.request, &y.calls, &y.spoken_text)
        );
        let hash = |t: &Trace| {
            Catalog::from_value(t.tools.as_ref().unwrap())
                .unwrap()
                .hash()
        };
        assert_eq!(hash(x), hash(y));
    }
}

#[test]
fn xlam_import_and_round_trip() {
    let got = read_xlam(&fixture("xlam.jsonl"), true).unwrap();
    assert_eq!((got.items.len(), got.skipped_count()), (3, 0));
    let t = &got.items[0];
    assert_eq!(
        t.request,
        "Where can I find live giveaways for beta access and games?"
    );
    assert_eq!(t.calls.len(), 2);
    assert_eq!(t.calls[1].arguments["type"], "game");
    let c = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
    assert_eq!(
        c.tools[0].parameters["properties"]["type"]["type"],
        "string"
    );
    assert_eq!(c.tools[0].required(), vec!["type"]);
    let weather = Catalog::from_value(got.items[1].tools.as_ref().unwrap()).unwrap();
    assert_eq!(
        weather.compact_line(),
        "tools: forecast_weather_api(q, days?, dt?, lang?) current_air_quality(lon, lat)"
    );
    assert_eq!(got.items[1].calls[0].arguments["days"], 3);
    // The published file is one JSON array: same result.
    assert_eq!(
        read_xlam(&fixture("xlam_array.json"), true).unwrap().items,
        got.items
    );
    // xLAM -> xLAM and xLAM -> OpenAI chat -> traces -> TRL -> traces.
    let again = import_xlam(&export_xlam(&got.items, None).unwrap(), "export", true).unwrap();
    assert_same(&got.items, &again.items);
    let chat = export_openai_chat(&got.items, None, None).unwrap();
    assert_same(
        &got.items,
        &import_openai_chat(&chat, "chat", true).unwrap().items,
    );
    let trl = export_trl(&got.items, None, Some("You plan tool calls.")).unwrap();
    assert_same(
        &got.items,
        &import_openai_chat(&trl, "trl", true).unwrap().items,
    );
}

#[test]
fn bad_lines_name_file_and_line_and_are_skipped_or_fatal() {
    let path = fixture("xlam_bad.jsonl");
    let got = read_xlam(&path, false).unwrap();
    assert_eq!(got.items.len(), 2);
    let lines: Vec<usize> = got.skipped.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![2, 3, 4]);
    assert!(
        got.skipped[0]
            .to_string()
            .starts_with(&format!("{}:2: invalid JSON", path.display())),
        "{}",
        got.skipped[0]
    );
    assert!(
        got.skipped[1].message.contains("missing `answers`"),
        "{}",
        got.skipped[1]
    );
    assert!(
        got.skipped[2].message.contains("`nope`"),
        "{}",
        got.skipped[2]
    );
    match read_xlam(&path, true) {
        Err(DataError::Line(e)) => assert_eq!((e.line, e.path), (2, path.display().to_string())),
        other => panic!("{other:?}"),
    }
    let e = read_xlam(Path::new("/nonexistent/x.jsonl"), true).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.jsonl"), "{e}");
}

#[test]
fn openai_chat_import_and_round_trip() {
    let got = read_openai_chat(&fixture("openai_chat.jsonl"), true).unwrap();
    assert_eq!(got.items.len(), 3);
    let t = &got.items[0];
    assert_eq!(t.request, "What is the weather in San Francisco?");
    assert_eq!(t.calls[0].name, "get_current_weather");
    assert_eq!(
        t.calls[0].arguments,
        json!({"location": "San Francisco, USA", "format": "celsius"})
            .as_object()
            .unwrap()
            .clone()
    );
    assert_eq!(got.items[1].calls.len(), 2);
    assert!(got.items[2].calls.is_empty());
    assert!(got.items[2]
        .spoken_text
        .as_deref()
        .unwrap()
        .starts_with("Why did the scarecrow"));
    let text = export_openai_chat(&got.items, None, Some("You are a helpful assistant")).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["messages"][0]["role"], "system");
    let args = &first["messages"][2]["tool_calls"][0]["function"]["arguments"];
    assert!(
        args.is_string(),
        "OpenAI wants arguments as a JSON string: {args}"
    );
    assert_same(
        &got.items,
        &import_openai_chat(&text, "x", true).unwrap().items,
    );
    let trl: Value = serde_json::from_str(
        export_trl(&got.items, None, None)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(trl["messages"][1]["tool_calls"][0]["function"]["arguments"].is_object());
    assert_eq!(trl["tools"][0]["function"]["name"], "get_current_weather");
    // Tool calls naming a tool that is not in `tools` are rejected.
    let bad = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"nope","arguments":"{}"}}]}],"tools":[]}"#;
    let got = import_openai_chat(bad, "bad.jsonl", false).unwrap();
    assert_eq!(got.skipped.len(), 1);
    assert!(
        got.skipped[0].to_string().starts_with("bad.jsonl:1:"),
        "{}",
        got.skipped[0]
    );
}

#[test]
fn bfcl_questions_with_possible_answers() {
    let got = read_bfcl(
        &fixture("bfcl_questions.jsonl"),
        Some(&fixture("bfcl_answers.jsonl")),
        true,
    )
    .unwrap();
    assert_eq!(got.items.len(), 4);
    let by_id = |id: &str| got.items.iter().find(|i| i.id == id).unwrap();
    let tri = by_id("simple_python_0");
    assert_eq!(
        tri.request,
        "Find the area of a triangle with a base of 10 units and height of 5 units."
    );
    assert_eq!(
        Value::Object(tri.expected[0].arguments.clone()),
        json!({"base": 10, "height": 5, "unit": "units"})
    );
    let c = Catalog::from_value(&tri.tools).unwrap();
    assert_eq!(c.tools[0].parameters["type"], "object");
    // "" first means the parameter may be omitted.
    assert_eq!(
        Value::Object(by_id("simple_python_2").expected[0].arguments.clone()),
        json!({"x": 4, "y": 5})
    );
    let par = by_id("parallel_0");
    assert_eq!(par.expected.len(), 2);
    assert_eq!(par.expected[1].arguments["artist"], "Maroon 5");
    let hotel = by_id("simple_python_99");
    assert_eq!(
        Value::Object(hotel.expected[0].arguments.clone()),
        json!({"city": "Paris", "guests": {"adults": 2}, "check_in": "2024-05-01"})
    );
    // As traces (what `plansmith data import --format bfcl` writes).
    let traces = import_traces(
        ImportFormat::Bfcl,
        &fixture("bfcl_questions.jsonl"),
        Some(&fixture("bfcl_answers.jsonl")),
        true,
    )
    .unwrap();
    assert_eq!(traces.items[0].calls, tri.expected);
    // Without answers every item expects no call; a missing answer is an error when answers are given.
    let no_answers = read_bfcl(&fixture("bfcl_questions.jsonl"), None, true).unwrap();
    assert!(no_answers.items.iter().all(|i| i.expected.is_empty()));
    let q = std::fs::read_to_string(fixture("bfcl_questions.jsonl")).unwrap();
    let a = r#"{"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5]}}]}"#;
    let partial = import_bfcl(&q, "q.jsonl", Some((a, "a.jsonl")), false).unwrap();
    assert_eq!((partial.items.len(), partial.skipped.len()), (1, 3));
    assert!(
        partial.skipped[0]
            .message
            .contains("no possible answer for `simple_python_2`"),
        "{:?}",
        partial.skipped
    );
}

#[test]
fn formats_parse_from_cli_names() {
    assert_eq!("xlam".parse::<ImportFormat>().unwrap(), ImportFormat::Xlam);
    assert_eq!(
        "openai".parse::<ExportFormat>().unwrap(),
        ExportFormat::OpenAiChat
    );
    assert_eq!("trl".parse::<ExportFormat>().unwrap(), ExportFormat::Trl);
    assert!("csv"
        .parse::<ImportFormat>()
        .unwrap_err()
        .to_string()
        .contains("expected xlam"));
    // Pace traces (no `tools`) export with the default catalog, and fail clearly without one.
    let t: Trace = serde_json::from_str(r#"{"request":"open Safari","calls":[{"name":"open","arguments":{"target":{"type":"app","label":"Safari"}}}]}"#).unwrap();
    let pace = plansmith_data::pace_catalog();
    let out = export_traces(
        ExportFormat::Trl,
        std::slice::from_ref(&t),
        Some(&pace),
        None,
    )
    .unwrap();
    assert!(out.contains("\"tools\":[{\"type\":\"function\""));
    let e = export_traces(ExportFormat::OpenAiChat, &[t], None, None).unwrap_err();
    assert!(
        e.to_string().contains("trace 1: the trace has no `tools`"),
        "{e}"
    );
}

/// trl-planner records: the planner's system prompt for the trace's own catalog, the request,
/// and the plan as a JSON array — the reply plansmith's pretrained planner decodes.
#[test]
fn trl_planner_records_carry_the_planners_prompt_and_a_json_array_reply() {
    let got = read_xlam(&fixture("xlam_array.json"), true).unwrap();
    let system_for = |c: &Catalog| -> Result<String, String> {
        Ok(format!("TOOLS {}", c.names().collect::<Vec<_>>().join(",")))
    };
    let text = export_trl_planner(&got.items, None, &system_for).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), got.items.len());
    for (rec, trace) in lines.iter().zip(&got.items) {
        let catalog = Catalog::from_value(trace.tools.as_ref().unwrap()).unwrap();
        assert_eq!(rec["prompt"][0]["role"], "system");
        assert_eq!(rec["prompt"][0]["content"], system_for(&catalog).unwrap());
        assert_eq!(
            rec["prompt"][1],
            json!({"role": "user", "content": trace.request})
        );
        assert_eq!(rec["completion"][0]["role"], "assistant");
        let reply = rec["completion"][0]["content"].as_str().unwrap();
        let plan = plansmith_core::Syntax::JsonArray.parse(reply).unwrap();
        assert_eq!(plan.calls, trace.calls);
    }
    // A trace without tools needs a default catalog; a failing prompt names the trace.
    let bare = vec![Trace {
        tools: None,
        ..got.items[0].clone()
    }];
    assert!(export_trl_planner(&bare, None, &system_for)
        .unwrap_err()
        .to_string()
        .contains("trace 1"));
    let refuse = |_: &Catalog| -> Result<String, String> { Err("no prompt".into()) };
    let e = export_trl_planner(&got.items, None, &refuse).unwrap_err();
    assert!(e.to_string().contains("no prompt"), "{e}");
}

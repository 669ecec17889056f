//! The whole cascade path as a user runs it: a tiny planner misses, the pretrained model
//! (SmolLM2 from `scripts/assets.sh`) misses, a real HTTP teacher (an OpenAI-compatible stub
//! started here) answers and the answer is harvested; `train --continue` retrains the tiny hop
//! on the harvest, and the retrained hop then answers that request itself.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

fn plansmith(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run plansmith")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An OpenAI-compatible chat endpoint that answers every request with one tool call.
fn teacher_stub(name: &str, arguments: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let body = serde_json::json!({
        "id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_0", "type": "function",
                            "function": {"name": name, "arguments": arguments}}]}}]
    })
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            support::read_request(&stream);
            support::write_json(stream, "200 OK", &body);
        }
    });
    url
}

fn json_line(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap()
}

#[test]
fn tiny_miss_pretrained_miss_teacher_harvest_retrain_then_the_tiny_hop_answers() {
    let dir = std::env::temp_dir().join(format!("plansmith-cascade-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = |p: &str| dir.join(p).to_string_lossy().into_owned();

    // The tiny hop: a copy of the embedded planner, so retraining cannot touch the original.
    let tiny = d("tiny");
    std::fs::create_dir_all(&tiny).unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plansmith-planner/default");
    for f in ["planner.json", "model.safetensors"] {
        std::fs::copy(shipped.join(f), dir.join("tiny").join(f)).unwrap();
    }
    // Generated Pace requests to replay and to recalibrate on.
    let data = d("data");
    let o = plansmith(&["data", "pace", "--n", "600", "--seed", "4", "--out", &data]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let train = d("data/train.jsonl");
    let cal = d("data/calibration.jsonl");

    // A request unlike any Pace phrasing (the embedded planner's confidence on it is about
    // -0.002, below the tiny hop's floor; after learning the teacher's answer about -0.001,
    // above it), and what the teacher says it means.
    let request = "kindly summon the quarterly budget spreadsheet onto my screen";
    let arguments = r#"{"target":{"type":"file","label":"quarterly budget spreadsheet"}}"#;
    let url = teacher_stub("open", arguments);
    let harvest = d("harvest.jsonl");
    let cascade = d("cascade.json");
    std::fs::write(
        &cascade,
        serde_json::json!({
            "hops": [
                {"name": "tiny", "planner": tiny, "floor": -0.0015},
                // A floor above every confidence: this hop always passes the request on.
                {"name": "smollm2", "gguf": Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/smollm2.gguf"), "floor": 1.0}
            ],
            "teacher": format!("openai:{url}#stub"),
            "harvest": harvest,
        })
        .to_string(),
    )
    .unwrap();
    let before = json_line(&plansmith(&[
        "plan",
        "--cascade",
        &cascade,
        "--json",
        request,
    ]));
    assert_eq!(before["source"], "teacher", "{before}");
    assert_eq!(before["hop"], "teacher", "{before}");
    let hops = before["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 2, "{before}");
    assert!(hops.iter().all(|h| h["accepted"] == false), "{before}");
    assert_eq!(before["calls"][0]["name"], "open", "{before}");
    let harvested = std::fs::read_to_string(&harvest).unwrap();
    assert_eq!(harvested.lines().count(), 1, "{harvested}");
    assert!(harvested.contains(request), "{harvested}");

    // A retrained planner worse on a check set does not replace the old one: against a check
    // whose reference is what the old planner says, learning the teacher's answer is worse.
    let old_says = d("old-says.jsonl");
    std::fs::write(
        &old_says,
        serde_json::json!({"request": request, "calls": [{"name": "query",
            "arguments": {"source": "current_screen", "mode": "summarize"}}]})
        .to_string(),
    )
    .unwrap();
    let manifest = std::fs::read(dir.join("tiny/planner.json")).unwrap();
    // Retrain the tiny hop on the harvest and a replay of its old data, judged on `check`.
    let retrain = |check: &str| {
        plansmith(&[
            "train",
            "--continue",
            &tiny,
            "--harvest",
            &harvest,
            "--data",
            &train,
            "--replay",
            "300",
            "--harvest-copies",
            "80",
            "--epochs",
            "3",
            "--calibration",
            &cal,
            "--check",
            check,
            "--target-precision",
            "1",
            "--json",
        ])
    };
    let o = retrain(&old_says);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(report["replaced"], false, "{report}");
    assert_eq!(report["checks"][0]["agreement_before"], 1.0, "{report}");
    assert_eq!(
        std::fs::read(dir.join("tiny/planner.json")).unwrap(),
        manifest,
        "unchanged"
    );
    assert!(dir.join("tiny.rejected/planner.json").is_file());

    // Checked on the harvest itself: the old planner gets it wrong, so the new one is not
    // worse and replaces it.
    let report = json_line(&retrain(&harvest));
    assert_eq!(report["replaced"], true, "{report}");
    let check = &report["checks"][0];
    assert_eq!(
        (
            check["agreement_before"].clone(),
            check["agreement_after"].clone()
        ),
        (serde_json::json!(0.0), serde_json::json!(1.0)),
        "{report}"
    );

    let after = json_line(&plansmith(&[
        "plan",
        "--cascade",
        &cascade,
        "--json",
        request,
    ]));
    assert_eq!(
        (after["source"].clone(), after["hop"].clone()),
        (serde_json::json!("model"), serde_json::json!("tiny")),
        "{after}"
    );
    assert_eq!(after["calls"], before["calls"], "{after}");
    assert_eq!(
        std::fs::read_to_string(&harvest).unwrap().lines().count(),
        1,
        "no new harvest"
    );
    // What --continue refuses: no check set, a planner that is not there, no --harvest.
    for (args, want) in [
        (
            vec![
                "--continue",
                &tiny,
                "--harvest",
                &harvest,
                "--calibration",
                &cal,
            ],
            "--check",
        ),
        (
            vec![
                "--continue",
                "nowhere",
                "--harvest",
                &harvest,
                "--calibration",
                &cal,
                "--check",
                &harvest,
            ],
            "nowhere",
        ),
        (
            vec![
                "--continue",
                &tiny,
                "--calibration",
                &cal,
                "--check",
                &harvest,
            ],
            "--harvest",
        ),
    ] {
        let o = plansmith(&[&["train"][..], &args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(want),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `eval bfcl --cascade`: BFCL's checker scores the plan that leaves the cascade; with a
/// teacher that knows every answer, every item is answered by someone.
#[test]
fn eval_bfcl_scores_a_cascade() {
    let dir = std::env::temp_dir().join(format!("plansmith-cascade-bfcl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
    let teacher = d("teacher.jsonl");
    let o = plansmith(&[
        "data",
        "import",
        "--format",
        "bfcl",
        "eval/handwritten/BFCL_v4_handwritten_clarify.json",
        "--answers",
        "eval/handwritten/possible_answer/BFCL_v4_handwritten_clarify.json",
        "--out",
        &teacher,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let cascade = d("cascade.json");
    std::fs::write(
        &cascade,
        serde_json::json!({"hops": [{"name": "tiny", "embedded": true}], "teacher": format!("traces:{teacher}")})
            .to_string(),
    )
    .unwrap();
    let o = plansmith(&[
        "eval",
        "bfcl",
        "--data-dir",
        "eval/handwritten",
        "--categories",
        "handwritten_clarify",
        "--cascade",
        &cascade,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let c = &report["categories"]["handwritten_clarify"];
    assert_eq!(c["n"], 30, "{report}");
    assert_eq!(c["gate"]["accepted"], 30, "{report}");
    let wrong = c["gate"]["accepted_wrong"].as_u64().unwrap();
    assert_eq!(c["correct"].as_u64().unwrap() + wrong, 30, "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

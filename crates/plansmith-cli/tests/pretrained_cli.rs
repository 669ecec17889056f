//! `plan --gguf` and `eval bfcl` as a user runs them, on the real SmolLM2 GGUF and the real
//! BFCL data from `scripts/assets.sh`.

mod support;

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

#[test]
fn plan_gguf_returns_valid_calls_for_any_request() {
    let o = plansmith(&[
        "plan",
        "--gguf",
        "assets/smollm2.gguf",
        "--tools",
        "examples/pace/tools.json",
        "--tool-choice",
        "required",
        "--json",
        "open safari",
        "zzzz 1234 !!",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    let catalog = plansmith_core::Catalog::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pace/tools.json"
    ))
    .unwrap();
    let validator = plansmith_core::validate::PlanValidator::new(&catalog).unwrap();
    for l in &lines {
        assert_eq!(l["escalated"], false, "{l}");
        let calls: Vec<plansmith_core::Call> = serde_json::from_value(l["calls"].clone()).unwrap();
        assert!(!calls.is_empty(), "{l}");
        let plan = plansmith_core::Plan {
            calls,
            spoken_text: None,
        };
        let problems = validator.validate(&plan, &plansmith_core::Policy::default(), None);
        assert!(problems.is_empty(), "{problems:?} in {l}");
    }
}

#[test]
fn eval_bfcl_scores_and_writes_reports() {
    let dir = std::env::temp_dir().join(format!("plansmith-bfcl-cli-{}", std::process::id()));
    let o = plansmith(&[
        "eval",
        "bfcl",
        "--gguf",
        "assets/smollm2.gguf",
        "--categories",
        "simple_python",
        "--limit",
        "1",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let cat = &v["categories"]["simple_python"];
    assert_eq!(cat["n"], 1, "{v}");
    // simple_python_0 (triangle area, base 10 height 5): SmolLM2 gets it right constrained.
    assert_eq!(cat["correct"], 1, "{v}");
    assert_eq!(v["non_live_ast"], 1.0, "{v}");
    assert!(v["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    for f in ["report.json", "items.jsonl", "report.md", "chart.svg"] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let item: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(dir.join("items.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(item["id"], "simple_python_0");
    assert_eq!(item["valid"], true);
    assert_eq!(
        item["calls"][0]["name"], "calculate_triangle_area",
        "{item}"
    );
    assert_eq!(item["calls"][0]["args"]["base"], 10, "{item}");
    let svg = std::fs::read_to_string(dir.join("chart.svg")).unwrap();
    assert!(svg.contains("Qwen3-0.6B"), "anchors belong in the chart");
    std::fs::remove_dir_all(&dir).unwrap();

    let o = plansmith(&[
        "eval",
        "bfcl",
        "--categories",
        "no_such_category",
        "--limit",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("no_such_category"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn eval_bfcl_scores_an_openai_endpoint() {
    // Our own server with the embedded Pace planner and an impossible floor: every answer is
    // "no call", which BFCL scores right on irrelevance and wrong on simple_python.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--floor", "1e9"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let served = support::serve(cmd);
    let url = served.url.clone();
    let o = plansmith(&[
        "eval",
        "bfcl",
        "--endpoint",
        &format!("{url}/v1"),
        "--model",
        "plansmith",
        "--categories",
        "simple_python,irrelevance",
        "--limit",
        "2",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["categories"]["irrelevance"]["correct"], 2, "{v}");
    assert_eq!(v["categories"]["simple_python"]["correct"], 0, "{v}");

    // A dead endpoint is an error naming it, exit 2, after the retries.
    let o = plansmith(&[
        "eval",
        "bfcl",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--categories",
        "irrelevance",
        "--limit",
        "1",
        "--timeout",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

/// `train --base` on the real SmolLM2 GGUF: two LoRA steps on a two-tool catalog write a
/// planner that plans; the run's checkpoint resumes; bad settings and a corrupt checkpoint are
/// exit 2 with a message naming them.
#[test]
fn train_base_tunes_a_lora_planner_and_resumes_from_its_checkpoint() {
    let dir = std::env::temp_dir().join(format!("plansmith-lora-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tools = serde_json::json!([
        {"name": "open", "description": "Open an app.", "parameters": {"type": "object",
            "properties": {"app": {"type": "string"}}, "required": ["app"]}},
        {"name": "volume", "description": "Set the volume.", "parameters": {"type": "object",
            "properties": {"level": {"type": "integer"}}, "required": ["level"]}}
    ]);
    std::fs::write(dir.join("tools.json"), tools.to_string()).unwrap();
    let mut lines = String::new();
    for (req, name, args) in [
        ("open safari", "open", serde_json::json!({"app": "safari"})),
        ("open mail", "open", serde_json::json!({"app": "mail"})),
        ("launch notes", "open", serde_json::json!({"app": "notes"})),
        ("volume to 3", "volume", serde_json::json!({"level": 3})),
        (
            "set the volume to 7",
            "volume",
            serde_json::json!({"level": 7}),
        ),
        (
            "turn volume to 10",
            "volume",
            serde_json::json!({"level": 10}),
        ),
    ] {
        let t = serde_json::json!({"request": req, "calls": [{"name": name, "arguments": args}]});
        lines.push_str(&format!("{t}\n"));
    }
    std::fs::write(dir.join("traces.jsonl"), &lines).unwrap();
    let d = |f: &str| dir.join(f).display().to_string();
    let train = |extra: &[&str]| {
        let mut args = vec![
            "--threads",
            "2",
            "train",
            "--base",
            "assets/smollm2.gguf",
            "--tools",
        ];
        let (tools, data, cal, out) = (
            d("tools.json"),
            d("traces.jsonl"),
            d("traces.jsonl"),
            d("planner"),
        );
        args.extend([
            tools.as_str(),
            "--data",
            data.as_str(),
            "--calibration",
            cal.as_str(),
        ]);
        args.extend(["--test", cal.as_str(), "--quiet", "--json"]);
        if !extra.contains(&"--out") {
            args.extend(["--out", out.as_str()]);
        }
        args.extend([
            "--steps",
            "2",
            "--batch-size",
            "3",
            "--lora-targets",
            "q,v,down",
        ]);
        args.extend(extra);
        for (flag, default) in [("--lora-rank", "4"), ("--lora-alpha", "8")] {
            if !extra.contains(&flag) {
                args.extend([flag, default]);
            }
        }
        plansmith(&args)
    };
    let o = train(&["--checkpoint-every", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(report["lora"]["steps"], 2, "{out}");
    assert!(
        report["lora"]["final_loss"].as_f64().unwrap() > 0.0,
        "{out}"
    );
    // the floor was fitted under the default guarantee, which a few calibration traces cannot
    // certify: said in the report, and the planner escalates rather than pretends
    assert_eq!(report["floor_fit"]["rule"], "guaranteed", "{out}");
    assert_eq!(report["floor_fit"]["certified"], false, "{out}");
    let adapter = dir.join("planner/adapter/adapter_config.json");
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&adapter).unwrap()).unwrap();
    assert_eq!(
        cfg["target_modules"],
        serde_json::json!(["q_proj", "v_proj", "down_proj"])
    );
    let ckpt = dir.join("planner.checkpoint/checkpoint.safetensors");
    assert!(ckpt.is_file(), "no checkpoint after step 1");
    // the loss curve is drawn beside the planner, one point per step
    let svg = std::fs::read_to_string(dir.join("planner/loss.svg")).unwrap();
    let (_, after) = svg.split_once("points=\"").expect("a polyline");
    let points = &after[..after.find('"').unwrap()];
    assert_eq!(points.split_whitespace().count(), 2, "{svg}");
    // the tuned planner plans
    let planner = d("planner");
    let o = plansmith(&["plan", "--planner", &planner, "--json", "open mail"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // the compact tool list: kept in planner.json and used to plan; its checkpoint is another
    // run's (other prompt tokens)
    let compact = d("compact");
    let o = train(&["--tool-list", "compact", "--out", &compact]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let manifest = std::fs::read_to_string(dir.join("compact/planner.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(manifest["tool_list"], "compact", "{manifest}");
    let o = plansmith(&["plan", "--planner", &compact, "--json", "open mail"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = train(&[
        "--tool-list",
        "compact",
        "--resume",
        &d("planner.checkpoint"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("other examples"),
        "{}",
        text(&o.stderr)
    );
    // resuming the step-1 checkpoint finishes the run
    let o = train(&["--resume", &d("planner.checkpoint")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(report["lora"]["resumed_at"], 1);
    // ... but not with other settings
    let o = train(&["--resume", &d("planner.checkpoint"), "--lora-alpha", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("checkpoint.safetensors"),
        "{}",
        text(&o.stderr)
    );
    // a corrupt checkpoint is named
    std::fs::write(&ckpt, b"not a checkpoint").unwrap();
    let o = train(&["--resume", &d("planner.checkpoint")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("checkpoint.safetensors"),
        "{}",
        text(&o.stderr)
    );
    // rank 0 and unknown targets
    let o = train(&["--lora-rank", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("rank"), "{}", text(&o.stderr));
    let o = train(&["--lora-targets", "q,lm_head"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("lm_head"), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

/// A fresh directory with `tools.json` (one tool, `open(app)`) and `traces.jsonl` (three
/// requests for it), for short `train --base` runs.
fn one_tool_data(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("plansmith-lora-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tools = serde_json::json!([
        {"name": "open", "description": "Open an app.", "parameters": {"type": "object",
            "properties": {"app": {"type": "string"}}, "required": ["app"]}}
    ]);
    std::fs::write(dir.join("tools.json"), tools.to_string()).unwrap();
    let lines: String = ["safari", "mail", "notes"]
        .iter()
        .map(|app| {
            let t = serde_json::json!({"request": format!("open {app}"),
                "calls": [{"name": "open", "arguments": {"app": app}}]});
            format!("{t}\n")
        })
        .collect();
    std::fs::write(dir.join("traces.jsonl"), lines).unwrap();
    dir
}

/// `train --base BASE` for one LoRA step (batch 3, r=2) on [`one_tool_data`]'s files, the
/// planner written to `dir/planner`, with `extra` options.
fn short_train(dir: &std::path::Path, base: &str, extra: &[&str]) -> Output {
    let d = |f: &str| dir.join(f).display().to_string();
    let (tools, data, out) = (d("tools.json"), d("traces.jsonl"), d("planner"));
    let mut args = vec![
        "--threads",
        "2",
        "train",
        "--base",
        base,
        "--tools",
        &tools,
        "--data",
        &data,
        "--calibration",
        &data,
        "--test",
        &data,
        "--quiet",
        "--json",
        "--batch-size",
        "3",
    ];
    // defaults `extra` may override
    for (flag, value) in [
        ("--out", out.as_str()),
        ("--steps", "1"),
        ("--lora-rank", "2"),
        ("--lora-alpha", "4"),
    ] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend(extra);
    plansmith(&args)
}

/// Ctrl-C while `train --base` fits the floor keeps what was trained: the planner is saved
/// before calibration starts (a floor that accepts nothing, since none is fitted yet), the run
/// stops at the next calibration request with exit 1 and says how to finish, and `calibrate`
/// then finishes it.
#[test]
fn stopping_train_during_calibration_keeps_the_trained_planner() {
    use std::io::{BufRead, BufReader};
    let dir = one_tool_data("stop-cal");
    let d = |f: &str| dir.join(f).display().to_string();
    // A calibration split long enough (hundreds of requests) that the signal lands inside it.
    let traces = std::fs::read_to_string(dir.join("traces.jsonl")).unwrap();
    std::fs::write(dir.join("calibration.jsonl"), traces.repeat(150)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(["--threads", "2", "train", "--base", "assets/smollm2.gguf"])
        .args(["--tools", &d("tools.json"), "--data", &d("traces.jsonl")])
        .args([
            "--calibration",
            &d("calibration.jsonl"),
            "--out",
            &d("planner"),
        ])
        .args(["--steps", "1", "--batch-size", "3", "--lora-rank", "2"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run plansmith");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        said.push_str(&line);
        if line.contains("Ctrl-C stops here") {
            break;
        }
        line.clear();
    }
    assert!(said.contains("saved to"), "{said}");
    // The planner is on disk before the floor is fitted.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("planner/planner.json")).unwrap())
            .unwrap();
    assert!(
        manifest["conf_floor"].as_f64().unwrap() > 1e38,
        "{manifest}"
    );
    assert!(dir
        .join("planner/adapter/adapter_model.safetensors")
        .exists());
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{said}{rest}");
    assert!(rest.contains("stopped during calibration"), "{rest}");
    assert!(rest.contains("plansmith calibrate --planner"), "{rest}");
    // No staging copy is left beside it, and `calibrate` finishes the planner.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // What was judged before the stop is journaled beside the planner, and `calibrate` goes
    // on from it (its calibration file starts with the same traces), then removes it.
    assert!(rest.contains("calibration-journal.jsonl"), "{rest}");
    let journal = dir.join("planner/calibration-journal.jsonl");
    assert!(journal.exists());
    let o = plansmith(&[
        "calibrate",
        "--planner",
        &d("planner"),
        "--calibration",
        &d("traces.jsonl"),
        "--target-precision",
        "0.5",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("resuming: "),
        "{}",
        text(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap();
    assert!(report["resumed"].as_u64().unwrap() >= 1, "{report}");
    assert!(!journal.exists());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("planner/planner.json")).unwrap())
            .unwrap();
    assert!(
        manifest["conf_floor"].as_f64().unwrap() < 1e38,
        "{manifest}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `train --base --init-adapter`: a run that starts from a trained planner's adapter starts
/// from its loss, not the base's; an adapter of another rank is refused naming the flags.
#[test]
fn train_base_starts_from_a_trained_adapter() {
    let dir = one_tool_data("init");
    let first_loss = |o: &Output| {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap();
        (
            report["lora"]["first_loss"].as_f64().unwrap(),
            report["lora"]["final_loss"].as_f64().unwrap(),
        )
    };
    let trained = short_train(
        &dir,
        "assets/smollm2.gguf",
        &["--steps", "4", "--lr", "1e-2"],
    );
    let (base_loss, trained_loss) = first_loss(&trained);
    assert!(
        trained_loss < base_loss * 0.8,
        "{base_loss} -> {trained_loss}"
    );
    let planner = dir.join("planner").display().to_string();
    let again = dir.join("again").display().to_string();
    let continued = short_train(
        &dir,
        "assets/smollm2.gguf",
        &["--init-adapter", &planner, "--out", &again, "--lr", "1e-9"],
    );
    let (start, _) = first_loss(&continued);
    assert!(
        start < base_loss * 0.8,
        "a continued run starts at {start}, the base at {base_loss}"
    );
    let o = short_train(
        &dir,
        "assets/smollm2.gguf",
        &[
            "--init-adapter",
            &planner,
            "--out",
            &again,
            "--lora-rank",
            "3",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--lora-rank 2"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `train --base --reply-format tool_call` on the real Qwen2.5-Coder-0.5B (`scripts/assets.sh
/// qwen05`): one LoRA step writes a planner that keeps the format and plans in `<tool_call>`
/// tags; a model whose template has no tool calls, and the compact tool list (which only
/// plansmith's own system message uses), are refused with exit 2 naming why.
#[test]
fn train_base_teaches_the_tool_call_format_where_the_template_has_it() {
    let dir = one_tool_data("tc");
    let out = dir.join("planner").display().to_string();
    let train = |base: &str, extra: &[&str]| {
        let mut args = vec!["--lora-targets", "q,v", "--reply-format", "tool_call"];
        args.extend(extra);
        short_train(&dir, base, &args)
    };
    let o = train("assets/qwen05.gguf", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let manifest = std::fs::read_to_string(dir.join("planner/planner.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(manifest["syntax"], "tool_call", "{manifest}");
    let o = plansmith(&["plan", "--planner", &out, "--json", "open mail"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert!(
        line["text"].as_str().unwrap().starts_with("<tool_call>"),
        "{line}"
    );
    // the bare adapter says how it was trained: `plan --lora` prompts it the same way
    let adapter = dir.join("planner/adapter").display().to_string();
    let o = plansmith(&[
        "plan",
        "--gguf",
        "assets/qwen05.gguf",
        "--lora",
        &adapter,
        "--json",
        "open mail",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert!(
        line["text"].as_str().unwrap().starts_with("<tool_call>"),
        "{line}"
    );
    let o = train("assets/smollm2.gguf", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("<tool_call>"),
        "{}",
        text(&o.stderr)
    );
    let o = train("assets/qwen05.gguf", &["--tool-list", "compact"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--tool-list"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `train --base` on the real Gemma-3-270M (`scripts/assets.sh gemma3`): a LoRA step on its
/// block (GeGLU, post norms, sliding-window layers) writes a planner that plans.
#[test]
fn train_base_tunes_a_gemma3_planner() {
    let dir = one_tool_data("gemma");
    let out = dir.join("planner").display().to_string();
    let o = short_train(&dir, "assets/gemma3.gguf", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap();
    assert!(
        report["lora"]["final_loss"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let o = plansmith(&["plan", "--planner", &out, "--json", "open mail"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn reply_format_tool_call_needs_a_template_that_teaches_it() {
    // SmolLM2's template renders no tools: `tool_call` is refused naming why (exit 2), an
    // unknown format is a usage error, and `auto` (the default) plans in the JSON array.
    let o = plansmith(&[
        "plan",
        "--gguf",
        "assets/smollm2.gguf",
        "--reply-format",
        "tool_call",
        "open safari",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("<tool_call>") && err.contains("json"), "{err}");
    let o = plansmith(&[
        "plan",
        "--gguf",
        "assets/smollm2.gguf",
        "--reply-format",
        "xml",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("auto, json, tool_call"),
        "{}",
        text(&o.stderr)
    );
    let o = plansmith(&[
        "plan",
        "--gguf",
        "assets/smollm2.gguf",
        "--json",
        "open safari",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert!(line["text"].as_str().unwrap().starts_with('['), "{line}");
}

#[test]
fn copy_free_strings_makes_every_free_value_a_span_of_the_request() {
    let requests = [
        "open the file quarterly report",
        "search the web for cheap flights to Lisbon",
    ];
    let mut args = vec![
        "plan",
        "--gguf",
        "assets/smollm2.gguf",
        "--tools",
        "examples/pace/tools.json",
        "--tool-choice",
        "required",
        "--copy",
        "free-strings",
        "--json",
    ];
    args.extend(requests);
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let catalog = plansmith_core::Catalog::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pace/tools.json"
    ))
    .unwrap();
    let validator = plansmith_core::validate::PlanValidator::new(&catalog).unwrap();
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), requests.len(), "{out}");
    for (line, request) in lines.iter().zip(requests) {
        let l: serde_json::Value = serde_json::from_str(line).unwrap();
        let calls: Vec<plansmith_core::Call> = serde_json::from_value(l["calls"].clone()).unwrap();
        assert!(!calls.is_empty(), "{l}");
        let plan = plansmith_core::Plan {
            calls,
            spoken_text: None,
        };
        let policy = plansmith_core::Policy::copy_free_strings();
        let problems = validator.validate(&plan, &policy, Some(request));
        assert!(problems.is_empty(), "{problems:?} in {l}");
    }
    // The policy is a pretrained model's option: without --gguf it is a usage error.
    let o = plansmith(&["plan", "--copy", "free-strings", "open safari"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--gguf"), "{}", text(&o.stderr));
}

/// A BFCL item whose schema the grammar cannot constrain (here a numeric range no value
/// satisfies) is scored as no answer with the reason; the run goes on. BFCL's parallel_29 (a
/// `dict` with required keys and no `properties`, which once ended the run) is answered.
#[test]
fn eval_bfcl_scores_an_unconstrainable_schema_as_no_answer() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/bfcl");
    let line = |file: &str, id: &str| -> serde_json::Value {
        let all = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let found = all.lines().find(|l| l.contains(&format!("\"{id}\"")));
        serde_json::from_str(found.unwrap_or_else(|| panic!("{id} in {file}"))).unwrap()
    };
    let dir = std::env::temp_dir().join(format!("plansmith-bfcl-refused-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("possible_answer")).unwrap();
    let mut items = Vec::new();
    let mut answers = Vec::new();
    for (i, (cat, id)) in [
        ("parallel", "parallel_29"),
        ("simple_python", "simple_python_0"),
    ]
    .iter()
    .enumerate()
    {
        let new_id = format!("simple_python_{i}");
        let mut item = line(&format!("BFCL_v4_{cat}.json"), id);
        item["id"] = new_id.clone().into();
        if *id == "simple_python_0" {
            item["function"][0]["parameters"]["properties"]["base"] =
                serde_json::json!({"type": "integer", "minimum": 5, "maximum": 1});
        }
        let mut answer = line(&format!("possible_answer/BFCL_v4_{cat}.json"), id);
        answer["id"] = new_id.into();
        items.push(item.to_string());
        answers.push(answer.to_string());
    }
    std::fs::write(dir.join("BFCL_v4_simple_python.json"), items.join("\n")).unwrap();
    std::fs::write(
        dir.join("possible_answer/BFCL_v4_simple_python.json"),
        answers.join("\n"),
    )
    .unwrap();
    let out = dir.join("out");
    let o = plansmith(&[
        "eval",
        "bfcl",
        "--gguf",
        "assets/smollm2.gguf",
        "--data-dir",
        dir.to_str().unwrap(),
        "--categories",
        "simple_python",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let records = std::fs::read_to_string(out.join("items.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    // parallel_29: a call of the tool, the population an object.
    let calls = records[0]["calls"]
        .as_array()
        .expect("parallel_29 answered");
    assert_eq!(
        calls[0]["name"], "waste_calculation.calculate",
        "{}",
        records[0]
    );
    assert!(calls[0]["args"]["population"].is_object(), "{}", records[0]);
    assert_eq!(records[1]["valid"], false);
    let reason = records[1]["output"].as_str().unwrap();
    assert!(reason.contains("numeric range admits no value"), "{reason}");
    std::fs::remove_dir_all(&dir).unwrap();
}

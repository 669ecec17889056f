//! The CLI as a user meets it: exit codes, JSON output, error messages.

use std::process::{Command, Output};

fn plansmith(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run plansmith")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn catalog_check_json() {
    let o = plansmith(&["catalog", "check", "examples/pace/tools.json", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["tools"], 10);
    assert_eq!(v["format"], "openai");
    assert_eq!(v["hash"].as_str().unwrap().len(), 64);
}

#[test]
fn bad_catalog_exits_2_with_path() {
    let dir = std::env::temp_dir().join(format!("plansmith-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.json");
    std::fs::write(
        &file,
        r#"{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"not":{}}}}}]}"#,
    )
    .unwrap();
    let o = plansmith(&["catalog", "check", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("unsupported schema feature `not` at $.tools[0].inputSchema.properties.x"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let o = plansmith(&["catalog", "check", "/definitely/not/here.json"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_negative_name_prior_exits_2() {
    let o = plansmith(&["plan", "--name-prior", "-1", "set the volume to 40"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--name-prior must be a number >= 0, got -1"),
        "{err}"
    );
}

#[test]
fn a_catalog_too_long_for_the_default_planner_exits_2_naming_it() {
    let dir = std::env::temp_dir().join(format!("plansmith-cli-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("many.json");
    let tools: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            serde_json::json!({"name": format!("tool_number_{i}"),
                "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}})
        })
        .collect();
    std::fs::write(&file, serde_json::to_string(&tools).unwrap()).unwrap();
    // An evaluation trace that carries the same catalog as its own `tools`, after one that fits.
    let traces = dir.join("traces.jsonl");
    let fits = serde_json::json!({"request": "scroll down", "calls": []});
    let long =
        serde_json::json!({"request": "set a timer for 5 minutes", "calls": [], "tools": tools});
    std::fs::write(&traces, format!("{fits}\n{long}\n")).unwrap();
    let file = file.to_str().unwrap();
    for args in [
        vec!["plan", "--tools", file, "set a timer for 5 minutes"],
        vec!["serve", "--tools", file, "--addr", "127.0.0.1:0"],
        vec!["eval", "traces", "--data", traces.to_str().unwrap()],
    ] {
        let o = plansmith(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("the tool catalog (300 tools) takes")
                && err.contains("context holds 640")
                && err.contains("send fewer tools"),
            "{args:?}: {err}"
        );
        if args[0] == "eval" {
            assert!(err.contains("trace 2: "), "{err}");
        }
    }
    // 62 of those tools fit, but leave this request's reply 2 tokens: the escalation says so.
    let fits = dir.join("sixty-two.json");
    std::fs::write(&fits, serde_json::to_string(&tools[..62]).unwrap()).unwrap();
    let request = "set the tool number 3 value to 5 minutes now please";
    let o = plansmith(&["plan", "--tools", fits.to_str().unwrap(), request]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("ran out of context: the prompt left 2 tokens for the reply"),
        "{}",
        stdout(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validate_exit_codes() {
    let tools = "examples/pace/tools.json";
    let ok = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--request",
        "scroll down 3 times",
        "perform(action=scroll; direction=down; amount=3)",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    let bad = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--json",
        "--request",
        "scroll down 3 times",
        "perform(action=scroll; direction=sideways; amount=300)",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(v["valid"], false);
    let paths: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"/direction") && paths.contains(&"/amount"),
        "{paths:?}"
    );
    let drift = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--request",
        "where is order 4242",
        "query_memory(query=order 4202)",
    ]);
    assert_eq!(drift.status.code(), Some(1));
    assert!(stdout(&drift).contains("not copied from the request"));
    let unparsable = plansmith(&["validate", "--tools", tools, "open(target"]);
    assert_eq!(unparsable.status.code(), Some(2));
    assert!(stderr(&unparsable).contains("cannot parse plan"));
    let envelope = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--syntax",
        "envelope",
        r#"{"verb":"say","args":{"text":"hi"}}"#,
    ]);
    assert_eq!(envelope.status.code(), Some(0), "{}", stderr(&envelope));
}

/// `train` reads its data one trace at a time: the split off --data, traces with their own
/// catalogs, and a bad line or a bad catalog named by file.
#[test]
fn train_reads_traces_as_it_goes() {
    let dir = std::env::temp_dir().join(format!("plansmith-cli-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = |p: &str| dir.join(p).to_str().unwrap().to_string();
    let o = plansmith(&[
        "data",
        "pace",
        "--n",
        "300",
        "--seed",
        "3",
        "--out",
        &d("data"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = plansmith(&[
        "data",
        "augment",
        "--data",
        &d("data/train.jsonl"),
        "--tools",
        "examples/pace/tools.json",
        "--out",
        &d("aug.jsonl"),
        "--copies",
        "1",
        "--novel",
        "50",
        "--swapped",
        "30",
        "--seed",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines = |p: &str| std::fs::read_to_string(d(p)).unwrap().lines().count();
    let total = lines("data/train.jsonl") + lines("aug.jsonl");
    // Benchmark-style APIs: typed values (a float, a list) in catalogs of their own, 8 requests
    // per catalog.
    let o = plansmith(&[
        "data",
        "augment",
        "--data",
        &d("data/train.jsonl"),
        "--tools",
        "examples/pace/tools.json",
        "--out",
        &d("apis.jsonl"),
        "--apis",
        "40",
        "--group",
        "8",
        "--seed",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let api_lines: Vec<serde_json::Value> = std::fs::read_to_string(d("apis.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(api_lines.len(), lines("data/train.jsonl") + 40);
    let typed = api_lines.iter().filter(|t| {
        t["calls"].as_array().unwrap().iter().any(|c| {
            c["arguments"]
                .as_object()
                .unwrap()
                .values()
                .any(|v| v.is_array() || v.is_f64())
        })
    });
    assert!(
        typed.count() >= 3,
        "few lists or floats among the API requests"
    );
    let small = [
        "--tools",
        "examples/pace/tools.json",
        "--tools-in-prompt",
        "--epochs",
        "1",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--block",
        "2048",
        "--vocab",
        "300",
        "--quiet",
        "--json",
    ];
    let (train_file, aug) = (d("data/train.jsonl"), d("aug.jsonl"));
    // An evaluation set (BFCL items) made of two training requests, one shouted and one only
    // sharing its first eight words: `--exclude-overlap` must leave both out of the run.
    let requests: Vec<String> = std::fs::read_to_string(&train_file)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["request"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let long = requests
        .iter()
        .find(|r| r.split_whitespace().count() >= 10)
        .expect("a request of ten words");
    let eight: Vec<&str> = long.split_whitespace().take(8).collect();
    let eval_items = [
        (requests[0].to_uppercase() + "!"),
        format!("so {} and more", eight.join(" ")),
    ];
    let eval_lines: Vec<String> = eval_items
        .iter()
        .enumerate()
        .map(|(i, q)| serde_json::json!({"id": format!("held_{i}"), "question": [[{"role": "user", "content": q}]], "function": []}).to_string())
        .collect();
    std::fs::write(d("held.json"), eval_lines.join("\n")).unwrap();
    let held = d("held.json");
    let mut args = vec!["train", "--data", &train_file];
    let out = d("planner");
    args.extend(["--data", &aug, "--out", &out, "--exclude-overlap", &held]);
    args.extend(small);
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d("planner/planner.json")).unwrap()).unwrap();
    let (train, cal, test) = (
        meta["training"]["train_traces"].as_u64().unwrap() as usize,
        report["calibration"]["n"].as_u64().unwrap() as usize,
        report["test"]["n"].as_u64().unwrap() as usize,
    );
    let excluded = &report["excluded_overlap"];
    let (whole, ngram) = (
        excluded["whole"].as_u64().unwrap() as usize,
        excluded["ngram"].as_u64().unwrap() as usize,
    );
    assert!(whole >= 1 && ngram >= 1, "{excluded}");
    assert_eq!(excluded["eval_requests_hit"], 2, "{excluded}");
    assert_eq!(train + cal + test + whole + ngram, total, "{report}");
    assert!(cal > 0 && test > 0 && train > cal + test, "{report}");
    // An evaluation path that is not there: named, exit 2, before any training.
    let missing = d("no-such-eval.json");
    let o = plansmith(&[
        "train",
        "--data",
        &train_file,
        "--tools",
        "examples/pace/tools.json",
        "--out",
        &out,
        "--exclude-overlap",
        &missing,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such-eval.json"), "{}", stderr(&o));

    // The default floor is the guarantee (at most 1% wrong among accepted plans, 95% sure). A
    // split this small cannot certify it: the planner accepts nothing, escalates, and the
    // report says how many calibration plans it would need.
    let fit = &report["floor_fit"];
    assert_eq!(fit["rule"], "guaranteed", "{fit}");
    assert_eq!(fit["alpha"], 0.01, "{fit}");
    assert_eq!(fit["certified"], false, "{fit}");
    assert!(fit["needed"].as_u64().unwrap() > cal as u64, "{fit}");
    assert_eq!(meta["floor_fit"]["needed"], fit["needed"]);
    let o = plansmith(&["plan", "--planner", &out, "--json", "open mail"]);
    assert!(stdout(&o).contains("accepts nothing"), "{}", stdout(&o));
    // The line says how much prompt the model read (the tools prompt counts).
    let line: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(line["prompt_tokens"].as_u64().unwrap() > 2, "{line}");
    // `calibrate` refits under mixle's rule on request, and refuses rates no floor can honour.
    let cal_file = d("data/calibration.jsonl");
    let zero_wrong = d("planner-zero-wrong");
    let args = [
        "calibrate",
        "--planner",
        &out,
        "--calibration",
        &cal_file,
        "--out",
        &zero_wrong,
        "--json",
    ];
    let o = plansmith(&[&args[..], &["--target-precision", "1"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let refit: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(refit["floor_fit"]["rule"], "empirical", "{refit}");
    assert_eq!(refit["floor_fit"]["certified"], true, "{refit}");
    // A finished calibration leaves no journal behind in the planner it read.
    assert!(!std::path::Path::new(&out)
        .join("calibration-journal.jsonl")
        .exists());
    // `--copy` refits under another copy policy, which the new planner.json records (the
    // tiny planner copies free strings; `none` lifts that) and the source keeps its own.
    let uncopied = d("planner-no-copy");
    let o = plansmith(&[
        "calibrate",
        "--planner",
        &out,
        "--calibration",
        &cal_file,
        "--out",
        &uncopied,
        "--target-precision",
        "1",
        "--copy",
        "none",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let policy = |dir: &str| {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{dir}/planner.json")).unwrap())
                .unwrap();
        m["policy"]["copy"]["rule"].clone()
    };
    assert_eq!(policy(&uncopied), "none");
    assert_eq!(policy(&out), "free_strings");
    // `--confidence auto` lets the split choose among the three scores, and says so; an
    // unknown score is refused with the choices.
    let o = plansmith(
        &[
            &args[..],
            &["--target-precision", "1", "--confidence", "auto"],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let auto: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(auto["floor_fit"]["modes_tried"], 3, "{auto}");
    assert!(
        ["chosen_tokens", "all_tokens", "weakest_token"]
            .contains(&auto["confidence"].as_str().unwrap()),
        "{auto}"
    );
    let o = plansmith(&[&args[..], &["--confidence", "best"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("auto"), "{}", stderr(&o));
    for bad in [
        &["--max-wrong", "1.5"][..],
        &["--certainty", "1"],
        &["--max-wrong", "0.1", "--target-precision", "1"],
    ] {
        let o = plansmith(&[&args[..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(bad[0]), "{bad:?}: {}", stderr(&o));
    }

    // A broken third line: the file and line are named, exit 2.
    let text = std::fs::read_to_string(d("aug.jsonl")).unwrap();
    let mut broken: Vec<&str> = text.lines().take(5).collect();
    broken[2] = "{\"request\": \"open mail\", \"calls\": [";
    std::fs::write(d("broken.jsonl"), broken.join("\n")).unwrap();
    let broken_path = d("broken.jsonl");
    let mut args = vec!["train", "--data", &broken_path, "--out", &out];
    args.extend(small);
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("broken.jsonl") && stderr(&o).contains('3'),
        "{}",
        stderr(&o)
    );

    // A trace whose own catalog is malformed: the file and the trace are named, exit 2.
    let bad_tools = r#"{"request":"open mail","calls":[{"name":"open","arguments":{"target":"mail"}}],"tools":[{"name":"open","parameters":{"type":"object","properties":{"x":{"not":{}}}}}]}"#;
    std::fs::write(
        d("bad-tools.jsonl"),
        format!("{}\n{bad_tools}\n", broken[0]),
    )
    .unwrap();
    let bad_path = d("bad-tools.jsonl");
    let mut args = vec![
        "train",
        "--data",
        &bad_path,
        "--calibration",
        &bad_path,
        "--out",
        &out,
    ];
    args.extend(small);
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("bad-tools.jsonl") && err.contains("trace 2"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // Piece dropout: recorded in the planner; a rate outside [0, 1) or a char codec, exit 2.
    let dropout_out = d("planner-dropout");
    let mut args = vec!["train", "--data", &train_file, "--out", &dropout_out];
    args.extend(small);
    args.extend(["--piece-dropout", "0.1"]);
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d("planner-dropout/planner.json")).unwrap())
            .unwrap();
    assert_eq!(meta["training"]["piece_dropout"], 0.1);
    for bad in [
        &["--piece-dropout", "1"][..],
        &["--piece-dropout", "0.1", "--codec", "char"],
    ] {
        let mut args = vec!["train", "--data", &train_file, "--out", &dropout_out];
        args.extend(small);
        args.extend(bad);
        let o = plansmith(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--piece-dropout"), "{}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `score` judges a given plan the way the gate would; `sample` draws plans (seeded), keeping
/// invalid ones.
#[test]
fn score_and_sample_commands() {
    let request = "click the Save button";
    let good = "perform(action=click; target.type=ui_element; target.label=Save)";
    let o = plansmith(&["score", "--request", request, "--json", good]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["valid"].clone(), v["would_accept"].clone()),
        (serde_json::json!(true), serde_json::json!(true)),
        "{v}"
    );
    let o = plansmith(&[
        "score",
        "--request",
        request,
        "--json",
        &good.replace("Save", "Cancel"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["violations"][0].as_str().unwrap().contains("Cancel"),
        "{v}"
    );
    // an invalid plan is one the planner never writes: no score, and why
    assert!(v["score"].is_null(), "{v}");
    assert!(v["unscored"].as_str().unwrap().contains("invalid"), "{v}");
    assert_eq!(v["would_accept"], false, "{v}");
    let o = plansmith(&["score", "--request", request, "perform(action="]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot parse plan"), "{}", stderr(&o));

    let args = [
        "sample",
        "-n",
        "3",
        "--seed",
        "5",
        "--temperature",
        "2",
        "--json",
        "open safari",
    ];
    let o = plansmith(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for l in &lines {
        assert_eq!(l["valid"].as_bool().unwrap(), l["score"].is_number(), "{l}");
    }
    assert_eq!(stdout(&plansmith(&args)), stdout(&o), "seeded");
    for bad in [
        &["sample", "-n", "0", "x"][..],
        &["sample", "-n", "65", "x"],
        &["sample", "--temperature", "-1", "x"],
    ] {
        let o = plansmith(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
}

/// `train` with no tuning flags uses the embedded planner's settings and says so: the catalog's
/// signatures in the prompt, a block fitted to the data, epochs scaled to its size.
#[test]
fn train_defaults_are_the_embedded_planners_and_are_printed() {
    let dir = std::env::temp_dir().join(format!("plansmith-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
    let o = plansmith(&["data", "pace", "--out", &d("data"), "--n", "150"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Only the model is shrunk (and the epochs, for time): every other setting is a default.
    let tiny = ["--d-model", "32", "--layers", "1", "--heads", "2"];
    let train_file = d("data/train.jsonl");
    for (extra, prompt) in [
        (&[][..], "catalog in the prompt: signatures"),
        (&["--no-tools-in-prompt"][..], "catalog in the prompt: none"),
    ] {
        let out = d("planner");
        let mut args = vec![
            "train",
            "--data",
            &train_file,
            "--tools",
            "examples/pace/tools.json",
            "--out",
            &out,
            "--quiet",
        ];
        args.extend(tiny);
        args.extend(extra);
        let o = plansmith(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains(prompt), "{text}");
        assert!(text.contains("confidence: all_tokens"), "{text}");
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d("planner/planner.json")).unwrap())
                .unwrap();
        // 150 traces less the held-out splits: 30 epochs, the most the default gives.
        assert_eq!(meta["training"]["train"]["epochs"], 30, "{meta}");
        let block = meta["model"]["block"].as_u64().unwrap();
        assert!(block >= 192 && block.is_multiple_of(64), "{block}");
        assert!(meta["model"]["vocab"].as_u64().unwrap() <= 512);
        assert_eq!(meta["tools_in_prompt"], extra.is_empty());
    }
    // Tool pointers need the signatures-only prompt.
    let o = plansmith(&[
        "train",
        "--data",
        &d("data/train.jsonl"),
        "--tools",
        "examples/pace/tools.json",
        "--out",
        &d("p2"),
        "--tools-in-prompt",
        "--tool-pointers",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tool-pointers"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}

/// `plansmith ... | head`: a reader that stops early ends the command quietly (status 141, as a
/// process killed by SIGPIPE), not with a panic about the broken pipe.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::io::Read;
    let dir = std::env::temp_dir().join(format!("plansmith-pipe-{}", std::process::id()));
    let data = dir.join("data");
    let o = plansmith(&[
        "data",
        "pace",
        "--out",
        data.to_str().unwrap(),
        "--n",
        "300",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut child = Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(["data", "export", "--format", "openai", "--tools"])
        .arg("examples/pace/tools.json")
        .arg("--data")
        .arg(data.join("train.jsonl"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Far more than a pipe holds is written (~1 MB); read a little and hang up.
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(141), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A request longer than the planner's context is an error that says so, not a score of -inf.
#[test]
fn score_refuses_a_request_longer_than_the_context() {
    let request = format!("open {}", "word ".repeat(3000));
    let o = plansmith(&[
        "score",
        "--request",
        &request,
        "open(target.type=app; target.label=word)",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("too long"), "{}", stderr(&o));
}

/// LoRA settings no run can use are refused before the base model is even opened.
#[test]
fn bad_lora_settings_are_refused_before_the_model_loads() {
    let dir = std::env::temp_dir().join(format!("plansmith-lora-args-{}", std::process::id()));
    let data = dir.join("data");
    let o = plansmith(&["data", "pace", "--out", data.to_str().unwrap(), "--n", "60"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let train = data.join("train.jsonl");
    for (flag, value) in [("--lora-dropout", "1.5"), ("--lora-rank", "0")] {
        let o = plansmith(&[
            "train",
            "--base",
            "no-such-model.gguf",
            "--data",
            train.to_str().unwrap(),
            "--tools",
            "examples/pace/tools.json",
            "--out",
            dir.join("out").to_str().unwrap(),
            flag,
            value,
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(flag) && !err.contains("no-such-model"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A missing data file is named once with its reason, not with the reason repeated.
#[test]
fn a_missing_data_file_names_the_path_and_the_reason_once() {
    let o = plansmith(&[
        "train",
        "--data",
        "no-such-traces.jsonl",
        "--tools",
        "examples/pace/tools.json",
        "--out",
        "target/never-written",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("no-such-traces.jsonl"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

/// A catalog the grammar cannot constrain is refused with its reason said once (the grammar
/// error used to print as `grammar: X: X`).
#[test]
fn a_grammar_refusal_is_said_once() {
    let dir = std::env::temp_dir().join(format!("plansmith-grammar-once-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"name":"fly","parameters":{"type":"object","properties":{"code":
            {"type":"string","pattern":"^[A-Z]{3}$","const":"xxxx"}},"required":["code"]}}]"#,
    )
    .unwrap();
    let o = plansmith(&["plan", "--tools", tools.to_str().unwrap(), "fly to xxxx"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let first_line = err.lines().next().unwrap_or_default();
    assert!(first_line.contains("grammar"), "{err}");
    let reason = first_line.rsplit(": ").next().unwrap();
    assert_eq!(err.matches(reason).count(), 1, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

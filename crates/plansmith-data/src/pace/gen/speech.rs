//! Intents that speak or remember: compose, clarify, say, query_memory, wait, schedule.

use super::*;

pub(super) fn compose(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("compose", Style::Imperative);
    // (format, template); {r} recipient, {c} topic, {m} message.
    let rows: &[(&str, &str)] = &[
        ("email", "write an email to {r} about {c}"),
        ("email", "email {r} about {c}"),
        ("email", "draft an email to {r} about {c}"),
        ("email", "send {r} an email about {c}"),
        ("email", "compose an email about {c}"),
        ("email", "write an email about {c}"),
        ("email", "write an email to {r} saying {m}"),
        ("email", "email {r} that {m}"),
        ("message", "text {r} that {m}"),
        ("message", "message {r} saying {m}"),
        ("message", "send {r} a message saying {m}"),
        ("message", "send a message to {r} saying {m}"),
        ("message", "tell {r} that {m}"),
        ("message", "text {r} about {c}"),
        ("reply", "reply to {r} saying {m}"),
        ("reply", "reply to this email saying {m}"),
        ("reply", "respond to {r} with {m}"),
        ("reply", "answer {r} that {m}"),
        ("reply", "reply with {m}"),
        ("reply", "reply to {r} about {c}"),
        ("note", "make a note that {m}"),
        ("note", "take a note about {c}"),
        ("note", "note that {m}"),
        ("note", "write a note about {c}"),
        ("note", "jot down that {m}"),
        ("note", "add a note saying {m}"),
        ("note", "create a note about {c}"),
        ("post", "draft a post about {c}"),
        ("post", "write a post about {c}"),
        ("post", "post about {c}"),
        ("post", "write a tweet about {c}"),
        ("post", "compose a post saying {m}"),
        ("summary", "write a summary of {c}"),
        ("summary", "write up a summary of {c}"),
        ("summary", "draft a summary of {c}"),
        ("summary", "create a summary about {c}"),
        ("document", "write a document about {c}"),
        ("document", "start a document on {c}"),
        ("document", "create a doc about {c}"),
        ("document", "draft a document about {c}"),
    ];
    let (format, tpl) = *rng.pick(rows);
    d.tpl = tpl.to_string();
    let mut args = vec![("format", A::Enum(format))];
    if tpl.contains("{c}") {
        d.slot("c", "topic", *rng.pick(COMPOSE_TOPICS));
    } else {
        d.slot("m", "message", *rng.pick(COMPOSE_MESSAGES));
    }
    args.push((
        "content",
        A::Slot(if tpl.contains("{c}") { "c" } else { "m" }),
    ));
    if tpl.contains("{r}") {
        d.slot("r", "contact", contact_name(rng));
        args.push(("recipient", A::Slot("r")));
    }
    d.calls.push(call("compose", args));
    d
}

/// Fill `{f}` file, `{d}` folder, `{c}` contact, `{a}` app, `{w}` window or to-do, `{s}`
/// setting, `{t}` time placeholders of a clarify phrase with slots.
pub(super) fn fill_placeholders(
    d: &mut Draft,
    rng: &mut Rng,
    phrase: &str,
    missing: bool,
) -> String {
    let mut out = phrase.to_string();
    for (ph, kind) in [
        ("{f}", "file"),
        ("{d}", "folder"),
        ("{c}", "contact"),
        ("{a}", "app"),
        ("{w}", "w"),
        ("{s}", "setting"),
        ("{t}", "when"),
    ] {
        if !out.contains(ph) {
            continue;
        }
        let (kind, value) = match kind {
            "file" => (kind, file_name(rng)),
            "folder" => (kind, rng.pick(FOLDERS).to_string()),
            "contact" => (kind, contact_name(rng)),
            "app" => (kind, rng.pick(APPS).to_string()),
            "w" if missing => ("todo", rng.pick(SCHEDULE_WHATS).to_string()),
            "w" => ("window", rng.pick(WINDOWS).to_string()),
            "setting" => ("level_setting", rng.pick(LEVEL_SETTINGS).to_string()),
            _ => ("when", rng.pick(SCHEDULE_WHENS).0.to_string()),
        };
        let name = &ph[1..2];
        d.slot(name, kind, value);
        out = out.replace(ph, &format!("{{{name}}}"));
    }
    out
}

pub(super) fn clarify_confirmation(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("clarify.confirmation", Style::Imperative);
    let phrase = *rng.pick(DESTRUCTIVE);
    d.tpl = fill_placeholders(&mut d, rng, phrase, false);
    d.calls.push(call(
        "clarify",
        vec![("kind", A::Enum("confirmation")), ("question", A::Core)],
    ));
    d
}

pub(super) fn clarify_missing(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("clarify.missing_value", Style::Imperative);
    let phrase = *rng.pick(MISSING);
    d.tpl = fill_placeholders(&mut d, rng, phrase, true);
    if d.tpl.starts_with("remind") {
        d.style = Style::ImperativeMe;
    }
    d.calls.push(call(
        "clarify",
        vec![("kind", A::Enum("missing_value")), ("question", A::Core)],
    ));
    d
}

pub(super) fn clarify_choice(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("clarify.choice", Style::Imperative);
    let (kind, verb): (&'static str, &[&str]) = *rng.pick(&[
        ("app", &["open {X}", "launch {X}", "start {X}"][..]),
        ("ui", &["click {X}", "tap {X}", "click on {X}"][..]),
        ("file", &["open {X}", "pull up {X}", "delete {X}"][..]),
        ("url", &["go to {X}", "open {X}", "visit {X}"][..]),
        (
            "contact",
            &["email {X}", "text {X}", "message {X}", "call {X}"][..],
        ),
        (
            "level",
            &[
                "set the volume to {X}",
                "set the brightness to {X}",
                "change the font size to {X}",
            ][..],
        ),
    ]);
    let n = if rng.chance(0.25) { 3 } else { 2 };
    let mut values: Vec<String> = Vec::new();
    while values.len() < n {
        let v = match kind {
            "app" => rng.pick(APPS).to_string(),
            "ui" => loop {
                let l = rng.pick(UI_LABELS).to_string();
                if !has_word(&l, &["or"]) {
                    break l;
                }
            },
            "file" => file_name(rng),
            "url" => rng.pick(URLS).to_string(),
            "contact" => contact_name(rng),
            _ => rng.range(1, 100).to_string(),
        };
        if !values.iter().any(|x| x.eq_ignore_ascii_case(&v)) {
            values.push(v);
        }
    }
    let names = ["a", "b", "c"];
    for (name, v) in names.iter().zip(&values) {
        d.slot(name, kind, v.clone());
    }
    let alts = if n == 3 {
        (*rng.pick(&["{a}, {b} or {c}", "{a}, {b}, or {c}"])).to_string()
    } else {
        (*rng.pick(&["{a} or {b}", "either {a} or {b}"])).to_string()
    };
    d.tpl = rng.pick(verb).replace("{X}", &alts);
    let choices = names[..n].iter().map(|n| A::Slot(n)).collect();
    d.calls.push(call(
        "clarify",
        vec![
            ("kind", A::Enum("choice")),
            ("question", A::Core),
            ("choices", A::Arr(choices)),
        ],
    ));
    d
}

pub(super) fn say(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("say", Style::Imperative);
    d.slot("t", "text", *rng.pick(TEXTS));
    d.tpl = rng
        .pick(&[
            "say {t}",
            "say out loud {t}",
            "announce {t}",
            "repeat after me {t}",
            "say the words {t}",
            "tell everyone {t}",
            "say {t} out loud",
            "speak the phrase {t}",
        ])
        .to_string();
    d.calls.push(call("say", vec![("text", A::Slot("t"))]));
    d
}

pub(super) fn query_memory(rng: &mut Rng) -> Draft {
    let tpl = *rng.pick(&[
        "what did I tell you about {q}",
        "do you remember {q}",
        "what's {q}",
        "what was {q} again",
        "remind me what {q} is",
        "recall {q}",
        "what do you know about {q}",
        "look up {q} in your memory",
        "check your memory for {q}",
        "what did I say {q} was",
        "tell me {q} from memory",
    ]);
    let mut d = Draft::new("query_memory", style_of(tpl));
    if d.style == Style::Imperative {
        d.style = Style::ImperativeMe;
    }
    d.slot("q", "memory", *rng.pick(MEMORY_QUERIES));
    d.tpl = tpl.to_string();
    d.calls
        .push(call("query_memory", vec![("query", A::Slot("q"))]));
    d
}

pub(super) fn wait(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("wait", Style::Imperative);
    match rng.below(10) {
        0..=4 => {
            d.slot("c", "condition", *rng.pick(WAIT_CONDITIONS));
            d.tpl = rng
                .pick(&[
                    "wait until {c}",
                    "hold on until {c}",
                    "pause until {c}",
                    "don't continue until {c}",
                    "wait till {c}",
                    "keep waiting until {c}",
                ])
                .to_string();
            d.calls
                .push(call("wait", vec![("condition", A::Slot("c"))]));
        }
        5..=6 => {
            d.slot("c", "condition", *rng.pick(WAIT_CONDITIONS));
            d.slot("n", "seconds", rng.range(5, 900).to_string());
            d.tpl = rng
                .pick(&[
                    "wait until {c}, up to {n} seconds",
                    "wait until {c} but no longer than {n} seconds",
                    "wait up to {n} seconds until {c}",
                    "give it {n} seconds max until {c}",
                ])
                .to_string();
            d.calls.push(call(
                "wait",
                vec![
                    ("condition", A::Slot("c")),
                    ("timeout_seconds", A::Int("n")),
                ],
            ));
        }
        7..=8 => {
            d.slot("cs", "seconds", format!("{} seconds", rng.range(2, 600)));
            d.tpl = rng
                .pick(&[
                    "wait {cs}",
                    "pause for {cs}",
                    "hold on for {cs}",
                    "give it {cs}",
                    "wait for {cs}",
                ])
                .to_string();
            d.calls.push(call(
                "wait",
                vec![
                    ("condition", A::Slot("cs")),
                    ("timeout_seconds", A::Int("cs")),
                ],
            ));
        }
        _ => {
            let unit = rng.pick(&["minutes", "hours"]);
            d.slot("cs", "duration", format!("{} {unit}", rng.range(2, 59)));
            d.tpl = rng
                .pick(&[
                    "wait {cs}",
                    "pause for {cs}",
                    "hold on for {cs}",
                    "wait for {cs}",
                ])
                .to_string();
            d.calls
                .push(call("wait", vec![("condition", A::Slot("cs"))]));
        }
    }
    d
}

pub(super) fn schedule(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("schedule", Style::ImperativeMe);
    d.slot("w", "todo", *rng.pick(SCHEDULE_WHATS));
    let (when, bare_ok) = *rng.pick(SCHEDULE_WHENS);
    d.slot("t", "when", when);
    let mut tpls = vec![
        "remind me to {w} {t}",
        "remind me {t} to {w}",
        "{t}, remind me to {w}",
        "set a reminder to {w} {t}",
        "set a reminder {t} to {w}",
        "don't let me forget to {w} {t}",
        "add a reminder to {w} {t}",
        "ping me {t} to {w}",
        "remind me to {w}, {t}",
    ];
    if bare_ok {
        tpls.extend(["schedule {w} for {t}", "plan to {w} for {t}"]);
    }
    d.tpl = rng.pick(&tpls).to_string();
    d.calls.push(call(
        "schedule",
        vec![("when", A::Slot("t")), ("what", A::Slot("w"))],
    ));
    d
}

// ---------------------------------------------------------------------------------------------
// Wrappers and rendering

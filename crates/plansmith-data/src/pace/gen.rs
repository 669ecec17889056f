//! Request templates and their plans.
//!
//! A draft is a core template such as `"double-click {e}"` with named slots, the calls it
//! means (whose free strings point at slots, so every value is copied from the request), and a
//! style that decides which wrappers (politeness, fillers, trailing "please") may surround it.
//! [`realize`] wraps, cases and renders a draft into a request and its plan.

use serde_json::{Map, Value};

use plansmith_core::{Call, Plan};

use super::vocab::*;
use crate::rng::Rng;

/// How an argument value is obtained.
#[derive(Debug, Clone)]
pub(crate) enum A {
    /// A constant (an enum value chosen by the template's words).
    Enum(&'static str),
    /// An enum value spelled by a slot (lowercased: `DOWN` -> `down`).
    EnumOf(&'static str),
    /// A free string copied from a slot.
    Slot(&'static str),
    /// An integer spelled by a slot's leading digits.
    Int(&'static str),
    /// The core phrase (the request without wrappers or trailing punctuation).
    Core,
    Obj(Vec<(&'static str, A)>),
    Arr(Vec<A>),
}

#[derive(Debug, Clone)]
pub(crate) struct CallSpec {
    pub name: &'static str,
    pub args: Vec<(&'static str, A)>,
}

pub(crate) fn call(name: &'static str, args: Vec<(&'static str, A)>) -> CallSpec {
    CallSpec { name, args }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// An instruction: every wrapper applies.
    Imperative,
    /// An instruction about the user ("remind me ..."): no "let's" / "I want to" wrappers.
    ImperativeMe,
    /// A question: fillers only, often a question mark.
    Question,
}

#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub intent: &'static str,
    pub tpl: String,
    /// (name, kind, value); kinds name the vocabulary a value came from.
    pub slots: Vec<(String, &'static str, String)>,
    pub calls: Vec<CallSpec>,
    pub style: Style,
}

impl Draft {
    pub(crate) fn new(intent: &'static str, style: Style) -> Draft {
        Draft {
            intent,
            tpl: String::new(),
            slots: Vec::new(),
            calls: Vec::new(),
            style,
        }
    }

    pub(crate) fn slot(&mut self, name: &str, kind: &'static str, value: impl Into<String>) {
        self.slots.push((name.to_string(), kind, value.into()));
    }
}

/// A realized example.
#[derive(Debug, Clone)]
pub(crate) struct Realized {
    pub intent: &'static str,
    pub request: String,
    pub plan: Plan,
    /// The request with every slot replaced by `<kind>`, lowercased.
    pub skeleton: String,
    /// The same for the core phrase only: the template.
    pub core_skeleton: String,
    pub slots: Vec<(&'static str, String)>,
}

// ---------------------------------------------------------------------------------------------
// Entities

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ety {
    Ui,
    App,
    File,
    Url,
    Window,
    Contact,
    Text,
}

impl Ety {
    pub fn as_str(self) -> &'static str {
        match self {
            Ety::Ui => "ui_element",
            Ety::App => "app",
            Ety::File => "file",
            Ety::Url => "url",
            Ety::Window => "window",
            Ety::Contact => "contact",
            Ety::Text => "text",
        }
    }
}

/// Where an entity is mentioned: what a bare name means there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Pointer actions: a bare name is a UI element; apps need a cue ("the Zoom app").
    Act,
    /// `open`: a bare name is an app; UI elements need a cue ("the Privacy tab").
    Open,
    /// "scroll down in ...": a bare name is an app; UI elements are panels or lists.
    Within,
}

fn file_name(rng: &mut Rng) -> String {
    format!("{}.{}", rng.pick(FILE_STEMS), rng.pick(FILE_EXTS))
}

fn contact_name(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=9 => rng.pick(FIRST_NAMES).to_string(),
        10..=16 => format!("{} {}", rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES)),
        _ => rng.pick(FAMILY).to_string(),
    }
}

fn has_word(label: &str, words: &[&str]) -> bool {
    let lower = label.to_lowercase();
    lower.split_whitespace().any(|w| words.contains(&w))
}

/// Pick an entity of type `ty`: returns the phrase (with `{name}` where the label goes) and
/// adds the label slot to `d`. Labels containing any of `avoid` (as words) are redrawn.
fn entity(d: &mut Draft, rng: &mut Rng, ty: Ety, ctx: Ctx, name: &str, avoid: &[&str]) -> String {
    let (phrases, label, kind): (&[&str], String, &'static str) = loop {
        let (phrases, label, kind): (&[&str], String, &'static str) = match (ty, ctx) {
            (Ety::Ui, Ctx::Act) => (
                &[
                    "{}",
                    "{}",
                    "{}",
                    "the {} button",
                    "the {} button",
                    "the {} tab",
                    "the {} icon",
                    "the {} option",
                    "the {} menu item",
                ],
                rng.pick(UI_LABELS).to_string(),
                "ui",
            ),
            (Ety::Ui, Ctx::Open) => (
                &[
                    "the {} tab",
                    "the {} menu",
                    "the {} panel",
                    "the {} page",
                    "the {} section",
                ],
                rng.pick(UI_LABELS).to_string(),
                "ui",
            ),
            (Ety::Ui, Ctx::Within) => (
                &["the {} panel", "the {} list", "the {} pane"],
                rng.pick(UI_LABELS).to_string(),
                "ui",
            ),
            (Ety::App, Ctx::Act) => (
                &[
                    "the {} app",
                    "{} in the dock",
                    "the {} icon in the dock",
                    "the {} application",
                ],
                rng.pick(APPS).to_string(),
                "app",
            ),
            (Ety::App, _) => (
                &[
                    "{}",
                    "{}",
                    "{}",
                    "the {} app",
                    "the {} application",
                    "{} app",
                ],
                rng.pick(APPS).to_string(),
                "app",
            ),
            (Ety::File, _) => {
                if rng.chance(0.25) {
                    (
                        &["the {} folder", "my {} folder"],
                        rng.pick(FOLDERS).to_string(),
                        "folder",
                    )
                } else {
                    (
                        &["{}", "{}", "the file {}", "the document {}", "the {} file"],
                        file_name(rng),
                        "file",
                    )
                }
            }
            (Ety::Url, _) => (
                &[
                    "{}",
                    "{}",
                    "the link {}",
                    "the page {}",
                    "the website {}",
                    "the site {}",
                ],
                rng.pick(URLS).to_string(),
                "url",
            ),
            (Ety::Window, _) => (
                &[
                    "the {} window",
                    "the {} window",
                    "the window called {}",
                    "the window named {}",
                ],
                rng.pick(WINDOWS).to_string(),
                "window",
            ),
            (Ety::Contact, _) => (
                &[
                    "contact {}",
                    "the contact {}",
                    "{}'s contact card",
                    "{} in my contacts",
                    "{}'s contact",
                ],
                contact_name(rng),
                "contact",
            ),
            (Ety::Text, _) => (
                &[
                    "the text {}",
                    "the word {}",
                    "the phrase {}",
                    "the words {}",
                ],
                rng.pick(SCREEN_TEXTS).to_string(),
                "screen_text",
            ),
        };
        if !has_word(&label, avoid) {
            break (phrases, label, kind);
        }
    };
    d.slot(name, kind, label);
    rng.pick(phrases).replace("{}", &format!("{{{name}}}"))
}

fn entity_ref(ty: Ety, slot: &'static str) -> A {
    A::Obj(vec![
        ("type", A::Enum(ty.as_str())),
        ("label", A::Slot(slot)),
    ])
}

fn pick_type(rng: &mut Rng, weighted: &[(Ety, f64)]) -> Ety {
    let w: Vec<f64> = weighted.iter().map(|(_, w)| *w).collect();
    weighted[rng.weighted(&w)].0
}

// ---------------------------------------------------------------------------------------------
// Intents

pub(crate) type IntentFn = fn(&mut Rng) -> Draft;

/// (intent name, verb, weight, generator).
pub(crate) const INTENTS: &[(&str, &str, f64, IntentFn)] = &[
    ("perform.click", "perform", 9.0, click),
    ("perform.double_click", "perform", 5.0, double_click),
    ("perform.right_click", "perform", 5.0, right_click),
    ("perform.type", "perform", 8.0, type_text),
    ("perform.key", "perform", 6.0, key),
    ("perform.scroll", "perform", 6.0, scroll),
    ("perform.drag", "perform", 5.0, drag),
    ("perform.multi_select", "perform", 4.0, multi_select),
    ("perform.hover", "perform", 4.0, hover),
    ("open", "open", 10.0, open),
    ("set", "set", 9.0, set),
    ("query", "query", 10.0, query),
    ("compose", "compose", 8.0, compose),
    ("clarify.confirmation", "clarify", 4.0, clarify_confirmation),
    ("clarify.missing_value", "clarify", 4.0, clarify_missing),
    ("clarify.choice", "clarify", 4.0, clarify_choice),
    ("say", "say", 4.0, say),
    ("query_memory", "query_memory", 4.0, query_memory),
    ("wait", "wait", 4.0, wait),
    ("schedule", "schedule", 5.0, schedule),
];

fn pointer(
    rng: &mut Rng,
    intent: &'static str,
    action: &'static str,
    verbs: &[&str],
    types: &[(Ety, f64)],
) -> Draft {
    let mut d = Draft::new(intent, Style::Imperative);
    let ty = pick_type(rng, types);
    let e = entity(&mut d, rng, ty, Ctx::Act, "e", &[]);
    d.tpl = rng.pick(verbs).replace("{e}", &e);
    d.calls.push(call(
        "perform",
        vec![("action", A::Enum(action)), ("target", entity_ref(ty, "e"))],
    ));
    d
}

const ALL_TYPES: &[(Ety, f64)] = &[
    (Ety::Ui, 40.0),
    (Ety::App, 10.0),
    (Ety::File, 12.0),
    (Ety::Url, 10.0),
    (Ety::Window, 8.0),
    (Ety::Contact, 8.0),
    (Ety::Text, 12.0),
];

fn click(rng: &mut Rng) -> Draft {
    let verbs = [
        "click {e}",
        "click on {e}",
        "tap {e}",
        "tap on {e}",
        "single-click {e}",
        "left-click {e}",
        "click {e} once",
    ];
    pointer(rng, "perform.click", "click", &verbs, ALL_TYPES)
}

fn double_click(rng: &mut Rng) -> Draft {
    let verbs = [
        "double-click {e}",
        "double click {e}",
        "double click on {e}",
        "double-click on {e}",
        "double-tap {e}",
        "give {e} a double click",
    ];
    let types = [
        (Ety::File, 35.0),
        (Ety::Ui, 20.0),
        (Ety::App, 15.0),
        (Ety::Text, 15.0),
        (Ety::Window, 5.0),
        (Ety::Url, 5.0),
        (Ety::Contact, 5.0),
    ];
    pointer(rng, "perform.double_click", "double_click", &verbs, &types)
}

fn right_click(rng: &mut Rng) -> Draft {
    let verbs = [
        "right-click {e}",
        "right click {e}",
        "right click on {e}",
        "right-click on {e}",
        "show the context menu for {e}",
        "ctrl-click {e}",
        "secondary-click {e}",
    ];
    pointer(rng, "perform.right_click", "right_click", &verbs, ALL_TYPES)
}

fn hover(rng: &mut Rng) -> Draft {
    let verbs = [
        "hover over {e}",
        "mouse over {e}",
        "hover on {e}",
        "move the mouse over {e}",
        "put the cursor over {e}",
        "hover the mouse over {e}",
        "point at {e}",
    ];
    let types = [
        (Ety::Ui, 40.0),
        (Ety::Url, 15.0),
        (Ety::Text, 15.0),
        (Ety::App, 10.0),
        (Ety::File, 10.0),
        (Ety::Contact, 5.0),
        (Ety::Window, 5.0),
    ];
    pointer(rng, "perform.hover", "hover", &verbs, &types)
}

fn type_text(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.type", Style::Imperative);
    d.slot("t", "text", *rng.pick(TEXTS));
    if rng.chance(0.45) {
        d.tpl = rng
            .pick(&[
                "type {t}",
                "enter {t}",
                "type out {t}",
                "input {t}",
                "key in {t}",
                "write out {t}",
            ])
            .to_string();
        d.calls.push(call(
            "perform",
            vec![("action", A::Enum("type")), ("text", A::Slot("t"))],
        ));
    } else {
        d.slot("f", "field", *rng.pick(FIELDS));
        let field = rng
            .pick(&["the {f} field", "the {f} box", "the {f} field", "{f}"])
            .to_string();
        let tpl = *rng.pick(&[
            "type {t} into {F}",
            "type {t} in {F}",
            "enter {t} in {F}",
            "fill {F} with {t}",
            "in {F}, type {t}",
            "put {t} in {F}",
            "type {t} into {F}",
            "write {t} into {F}",
        ]);
        d.tpl = tpl.replace("{F}", &field);
        d.calls.push(call(
            "perform",
            vec![
                ("action", A::Enum("type")),
                ("target", entity_ref(Ety::Ui, "f")),
                ("text", A::Slot("t")),
            ],
        ));
    }
    d
}

fn key(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.key", Style::Imperative);
    d.slot("k", "key", *rng.pick(KEYS));
    if rng.chance(0.25) {
        d.slot("n", "count", rng.range(2, 10).to_string());
        d.tpl = rng
            .pick(&[
                "press {k} {n} times",
                "hit {k} {n} times",
                "press the {k} key {n} times",
                "hit the {k} key {n} times",
            ])
            .to_string();
        d.calls.push(call(
            "perform",
            vec![
                ("action", A::Enum("key")),
                ("keys", A::Slot("k")),
                ("amount", A::Int("n")),
            ],
        ));
    } else {
        d.tpl = rng
            .pick(&[
                "press {k}",
                "hit {k}",
                "press the {k} key",
                "hit the {k} key",
                "use the shortcut {k}",
                "use the keyboard shortcut {k}",
                "press the shortcut {k}",
                "do {k}",
            ])
            .to_string();
        d.calls.push(call(
            "perform",
            vec![("action", A::Enum("key")), ("keys", A::Slot("k"))],
        ));
    }
    d
}

fn scroll(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.scroll", Style::Imperative);
    let mut args = vec![("action", A::Enum("scroll"))];
    let tpl = match rng.below(10) {
        0 => {
            let (t, dir) = *rng.pick(&[
                ("scroll to the bottom", "down"),
                ("scroll to the top", "up"),
                ("scroll all the way down", "down"),
                ("scroll all the way up", "up"),
            ]);
            args.push(("direction", A::Enum(dir)));
            t.to_string()
        }
        1..=4 => {
            d.slot(
                "dir",
                "direction",
                *rng.pick(&["up", "down", "left", "right", "down", "up"]),
            );
            args.push(("direction", A::EnumOf("dir")));
            rng.pick(&[
                "scroll {dir}",
                "scroll {dir} a bit",
                "scroll {dir} a little",
                "scroll {dir} some more",
            ])
            .to_string()
        }
        _ => {
            d.slot(
                "dir",
                "direction",
                *rng.pick(&["up", "down", "left", "right", "down", "up"]),
            );
            d.slot("n", "count", rng.range(1, 20).to_string());
            args.push(("direction", A::EnumOf("dir")));
            args.push(("amount", A::Int("n")));
            rng.pick(&[
                "scroll {dir} {n}",
                "scroll {dir} {n} times",
                "scroll {dir} by {n}",
                "scroll {dir} {n} steps",
                "scroll {dir} {n} lines",
                "scroll {n} times {dir}",
            ])
            .to_string()
        }
    };
    d.tpl = tpl;
    if rng.chance(0.3) {
        let ty = pick_type(
            rng,
            &[
                (Ety::Window, 40.0),
                (Ety::App, 30.0),
                (Ety::Ui, 20.0),
                (Ety::File, 10.0),
            ],
        );
        let e = entity(&mut d, rng, ty, Ctx::Within, "e", &[]);
        d.tpl = if rng.chance(0.7) {
            format!("{} in {e}", d.tpl)
        } else {
            format!("in {e}, {}", d.tpl)
        };
        args.push(("target", entity_ref(ty, "e")));
    }
    d.calls.push(call("perform", args));
    d
}

const LINKING: &[&str] = &[
    "to", "into", "onto", "and", "through", "together", "between", "from", "over", "on",
];

fn drag(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.drag", Style::Imperative);
    let src = pick_type(
        rng,
        &[
            (Ety::File, 40.0),
            (Ety::Ui, 15.0),
            (Ety::Text, 15.0),
            (Ety::Url, 10.0),
            (Ety::Contact, 10.0),
            (Ety::App, 10.0),
        ],
    );
    let dst = pick_type(
        rng,
        &[
            (Ety::File, 40.0),
            (Ety::Window, 20.0),
            (Ety::App, 20.0),
            (Ety::Ui, 10.0),
            (Ety::Contact, 10.0),
        ],
    );
    let e = entity(&mut d, rng, src, Ctx::Act, "e", LINKING);
    let t = entity(&mut d, rng, dst, Ctx::Act, "d", LINKING);
    let tpl = *rng.pick(&[
        "drag {e} to {d}",
        "drag {e} into {d}",
        "drag {e} onto {d}",
        "drag and drop {e} onto {d}",
        "drag and drop {e} into {d}",
        "move {e} to {d}",
        "drop {e} onto {d}",
        "drag {e} over to {d}",
        "take {e} and drop it on {d}",
    ]);
    d.tpl = tpl.replace("{e}", &e).replace("{d}", &t);
    d.calls.push(call(
        "perform",
        vec![
            ("action", A::Enum("drag")),
            ("target", entity_ref(src, "e")),
            ("destination", entity_ref(dst, "d")),
        ],
    ));
    d
}

fn multi_select(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.multi_select", Style::Imperative);
    let ty = pick_type(
        rng,
        &[
            (Ety::File, 40.0),
            (Ety::Ui, 15.0),
            (Ety::Text, 20.0),
            (Ety::Contact, 15.0),
            (Ety::Url, 10.0),
        ],
    );
    let e = entity(&mut d, rng, ty, Ctx::Act, "e", LINKING);
    let t = entity(&mut d, rng, ty, Ctx::Act, "d", LINKING);
    let tpl = *rng.pick(&[
        "select everything from {e} to {d}",
        "select from {e} to {d}",
        "shift-select {e} through {d}",
        "select {e} through {d}",
        "highlight everything from {e} to {d}",
        "select all items between {e} and {d}",
        "multi-select {e} and {d}",
        "select both {e} and {d}",
        "select {e} together with {d}",
    ]);
    d.tpl = tpl.replace("{e}", &e).replace("{d}", &t);
    d.calls.push(call(
        "perform",
        vec![
            ("action", A::Enum("multi_select")),
            ("target", entity_ref(ty, "e")),
            ("destination", entity_ref(ty, "d")),
        ],
    ));
    d
}

fn open(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("open", Style::Imperative);
    let ty = pick_type(
        rng,
        &[
            (Ety::App, 35.0),
            (Ety::File, 20.0),
            (Ety::Url, 20.0),
            (Ety::Window, 10.0),
            (Ety::Contact, 7.0),
            (Ety::Ui, 8.0),
        ],
    );
    let e = entity(&mut d, rng, ty, Ctx::Open, "e", &[]);
    let verbs: &[&str] = match ty {
        Ety::App => &[
            "open {e}",
            "launch {e}",
            "start {e}",
            "fire up {e}",
            "bring up {e}",
            "pull up {e}",
            "get {e} running",
            "run {e}",
            "open up {e}",
        ],
        Ety::File => &[
            "open {e}",
            "show me {e}",
            "bring up {e}",
            "pull up {e}",
            "load {e}",
            "open up {e}",
        ],
        Ety::Url => &[
            "open {e}",
            "go to {e}",
            "visit {e}",
            "navigate to {e}",
            "take me to {e}",
            "load {e}",
            "pull up {e}",
            "browse to {e}",
        ],
        Ety::Window => &[
            "open {e}",
            "switch to {e}",
            "bring {e} to the front",
            "focus {e}",
            "show me {e}",
            "go to {e}",
            "jump to {e}",
        ],
        Ety::Contact => &["open {e}", "show me {e}", "pull up {e}", "bring up {e}"],
        _ => &["open {e}", "go to {e}", "switch to {e}", "show me {e}"],
    };
    d.tpl = rng.pick(verbs).replace("{e}", &e);
    d.calls
        .push(call("open", vec![("target", entity_ref(ty, "e"))]));
    d
}

fn setting_phrase(rng: &mut Rng, toggle: bool) -> &'static str {
    if toggle {
        rng.pick::<&str>(&["{s}", "{s}", "the {s}"])
    } else {
        rng.pick::<&str>(&["the {s}", "{s}", "my {s}"])
    }
}

fn set(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("set", Style::Imperative);
    let abs = [
        "set {S} to {v}",
        "change {S} to {v}",
        "turn {S} to {v}",
        "put {S} at {v}",
        "adjust {S} to {v}",
        "{S} to {v}",
        "set {S} at {v}",
        "bring {S} to {v}",
        "switch {S} to {v}",
    ];
    let (s, tpl) = match rng.below(20) {
        0..=6 => {
            d.slot("s", "toggle_setting", *rng.pick(TOGGLE_SETTINGS));
            d.slot("v", "on_off", *rng.pick(&["on", "off"]));
            let tpl = *rng.pick(&[
                "turn {v} {S}",
                "turn {S} {v}",
                "switch {v} {S}",
                "switch {S} {v}",
                "set {S} to {v}",
                "put {S} {v}",
                "{S} {v}",
                "flip {S} {v}",
                "toggle {S} {v}",
            ]);
            (setting_phrase(rng, true), tpl.to_string())
        }
        7..=14 => {
            d.slot("s", "level_setting", *rng.pick(LEVEL_SETTINGS));
            let r = rng.below(20);
            if r < 3 {
                d.slot("v", "up_down", *rng.pick(&["up", "down"]));
                (
                    setting_phrase(rng, false),
                    rng.pick(&["turn {S} {v}", "turn {v} {S}"]).to_string(),
                )
            } else {
                let v = match r {
                    3..=11 => rng.range(1, 100).to_string(),
                    12..=14 => format!("{}%", rng.range(1, 100)),
                    15..=16 => format!("{} percent", rng.range(1, 100)),
                    _ => rng.pick(LEVEL_WORDS).to_string(),
                };
                d.slot("v", "level", v);
                let mut tpls = abs.to_vec();
                tpls.extend(["turn {S} up to {v}", "turn {S} down to {v}"]);
                (setting_phrase(rng, false), rng.pick(&tpls).to_string())
            }
        }
        _ => {
            let (setting, values) = *rng.pick(CHOICE_SETTINGS);
            d.slot("s", "choice_setting", setting);
            d.slot("v", "choice", *rng.pick(values));
            let mut tpls = abs.to_vec();
            tpls.extend(["make {v} my {s}", "use {v} as the {s}"]);
            (setting_phrase(rng, false), rng.pick(&tpls).to_string())
        }
    };
    d.tpl = tpl.replace("{S}", s);
    d.calls.push(call(
        "set",
        vec![("target", A::Slot("s")), ("value", A::Slot("v"))],
    ));
    d
}

/// (source, mode, query vocabulary (None: no query), templates).
type QueryRow = (
    &'static str,
    &'static str,
    Option<(&'static str, fn(&mut Rng) -> String)>,
    &'static [&'static str],
);

fn q_web(rng: &mut Rng) -> String {
    rng.pick(WEB_QUERIES).to_string()
}
fn q_cal(rng: &mut Rng) -> String {
    rng.pick(CALENDAR_QUERIES).to_string()
}
fn q_mail(rng: &mut Rng) -> String {
    rng.pick(EMAIL_QUERIES).to_string()
}
fn q_screen(rng: &mut Rng) -> String {
    rng.pick(SCREEN_QUERIES).to_string()
}
fn q_file(rng: &mut Rng) -> String {
    file_name(rng)
}
fn q_folder(rng: &mut Rng) -> String {
    rng.pick(FOLDERS).to_string()
}
fn q_url(rng: &mut Rng) -> String {
    rng.pick(URLS).to_string()
}
fn q_contact(rng: &mut Rng) -> String {
    contact_name(rng)
}
fn q_app(rng: &mut Rng) -> String {
    rng.pick(APPS).to_string()
}

const QUERIES: &[QueryRow] = &[
    (
        "current_screen",
        "describe",
        None,
        &[
            "what's on my screen",
            "what's on the screen",
            "describe the screen",
            "describe what's on screen",
            "what am I looking at",
            "tell me what's on my screen",
            "what do you see on the screen",
        ],
    ),
    (
        "current_screen",
        "read",
        None,
        &[
            "read the screen",
            "read what's on the screen",
            "read this page to me",
            "read the screen out loud",
            "read me what's on screen",
        ],
    ),
    (
        "current_screen",
        "summarize",
        None,
        &[
            "summarize this page",
            "summarize what's on screen",
            "summarize the screen",
            "give me a summary of this page",
            "sum up this page",
        ],
    ),
    (
        "current_screen",
        "search",
        Some(("screen_query", q_screen)),
        &[
            "find {q} on the screen",
            "look for {q} on screen",
            "where is {q} on the screen",
            "search the screen for {q}",
            "is there {q} on this page",
        ],
    ),
    (
        "calendar",
        "read",
        None,
        &[
            "what's on my calendar",
            "read me my calendar",
            "what's on my schedule",
            "read my agenda",
            "read my calendar",
        ],
    ),
    (
        "calendar",
        "search",
        Some(("calendar_query", q_cal)),
        &[
            "search my calendar for {q}",
            "find {q} on my calendar",
            "look up {q} in my calendar",
            "check my calendar for {q}",
            "what's on my calendar for {q}",
        ],
    ),
    (
        "calendar",
        "summarize",
        None,
        &[
            "summarize my calendar",
            "summarize my week",
            "give me an overview of my calendar",
            "sum up my schedule",
        ],
    ),
    (
        "calendar",
        "describe",
        None,
        &[
            "what does my calendar look like",
            "how busy am I",
            "describe my calendar",
            "how packed is my schedule",
        ],
    ),
    (
        "email",
        "read",
        None,
        &[
            "read my latest email",
            "read my emails",
            "read the last email",
            "read me my new mail",
        ],
    ),
    (
        "email",
        "read",
        Some(("contact", q_contact)),
        &[
            "read the email from {q}",
            "read me the latest email from {q}",
            "what did {q} email me",
        ],
    ),
    (
        "email",
        "search",
        Some(("email_query", q_mail)),
        &[
            "find emails about {q}",
            "search my email for {q}",
            "find the email about {q}",
            "look for {q} in my inbox",
            "search my mail for {q}",
        ],
    ),
    (
        "email",
        "search",
        Some(("contact", q_contact)),
        &[
            "find emails from {q}",
            "search my inbox for mail from {q}",
            "show all emails from {q}",
        ],
    ),
    (
        "email",
        "summarize",
        None,
        &[
            "summarize my inbox",
            "summarize my unread emails",
            "give me a summary of my emails",
        ],
    ),
    (
        "email",
        "summarize",
        Some(("email_query", q_mail)),
        &[
            "summarize the email about {q}",
            "summarize the thread about {q}",
        ],
    ),
    (
        "email",
        "describe",
        None,
        &[
            "do I have new email",
            "what's in my inbox",
            "any new emails",
            "how many unread emails do I have",
        ],
    ),
    (
        "files",
        "search",
        Some(("file", q_file)),
        &[
            "find {q} in my files",
            "search my files for {q}",
            "where is {q}",
            "look for {q} on my computer",
            "locate {q}",
            "where did I save {q}",
        ],
    ),
    (
        "files",
        "summarize",
        Some(("file", q_file)),
        &["summarize {q}", "give me a summary of {q}", "sum up {q}"],
    ),
    (
        "files",
        "read",
        Some(("file", q_file)),
        &[
            "read {q} to me",
            "read me {q}",
            "read the file {q} out loud",
        ],
    ),
    (
        "files",
        "describe",
        Some(("folder", q_folder)),
        &[
            "what's in my {q} folder",
            "describe the {q} folder",
            "what's inside the {q} folder",
        ],
    ),
    (
        "web",
        "search",
        Some(("web_query", q_web)),
        &[
            "search the web for {q}",
            "google {q}",
            "look up {q} online",
            "search online for {q}",
            "find {q} on the web",
            "search for {q}",
            "look up {q}",
        ],
    ),
    (
        "web",
        "summarize",
        Some(("url", q_url)),
        &[
            "summarize the article at {q}",
            "summarize {q}",
            "give me a summary of {q}",
        ],
    ),
    (
        "web",
        "read",
        Some(("url", q_url)),
        &[
            "read the article at {q}",
            "read {q} to me",
            "read me the page at {q}",
        ],
    ),
    (
        "clipboard",
        "read",
        None,
        &[
            "what's on my clipboard",
            "read my clipboard",
            "read what I copied",
            "what did I copy",
        ],
    ),
    (
        "clipboard",
        "summarize",
        None,
        &[
            "summarize my clipboard",
            "summarize what I copied",
            "summarize the clipboard",
        ],
    ),
    (
        "clipboard",
        "describe",
        None,
        &[
            "describe what's on my clipboard",
            "what kind of thing is on my clipboard",
        ],
    ),
    (
        "notifications",
        "read",
        None,
        &[
            "read my notifications",
            "what are my notifications",
            "read me my alerts",
            "read my latest notification",
        ],
    ),
    (
        "notifications",
        "summarize",
        None,
        &[
            "summarize my notifications",
            "summarize my alerts",
            "catch me up on my notifications",
        ],
    ),
    (
        "notifications",
        "search",
        Some(("app", q_app)),
        &[
            "any notifications from {q}",
            "find notifications from {q}",
            "search my notifications for {q}",
            "did {q} send me a notification",
        ],
    ),
    (
        "notifications",
        "describe",
        None,
        &[
            "what notifications do I have",
            "do I have any notifications",
            "describe my notifications",
        ],
    ),
];

const QUESTION_WORDS: &[&str] = &[
    "what", "what's", "where", "how", "do", "did", "any", "is", "when", "who",
];

fn style_of(tpl: &str) -> Style {
    let first = tpl.split_whitespace().next().unwrap_or("");
    if QUESTION_WORDS.contains(&first) {
        Style::Question
    } else {
        Style::Imperative
    }
}

fn query(rng: &mut Rng) -> Draft {
    let (source, mode, q, tpls) = *rng.pick(QUERIES);
    let tpl = *rng.pick(tpls);
    let mut d = Draft::new("query", style_of(tpl));
    d.tpl = tpl.to_string();
    let mut args = vec![("source", A::Enum(source)), ("mode", A::Enum(mode))];
    if let Some((kind, f)) = q {
        d.slot("q", kind, f(rng));
        args.push(("query", A::Slot("q")));
    }
    d.calls.push(call("query", args));
    d
}

fn compose(rng: &mut Rng) -> Draft {
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
fn fill_placeholders(d: &mut Draft, rng: &mut Rng, phrase: &str, missing: bool) -> String {
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

fn clarify_confirmation(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("clarify.confirmation", Style::Imperative);
    let phrase = *rng.pick(DESTRUCTIVE);
    d.tpl = fill_placeholders(&mut d, rng, phrase, false);
    d.calls.push(call(
        "clarify",
        vec![("kind", A::Enum("confirmation")), ("question", A::Core)],
    ));
    d
}

fn clarify_missing(rng: &mut Rng) -> Draft {
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

fn clarify_choice(rng: &mut Rng) -> Draft {
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

fn say(rng: &mut Rng) -> Draft {
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

fn query_memory(rng: &mut Rng) -> Draft {
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

fn wait(rng: &mut Rng) -> Draft {
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

fn schedule(rng: &mut Rng) -> Draft {
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

const FILLERS: &[&str] = &[
    "um ",
    "um, ",
    "uh ",
    "hey, ",
    "hey ",
    "ok ",
    "okay, ",
    "so ",
    "Pace, ",
    "hey Pace, ",
    "alright, ",
    "hmm, ",
    "oh and ",
    "quick one: ",
];
const POLITE: &[&str] = &[
    "please ",
    "could you ",
    "can you ",
    "would you ",
    "will you ",
    "can you please ",
    "could you please ",
    "would you please ",
    "I'd like you to ",
    "I want you to ",
    "I need you to ",
    "go ahead and ",
    "just ",
    "quickly ",
    "kindly ",
    "would you kindly ",
    "I'd love it if you could ",
    "do me a favor and ",
];
const POLITE_SELF: &[&str] = &[
    "let's ",
    "I want to ",
    "I'd like to ",
    "I need to ",
    "help me ",
    "time to ",
];
const SUFFIXES: &[&str] = &[
    " please",
    ", please",
    " thanks",
    ", thanks",
    " thank you",
    ", thank you",
    " for me",
    " now",
    " right now",
    " when you get a chance",
    " if you can",
];
const ASKING: &[&str] = &["could", "can", "would", "will"];

/// Wrap, case and render a draft into a request and its plan.
pub(crate) fn realize(d: &Draft, rng: &mut Rng) -> Realized {
    let mut prefix = String::new();
    let mut suffix = String::new();
    let mut asking = false;
    if rng.chance(0.18) {
        prefix.push_str(rng.pick::<&str>(FILLERS));
    }
    match d.style {
        Style::Imperative | Style::ImperativeMe => {
            if rng.chance(0.45) {
                let own = d.style == Style::Imperative && rng.chance(0.2);
                let p = if own {
                    *rng.pick(POLITE_SELF)
                } else {
                    *rng.pick(POLITE)
                };
                asking = ASKING.iter().any(|a| p.starts_with(a));
                prefix.push_str(p);
            }
            if rng.chance(0.22) {
                suffix.push_str(rng.pick::<&str>(SUFFIXES));
            }
        }
        Style::Question => asking = true,
    }
    let punct = if asking && rng.chance(0.6) {
        "?"
    } else {
        match rng.below(20) {
            0..=1 => ".",
            2 => "!",
            _ => "",
        }
    };
    let full = format!("{prefix}{{[}}{}{{]}}{suffix}{punct}", d.tpl);

    // Pieces: (text, slot index, is marker).
    enum Piece {
        Lit(String),
        Slot(usize),
        CoreStart,
        CoreEnd,
    }
    let mut pieces = Vec::new();
    let mut rest = full.as_str();
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Lit(rest[..open].to_string()));
        }
        let close = open + rest[open..].find('}').expect("unclosed slot in template");
        let name = &rest[open + 1..close];
        pieces.push(match name {
            "[" => Piece::CoreStart,
            "]" => Piece::CoreEnd,
            _ => Piece::Slot(
                d.slots
                    .iter()
                    .position(|(n, _, _)| n == name)
                    .unwrap_or_else(|| panic!("unknown slot {{{name}}} in {:?}", d.tpl)),
            ),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Lit(rest.to_string()));
    }

    // Casing: as written, first letter capitalized, all lower, all upper.
    let casing = rng.weighted(&[62.0, 22.0, 12.0, 4.0]);
    let case = |s: &str| match casing {
        2 => s.to_lowercase(),
        3 => s.to_uppercase(),
        _ => s.to_string(),
    };
    let mut values: Vec<String> = d.slots.iter().map(|(_, _, v)| case(v)).collect();
    let mut texts: Vec<String> = pieces
        .iter()
        .map(|p| match p {
            Piece::Lit(s) => case(s),
            _ => String::new(),
        })
        .collect();
    if casing == 1 {
        // Capitalize the first character of the request, wherever it lives.
        if let Some(i) = pieces
            .iter()
            .position(|p| matches!(p, Piece::Lit(_) | Piece::Slot(_)))
        {
            let target = match pieces[i] {
                Piece::Slot(s) => &mut values[s],
                _ => &mut texts[i],
            };
            let mut cs = target.chars();
            if let Some(c) = cs.next() {
                *target = c.to_uppercase().chain(cs).collect();
            }
        }
    }
    let mut request = String::new();
    let mut skeleton = String::new();
    let mut core = String::new();
    let mut core_skeleton = String::new();
    let mut in_core = false;
    for (i, p) in pieces.iter().enumerate() {
        let (text, skel) = match p {
            Piece::Lit(_) => (texts[i].clone(), texts[i].to_lowercase()),
            Piece::Slot(s) => (values[*s].clone(), format!("<{}>", d.slots[*s].1)),
            Piece::CoreStart => {
                in_core = true;
                continue;
            }
            Piece::CoreEnd => {
                in_core = false;
                continue;
            }
        };
        request.push_str(&text);
        skeleton.push_str(&skel);
        if in_core {
            core.push_str(&text);
            core_skeleton.push_str(&skel);
        }
    }
    let lookup = |name: &str| -> &str {
        let i = d
            .slots
            .iter()
            .position(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("unknown slot {name}"));
        &values[i]
    };
    fn value(a: &A, lookup: &dyn Fn(&str) -> String, core: &str) -> Value {
        match a {
            A::Enum(s) => Value::String(s.to_string()),
            A::EnumOf(s) => Value::String(lookup(s).to_lowercase()),
            A::Slot(s) => Value::String(lookup(s)),
            A::Int(s) => {
                let v = lookup(s);
                let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
                Value::from(digits.parse::<i64>().expect("integer slot without digits"))
            }
            A::Core => Value::String(core.to_string()),
            A::Obj(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, a)| (k.to_string(), value(a, lookup, core)))
                    .collect::<Map<_, _>>(),
            ),
            A::Arr(items) => Value::Array(items.iter().map(|a| value(a, lookup, core)).collect()),
        }
    }
    let owned = |name: &str| lookup(name).to_string();
    let calls = d
        .calls
        .iter()
        .map(|c| {
            let args: Map<String, Value> = c
                .args
                .iter()
                .map(|(k, a)| (k.to_string(), value(a, &owned, &core)))
                .collect();
            Call::new(c.name, args)
        })
        .collect();
    Realized {
        intent: d.intent,
        request,
        plan: Plan::new(calls),
        skeleton,
        core_skeleton,
        slots: d
            .slots
            .iter()
            .zip(values)
            .map(|((_, k, _), v)| (*k, v))
            .collect(),
    }
}

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
    /// A number spelled by a slot ("12.5", "7"): an integer when it has no decimals.
    Num(&'static str),
    /// A boolean the template's words decide.
    Bool(bool),
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
                    "the {} link",
                    "the {} checkbox",
                    "the {} toggle",
                    "the {} dropdown",
                    "the button that says {}",
                    "the button labeled {}",
                    "the {} thing",
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
                } else if rng.chance(0.3) {
                    // Documents as people name them: a title without an extension.
                    (
                        &[
                            "the {} doc",
                            "the {} document",
                            "my {} document",
                            "the {} spreadsheet",
                            "the {} pdf",
                            "the {} deck",
                            "my {} file",
                            "the {} file",
                        ],
                        format!("{} {}", rng.pick(DOC_QUALIFIERS), rng.pick(DOC_NOUNS)),
                        "file",
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
    let mut phrase = rng.pick(phrases).replace("{}", &format!("{{{name}}}"));
    if ty == Ety::Ui {
        // What it looks like and where it is: words around the label that are not part of it.
        if phrase.starts_with("the {") && rng.chance(0.2) {
            phrase = format!("the {} {}", rng.pick(UI_LOOKS), &phrase[4..]);
        }
        if ctx == Ctx::Act && rng.chance(0.08) {
            phrase.push_str(rng.pick::<&str>(UI_PLACES));
        }
    }
    phrase
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
    ("perform.click", "perform", 2.0, press_button),
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
    ("none", "none", 6.0, out_of_scope),
];

/// Two requests said as one ("open Safari and then go to github.com"): the plan is both
/// calls in order. `None` when either cannot be joined: clarify (its question is the whole
/// request), out-of-scope requests, questions, or a slot name without a second spelling.
pub(crate) fn compound(first: &Draft, second: &Draft, rng: &mut Rng) -> Option<Draft> {
    let joinable = |d: &Draft| {
        d.style != Style::Question && !d.intent.starts_with("clarify") && !d.calls.is_empty()
    };
    if !joinable(first) || !joinable(second) {
        return None;
    }
    let mut tpl2 = second.tpl.clone();
    let mut slots = first.slots.clone();
    for (name, kind, value) in &second.slots {
        let renamed = second_slot(name)?;
        tpl2 = tpl2.replace(&format!("{{{name}}}"), &format!("{{{renamed}}}"));
        slots.push((renamed.to_string(), kind, value.clone()));
    }
    let mut calls = first.calls.clone();
    for c in &second.calls {
        let args = c
            .args
            .iter()
            .map(|(k, a)| Some((*k, rename_slots(a)?)))
            .collect::<Option<Vec<_>>>()?;
        calls.push(call(c.name, args));
    }
    let joiner = *rng.pick(&[
        " and ",
        " and then ",
        ", then ",
        " then ",
        ", and ",
        " and also ",
    ]);
    let style = if first.style == Style::ImperativeMe || second.style == Style::ImperativeMe {
        Style::ImperativeMe
    } else {
        Style::Imperative
    };
    Some(Draft {
        intent: "compound",
        tpl: format!("{}{joiner}{tpl2}", first.tpl),
        slots,
        calls,
        style,
    })
}

/// The second request's spelling of a slot name (`e` -> `e2`).
fn second_slot(name: &str) -> Option<&'static str> {
    Some(match name {
        "a" => "a2",
        "b" => "b2",
        "c" => "c2",
        "cs" => "cs2",
        "d" => "d2",
        "dir" => "dir2",
        "e" => "e2",
        "f" => "f2",
        "k" => "k2",
        "m" => "m2",
        "n" => "n2",
        "q" => "q2",
        "r" => "r2",
        "s" => "s2",
        "t" => "t2",
        "v" => "v2",
        "w" => "w2",
        _ => return None,
    })
}

fn rename_slots(a: &A) -> Option<A> {
    Some(match a {
        A::Enum(s) => A::Enum(s),
        A::EnumOf(s) => A::EnumOf(second_slot(s)?),
        A::Slot(s) => A::Slot(second_slot(s)?),
        A::Int(s) => A::Int(second_slot(s)?),
        A::Num(s) => A::Num(second_slot(s)?),
        A::Bool(b) => A::Bool(*b),
        A::Core => return None,
        A::Obj(fields) => A::Obj(
            fields
                .iter()
                .map(|(k, a)| Some((*k, rename_slots(a)?)))
                .collect::<Option<_>>()?,
        ),
        A::Arr(items) => A::Arr(items.iter().map(rename_slots).collect::<Option<_>>()?),
    })
}

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

mod apps;
mod outside;
mod pointer;
mod queries;
mod realize;
mod speech;

use apps::*;
use outside::*;
use pointer::*;
use queries::*;
pub(crate) use realize::{realize, realize_open};
use speech::*;

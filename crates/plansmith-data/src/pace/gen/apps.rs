//! Opening things and changing settings: `open`, `set`.

use super::*;

pub(super) fn open(rng: &mut Rng) -> Draft {
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

pub(super) fn setting_phrase(rng: &mut Rng, toggle: bool) -> &'static str {
    if toggle {
        rng.pick::<&str>(&["{s}", "{s}", "the {s}"])
    } else {
        rng.pick::<&str>(&["the {s}", "{s}", "my {s}"])
    }
}

pub(super) fn set(rng: &mut Rng) -> Draft {
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
pub(super) type QueryRow = (
    &'static str,
    &'static str,
    Option<(&'static str, fn(&mut Rng) -> String)>,
    &'static [&'static str],
);

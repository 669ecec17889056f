//! Intents of the pointer and keyboard: click, double-click, right-click, hover, type, key,
//! scroll, drag, multi-select.

use super::*;

pub(super) fn click(rng: &mut Rng) -> Draft {
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

/// A button pressed or hit: a click, told from a key press ("press enter") by the word
/// "button".
pub(super) fn press_button(rng: &mut Rng) -> Draft {
    let mut d = Draft::new("perform.click", Style::Imperative);
    d.slot("e", "ui", *rng.pick(UI_LABELS));
    let button = *rng.pick(&[
        "the {e} button",
        "the {e} button",
        "{e} button",
        "button {e}",
    ]);
    let verb = *rng.pick(&[
        "press {B}",
        "hit {B}",
        "push {B}",
        "press on {B}",
        "smash {B}",
    ]);
    d.tpl = verb.replace("{B}", button);
    d.calls.push(call(
        "perform",
        vec![
            ("action", A::Enum("click")),
            ("target", entity_ref(Ety::Ui, "e")),
        ],
    ));
    d
}

pub(super) fn double_click(rng: &mut Rng) -> Draft {
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

pub(super) fn right_click(rng: &mut Rng) -> Draft {
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

pub(super) fn hover(rng: &mut Rng) -> Draft {
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

pub(super) fn type_text(rng: &mut Rng) -> Draft {
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

pub(super) fn key(rng: &mut Rng) -> Draft {
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

pub(super) fn scroll(rng: &mut Rng) -> Draft {
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

pub(super) const LINKING: &[&str] = &[
    "to", "into", "onto", "and", "through", "together", "between", "from", "over", "on",
];

pub(super) fn drag(rng: &mut Rng) -> Draft {
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

pub(super) fn multi_select(rng: &mut Rng) -> Draft {
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

//! Questions: the query row table (what is asked, where it is looked up) and `query`.

use super::*;

pub(super) fn q_web(rng: &mut Rng) -> String {
    rng.pick(WEB_QUERIES).to_string()
}
pub(super) fn q_cal(rng: &mut Rng) -> String {
    rng.pick(CALENDAR_QUERIES).to_string()
}
pub(super) fn q_mail(rng: &mut Rng) -> String {
    rng.pick(EMAIL_QUERIES).to_string()
}
pub(super) fn q_screen(rng: &mut Rng) -> String {
    rng.pick(SCREEN_QUERIES).to_string()
}
pub(super) fn q_file(rng: &mut Rng) -> String {
    file_name(rng)
}
pub(super) fn q_folder(rng: &mut Rng) -> String {
    rng.pick(FOLDERS).to_string()
}
pub(super) fn q_url(rng: &mut Rng) -> String {
    rng.pick(URLS).to_string()
}
pub(super) fn q_contact(rng: &mut Rng) -> String {
    contact_name(rng)
}
pub(super) fn q_app(rng: &mut Rng) -> String {
    rng.pick(APPS).to_string()
}

pub(super) const QUERIES: &[QueryRow] = &[
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

pub(super) const QUESTION_WORDS: &[&str] = &[
    "what", "what's", "where", "how", "do", "did", "any", "is", "when", "who",
];

pub(super) fn style_of(tpl: &str) -> Style {
    let first = tpl.split_whitespace().next().unwrap_or("");
    if QUESTION_WORDS.contains(&first) {
        Style::Question
    } else {
        Style::Imperative
    }
}

pub(super) fn query(rng: &mut Rng) -> Draft {
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

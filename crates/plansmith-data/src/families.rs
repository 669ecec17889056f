//! Synthetic tool families beyond Pace (smart home, music, calendar, files, commerce, weather,
//! navigation, messaging, timers, to-dos): each a few tools with descriptions, parameters and
//! enums, and request templates whose free-string values are copied spans of the request.
//! Traces carry their family's catalog in `tools`, so a model must read the catalog.

use serde_json::{json, Value};

use plansmith_core::{Catalog, PlanValidator, Policy, Trace, TraceSource};

use crate::pace::gen::{self, call, Draft, Style, A};
use crate::rng::Rng;
use crate::DataError;

/// A family: its tools (OpenAI form) and a request generator.
pub struct Family {
    pub name: &'static str,
    pub tools: Value,
    generate: fn(&mut Rng) -> Draft,
}

impl Family {
    pub fn catalog(&self) -> Catalog {
        Catalog::from_value(&self.tools).expect("synthetic family catalogs import")
    }
}

fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required, "additionalProperties": false}}})
}

fn s(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn int(desc: &str, lo: i64, hi: i64) -> Value {
    json!({"type": "integer", "description": desc, "minimum": lo, "maximum": hi})
}

fn en(desc: &str, values: &[&str]) -> Value {
    json!({"type": "string", "description": desc, "enum": values})
}

const ROOMS: &[&str] = &[
    "kitchen",
    "living room",
    "bedroom",
    "bathroom",
    "office",
    "garage",
    "hallway",
    "porch",
    "kids' room",
    "dining room",
];
const COLORS: &[&str] = &[
    "warm white",
    "blue",
    "red",
    "soft yellow",
    "purple",
    "daylight",
    "green",
    "orange",
];
const DOORS: &[&str] = &[
    "front door",
    "back door",
    "garage door",
    "side gate",
    "patio door",
];
const SONGS: &[&str] = &[
    "Bohemian Rhapsody",
    "Clair de Lune",
    "Blinding Lights",
    "Hey Jude",
    "Dancing Queen",
    "Take Five",
    "Yellow",
    "Halo",
    "Hotel California",
    "Shape of You",
];
const ARTISTS: &[&str] = &[
    "Queen",
    "Debussy",
    "The Weeknd",
    "the Beatles",
    "ABBA",
    "Dave Brubeck",
    "Coldplay",
    "Beyoncé",
    "the Eagles",
    "Ed Sheeran",
];
const PLAYLISTS: &[&str] = &[
    "my workout playlist",
    "chill vibes",
    "road trip mix",
    "focus music",
    "jazz classics",
    "my liked songs",
];
const EVENTS: &[&str] = &[
    "team lunch",
    "dentist",
    "yoga",
    "project review",
    "parent teacher meeting",
    "coffee with Sam",
    "flight to Rome",
    "book club",
    "1:1 with Priya",
];
const DATES: &[&str] = &[
    "tomorrow",
    "Friday",
    "next Tuesday",
    "March 3",
    "June 12th",
    "the 21st",
    "Monday",
    "this Saturday",
];
const TIMES: &[&str] = &["3pm", "9:30", "noon", "10 am", "6:45 pm", "8"];
const PATHS: &[&str] = &[
    "notes.txt",
    "IMG_2041.jpg",
    "report_final.pdf",
    "song.mp3",
    "budget.xlsx",
    "draft.docx",
    "archive.zip",
    "todo.md",
];
const FOLDERS: &[&str] = &["Documents", "Pictures", "Archive", "Work", "Music", "Taxes"];
const NEW_NAMES: &[&str] = &[
    "final.pdf",
    "old_notes.txt",
    "vacation.jpg",
    "budget_v2.xlsx",
    "ideas.md",
];
const ITEMS: &[&str] = &[
    "AA batteries",
    "a phone charger",
    "dish soap",
    "running shoes",
    "a yoga mat",
    "coffee beans",
    "printer paper",
    "a desk lamp",
    "paper towels",
];
const ORDERS: &[&str] = &["A1234", "112-4456", "ORD-9981", "77812", "B-20-331"];
const CITIES: &[&str] = &[
    "Paris",
    "Tokyo",
    "New York",
    "Lagos",
    "São Paulo",
    "Berlin",
    "Sydney",
    "Toronto",
    "Mumbai",
    "Oslo",
];
const PLACES: &[&str] = &[
    "the airport",
    "Central Station",
    "the nearest pharmacy",
    "Grandma's house",
    "the office",
    "Union Square",
    "the stadium",
];
const CATEGORIES: &[&str] = &[
    "coffee shops",
    "gas stations",
    "pharmacies",
    "ATMs",
    "sushi places",
    "parks",
    "bookstores",
];
const PEOPLE: &[&str] = &[
    "Anna",
    "Ben",
    "Mom",
    "Carlos Ruiz",
    "Priya",
    "Dr. Lee",
    "the landlord",
    "Omar",
];
const BODIES: &[&str] = &[
    "I'm on my way",
    "running 10 minutes late",
    "call me when you land",
    "dinner is at 8",
    "happy birthday",
    "the keys are under the mat",
];
const LABELS: &[&str] = &[
    "pasta",
    "laundry",
    "tea",
    "pizza",
    "the eggs",
    "homework break",
];
const TASKS: &[&str] = &[
    "buy groceries",
    "call the bank",
    "fix the sink",
    "renew the car insurance",
    "send the slides",
    "book flights",
];
const LISTS: &[&str] = &["shopping", "work", "home", "errands", "weekend"];

fn pick(rng: &mut Rng, items: &[&'static str]) -> &'static str {
    rng.pick::<&str>(items)
}

fn d(intent: &'static str, tpl: &str) -> Draft {
    let mut d = Draft::new(intent, Style::Imperative);
    d.tpl = tpl.to_string();
    d
}

fn smart_home(rng: &mut Rng) -> Draft {
    match rng.below(6) {
        0 => {
            let mut x = d(
                "smart_home",
                pick(
                    rng,
                    &[
                        "turn {st} the lights in the {room}",
                        "turn the {room} lights {st}",
                        "switch {st} the {room} light",
                        "lights {st} in the {room}",
                    ],
                ),
            );
            x.slot("st", "on_off", pick(rng, &["on", "off"]));
            x.slot("room", "room", pick(rng, ROOMS));
            x.calls.push(call(
                "set_light",
                vec![("room", A::Slot("room")), ("state", A::EnumOf("st"))],
            ));
            x
        }
        1 => {
            let mut x = d(
                "smart_home",
                pick(
                    rng,
                    &[
                        "dim the {room} lights to {n} percent",
                        "set the {room} lights to {n}%",
                        "make the {room} light {n} percent bright",
                    ],
                ),
            );
            x.slot("room", "room", pick(rng, ROOMS));
            x.slot("n", "level", rng.range(1, 100).to_string());
            x.calls.push(call(
                "set_light",
                vec![
                    ("room", A::Slot("room")),
                    ("state", A::Enum("on")),
                    ("brightness", A::Int("n")),
                ],
            ));
            x
        }
        2 => {
            let mut x = d(
                "smart_home",
                pick(
                    rng,
                    &[
                        "make the {room} lights {c}",
                        "change the {room} light to {c}",
                        "set the lights in the {room} to {c}",
                    ],
                ),
            );
            x.slot("room", "room", pick(rng, ROOMS));
            x.slot("c", "color", pick(rng, COLORS));
            x.calls.push(call(
                "set_light",
                vec![
                    ("room", A::Slot("room")),
                    ("state", A::Enum("on")),
                    ("color", A::Slot("c")),
                ],
            ));
            x
        }
        3 => {
            let mut x = d(
                "smart_home",
                pick(
                    rng,
                    &[
                        "set the thermostat to {n} degrees",
                        "make it {n} degrees in here",
                        "thermostat to {n}",
                    ],
                ),
            );
            x.slot("n", "temperature", rng.range(10, 30).to_string());
            x.calls
                .push(call("set_thermostat", vec![("temperature", A::Int("n"))]));
            x
        }
        4 => {
            let mut x = d(
                "smart_home",
                pick(
                    rng,
                    &[
                        "{m} the house to {n} degrees",
                        "set the thermostat to {m} at {n}",
                    ],
                ),
            );
            x.slot("m", "mode", pick(rng, &["heat", "cool"]));
            x.slot("n", "temperature", rng.range(10, 30).to_string());
            x.calls.push(call(
                "set_thermostat",
                vec![("temperature", A::Int("n")), ("mode", A::EnumOf("m"))],
            ));
            x
        }
        _ => {
            let (verb, tool) = *rng.pick(&[("lock", "lock_door"), ("unlock", "unlock_door")]);
            let tpl = if rng.chance(0.5) {
                format!("{verb} the {{door}}")
            } else {
                format!("please {verb} the {{door}} now")
            };
            let mut x = d("smart_home", &tpl);
            x.slot("door", "door", pick(rng, DOORS));
            x.calls.push(call(tool, vec![("door", A::Slot("door"))]));
            x
        }
    }
}

fn music(rng: &mut Rng) -> Draft {
    match rng.below(5) {
        0 => {
            let mut x = d(
                "music",
                pick(
                    rng,
                    &[
                        "play {q}",
                        "put on {q}",
                        "I want to hear {q}",
                        "queue up {q}",
                    ],
                ),
            );
            x.slot(
                "q",
                "song",
                format!("{} by {}", pick(rng, SONGS), pick(rng, ARTISTS)),
            );
            x.calls
                .push(call("play_music", vec![("query", A::Slot("q"))]));
            x
        }
        1 => {
            let mut x = d(
                "music",
                pick(
                    rng,
                    &["shuffle {q}", "play {q} on shuffle", "shuffle play {q}"],
                ),
            );
            x.slot("q", "playlist", pick(rng, PLAYLISTS));
            x.calls.push(call(
                "play_music",
                vec![("query", A::Slot("q")), ("shuffle", A::Enum("true"))],
            ));
            x
        }
        2 => d_call(
            "music",
            pick(
                rng,
                &[
                    "pause the music",
                    "stop the music",
                    "pause playback",
                    "pause",
                ],
            ),
            "pause_music",
        ),
        3 => {
            if rng.chance(0.4) {
                return d_call(
                    "music",
                    pick(rng, &["skip this song", "next track", "skip"]),
                    "skip_track",
                );
            }
            let mut x = d(
                "music",
                pick(
                    rng,
                    &[
                        "skip {n} songs",
                        "skip ahead {n} tracks",
                        "go forward {n} tracks",
                    ],
                ),
            );
            x.slot("n", "count", rng.range(2, 9).to_string());
            x.calls
                .push(call("skip_track", vec![("count", A::Int("n"))]));
            x
        }
        _ => {
            let mut x = d(
                "music",
                pick(
                    rng,
                    &[
                        "set the music volume to {n}",
                        "music volume {n}",
                        "turn the music to {n} percent",
                    ],
                ),
            );
            x.slot("n", "level", rng.range(0, 100).to_string());
            x.calls
                .push(call("set_music_volume", vec![("level", A::Int("n"))]));
            x
        }
    }
}

fn d_call(intent: &'static str, tpl: &str, tool: &'static str) -> Draft {
    let mut x = d(intent, tpl);
    x.calls.push(call(tool, vec![]));
    x
}

fn calendar(rng: &mut Rng) -> Draft {
    match rng.below(4) {
        0 => {
            let mut x = d(
                "calendar",
                pick(
                    rng,
                    &[
                        "add {t} to my calendar on {dt}",
                        "put {t} on my calendar for {dt}",
                        "create an event {t} on {dt}",
                        "schedule {t} for {dt}",
                    ],
                ),
            );
            x.slot("t", "event", pick(rng, EVENTS));
            x.slot("dt", "date", pick(rng, DATES));
            x.calls.push(call(
                "create_event",
                vec![("title", A::Slot("t")), ("date", A::Slot("dt"))],
            ));
            x
        }
        1 => {
            let mut x = d(
                "calendar",
                pick(
                    rng,
                    &[
                        "add {t} on {dt} at {tm}",
                        "schedule {t} for {dt} at {tm}",
                        "book {t} {dt} at {tm}",
                    ],
                ),
            );
            x.slot("t", "event", pick(rng, EVENTS));
            x.slot("dt", "date", pick(rng, DATES));
            x.slot("tm", "time", pick(rng, TIMES));
            x.calls.push(call(
                "create_event",
                vec![
                    ("title", A::Slot("t")),
                    ("date", A::Slot("dt")),
                    ("time", A::Slot("tm")),
                ],
            ));
            x
        }
        2 => {
            let mut x = d(
                "calendar",
                pick(
                    rng,
                    &[
                        "what's on {dt}",
                        "list my events for {dt}",
                        "show my schedule for {dt}",
                        "what do I have {dt}",
                    ],
                ),
            );
            x.style = Style::Question;
            x.slot("dt", "date", pick(rng, DATES));
            x.calls
                .push(call("list_events", vec![("date", A::Slot("dt"))]));
            x
        }
        _ => {
            let mut x = d(
                "calendar",
                pick(
                    rng,
                    &[
                        "cancel {t}",
                        "delete the {t} event",
                        "remove {t} from my calendar",
                    ],
                ),
            );
            x.slot("t", "event", pick(rng, EVENTS));
            x.calls
                .push(call("cancel_event", vec![("title", A::Slot("t"))]));
            x
        }
    }
}

fn files(rng: &mut Rng) -> Draft {
    match rng.below(4) {
        0 => {
            let mut x = d(
                "files",
                pick(
                    rng,
                    &[
                        "move {p} to {f}",
                        "put {p} in the {f} folder",
                        "move {p} into {f}",
                    ],
                ),
            );
            x.slot("p", "path", pick(rng, PATHS));
            x.slot("f", "folder", pick(rng, FOLDERS));
            x.calls.push(call(
                "move_file",
                vec![("path", A::Slot("p")), ("folder", A::Slot("f"))],
            ));
            x
        }
        1 => {
            let mut x = d(
                "files",
                pick(
                    rng,
                    &[
                        "rename {p} to {n}",
                        "change the name of {p} to {n}",
                        "call {p} {n} instead",
                    ],
                ),
            );
            x.slot("p", "path", pick(rng, PATHS));
            x.slot("n", "new_name", pick(rng, NEW_NAMES));
            x.calls.push(call(
                "rename_file",
                vec![("path", A::Slot("p")), ("new_name", A::Slot("n"))],
            ));
            x
        }
        2 => {
            let mut x = d(
                "files",
                pick(rng, &["delete {p}", "trash {p}", "get rid of {p}"]),
            );
            x.slot("p", "path", pick(rng, PATHS));
            x.calls
                .push(call("delete_file", vec![("path", A::Slot("p"))]));
            x
        }
        _ => {
            let (kind_word, kind) = *rng.pick(&[
                ("documents", "document"),
                ("images", "image"),
                ("photos", "image"),
                ("audio files", "audio"),
            ]);
            let mut x = d("files", &format!("{{v}} {kind_word} about {{q}}"));
            x.slot("v", "verb", pick(rng, &["find", "search for", "look for"]));
            x.slot(
                "q",
                "topic",
                pick(
                    rng,
                    &[
                        "taxes",
                        "the beach trip",
                        "the contract",
                        "invoices",
                        "the wedding",
                        "recipes",
                    ],
                ),
            );
            x.calls.push(call(
                "search_files",
                vec![("query", A::Slot("q")), ("kind", A::Enum(kind))],
            ));
            x
        }
    }
}

fn commerce(rng: &mut Rng) -> Draft {
    match rng.below(4) {
        0 => {
            let mut x = d(
                "commerce",
                pick(
                    rng,
                    &[
                        "add {n} {i} to my cart",
                        "put {n} {i} in the cart",
                        "order {n} {i}",
                    ],
                ),
            );
            x.slot("n", "quantity", rng.range(2, 12).to_string());
            x.slot(
                "i",
                "item",
                pick(
                    rng,
                    &[
                        "packs of AA batteries",
                        "bags of coffee beans",
                        "rolls of paper towels",
                        "bottles of dish soap",
                    ],
                ),
            );
            x.calls.push(call(
                "add_to_cart",
                vec![("item", A::Slot("i")), ("quantity", A::Int("n"))],
            ));
            x
        }
        1 => {
            let mut x = d(
                "commerce",
                pick(
                    rng,
                    &["add {i} to my cart", "buy {i}", "put {i} in my basket"],
                ),
            );
            x.slot("i", "item", pick(rng, ITEMS));
            x.calls
                .push(call("add_to_cart", vec![("item", A::Slot("i"))]));
            x
        }
        2 => {
            let (tool, tpls): (&'static str, &[&str]) = *rng.pick(&[
                (
                    "track_order",
                    &[
                        "where is order {o}",
                        "track order {o}",
                        "what's the status of order {o}",
                    ][..],
                ),
                (
                    "cancel_order",
                    &["cancel order {o}", "please cancel my order {o}"][..],
                ),
            ]);
            let mut x = d("commerce", pick(rng, tpls));
            x.slot("o", "order", pick(rng, ORDERS));
            x.calls.push(call(tool, vec![("order_id", A::Slot("o"))]));
            x
        }
        _ => {
            let (phrase, sort) = *rng.pick(&[
                ("cheapest", "price_low"),
                ("most expensive", "price_high"),
                ("best rated", "rating"),
                ("newest", "newest"),
            ]);
            let mut x = d("commerce", &format!("show me the {phrase} {{q}}"));
            x.slot(
                "q",
                "product",
                pick(
                    rng,
                    &[
                        "laptops",
                        "headphones",
                        "office chairs",
                        "air fryers",
                        "rain jackets",
                        "board games",
                    ],
                ),
            );
            x.calls.push(call(
                "search_products",
                vec![("query", A::Slot("q")), ("sort", A::Enum(sort))],
            ));
            x
        }
    }
}

fn weather(rng: &mut Rng) -> Draft {
    match rng.below(3) {
        0 => {
            let mut x = d(
                "weather",
                pick(
                    rng,
                    &[
                        "what's the weather in {c}",
                        "how's the weather in {c}",
                        "weather for {c}",
                    ],
                ),
            );
            x.style = Style::Question;
            x.slot("c", "city", pick(rng, CITIES));
            x.calls
                .push(call("get_weather", vec![("city", A::Slot("c"))]));
            x
        }
        1 => {
            let mut x = d(
                "weather",
                pick(
                    rng,
                    &[
                        "what's the temperature in {c} in {u}",
                        "give me the weather in {c} in {u}",
                    ],
                ),
            );
            x.slot("c", "city", pick(rng, CITIES));
            x.slot("u", "unit", pick(rng, &["celsius", "fahrenheit"]));
            x.calls.push(call(
                "get_weather",
                vec![("city", A::Slot("c")), ("unit", A::EnumOf("u"))],
            ));
            x
        }
        _ => {
            let mut x = d(
                "weather",
                pick(
                    rng,
                    &[
                        "give me the {n} day forecast for {c}",
                        "forecast for {c} for the next {n} days",
                        "what's the weather in {c} over the next {n} days",
                    ],
                ),
            );
            x.slot("c", "city", pick(rng, CITIES));
            x.slot("n", "days", rng.range(2, 10).to_string());
            x.calls.push(call(
                "get_forecast",
                vec![("city", A::Slot("c")), ("days", A::Int("n"))],
            ));
            x
        }
    }
}

fn navigation(rng: &mut Rng) -> Draft {
    match rng.below(3) {
        0 => {
            let mut x = d(
                "navigation",
                pick(
                    rng,
                    &[
                        "directions to {p}",
                        "how do I get to {p}",
                        "navigate to {p}",
                        "take me to {p}",
                    ],
                ),
            );
            x.slot("p", "place", pick(rng, PLACES));
            x.calls
                .push(call("get_directions", vec![("destination", A::Slot("p"))]));
            x
        }
        1 => {
            let (word, mode) = *rng.pick(&[
                ("walking", "walking"),
                ("driving", "driving"),
                ("by bike", "cycling"),
                ("by train", "transit"),
                ("by bus", "transit"),
            ]);
            let mut x = d("navigation", &format!("{{v}} {{p}} {word}"));
            x.slot(
                "v",
                "verb",
                pick(rng, &["directions to", "get me to", "route to"]),
            );
            x.slot("p", "place", pick(rng, PLACES));
            x.calls.push(call(
                "get_directions",
                vec![("destination", A::Slot("p")), ("mode", A::Enum(mode))],
            ));
            x
        }
        _ => {
            let mut x = d(
                "navigation",
                pick(
                    rng,
                    &[
                        "find {c} nearby",
                        "any {c} near me",
                        "where are the closest {c}",
                    ],
                ),
            );
            x.slot("c", "category", pick(rng, CATEGORIES));
            x.calls
                .push(call("find_nearby", vec![("category", A::Slot("c"))]));
            x
        }
    }
}

fn messaging(rng: &mut Rng) -> Draft {
    if rng.chance(0.6) {
        let mut x = d(
            "messaging",
            pick(
                rng,
                &[
                    "send {r} a text saying {b}",
                    "message {r} {b}",
                    "text {r} that {b}",
                    "tell {r} {b}",
                ],
            ),
        );
        x.slot("r", "person", pick(rng, PEOPLE));
        x.slot("b", "body", pick(rng, BODIES));
        x.calls.push(call(
            "send_message",
            vec![("recipient", A::Slot("r")), ("body", A::Slot("b"))],
        ));
        x
    } else {
        let mut x = d(
            "messaging",
            pick(
                rng,
                &["call {r}", "phone {r}", "ring {r}", "give {r} a call"],
            ),
        );
        x.slot("r", "person", pick(rng, PEOPLE));
        x.calls
            .push(call("call_contact", vec![("name", A::Slot("r"))]));
        x
    }
}

fn timers(rng: &mut Rng) -> Draft {
    match rng.below(3) {
        0 => {
            let mut x = d(
                "timers",
                pick(
                    rng,
                    &[
                        "set a timer for {n} minutes",
                        "{n} minute timer",
                        "start a {n} minute timer",
                    ],
                ),
            );
            x.slot("n", "minutes", rng.range(1, 90).to_string());
            x.calls
                .push(call("set_timer", vec![("minutes", A::Int("n"))]));
            x
        }
        1 => {
            let mut x = d(
                "timers",
                pick(
                    rng,
                    &[
                        "set a {n} minute timer for {l}",
                        "timer for {l}, {n} minutes",
                    ],
                ),
            );
            x.slot("n", "minutes", rng.range(1, 90).to_string());
            x.slot("l", "label", pick(rng, LABELS));
            x.calls.push(call(
                "set_timer",
                vec![("minutes", A::Int("n")), ("label", A::Slot("l"))],
            ));
            x
        }
        _ => {
            let mut x = d(
                "timers",
                pick(
                    rng,
                    &["wake me up at {t}", "set an alarm for {t}", "alarm at {t}"],
                ),
            );
            x.slot("t", "time", pick(rng, TIMES));
            x.calls
                .push(call("set_alarm", vec![("time", A::Slot("t"))]));
            x
        }
    }
}

fn todos(rng: &mut Rng) -> Draft {
    match rng.below(3) {
        0 => {
            let mut x = d(
                "todos",
                pick(
                    rng,
                    &[
                        "add {t} to my to-do list",
                        "put {t} on my list",
                        "new task: {t}",
                    ],
                ),
            );
            x.slot("t", "task", pick(rng, TASKS));
            x.calls.push(call("add_todo", vec![("task", A::Slot("t"))]));
            x
        }
        1 => {
            let mut x = d(
                "todos",
                pick(rng, &["add {t} to my {l} list", "put {t} on the {l} list"]),
            );
            x.slot("t", "task", pick(rng, TASKS));
            x.slot("l", "list", pick(rng, LISTS));
            x.calls.push(call(
                "add_todo",
                vec![("task", A::Slot("t")), ("list", A::Slot("l"))],
            ));
            x
        }
        _ => {
            let mut x = d(
                "todos",
                pick(
                    rng,
                    &["mark {t} as done", "I finished {t}", "check off {t}"],
                ),
            );
            x.slot("t", "task", pick(rng, TASKS));
            x.calls
                .push(call("complete_todo", vec![("task", A::Slot("t"))]));
            x
        }
    }
}

/// All synthetic families.
pub fn families() -> Vec<Family> {
    vec![
        Family {
            name: "smart_home",
            tools: json!([
                tool(
                    "set_light",
                    "Turn a room's lights on or off, or change their brightness or color.",
                    json!({
                    "room": s("The room, as named by the user."), "state": en("On or off.", &["on", "off"]),
                    "brightness": int("Brightness in percent.", 0, 100), "color": s("A color name.")}),
                    &["room", "state"]
                ),
                tool(
                    "set_thermostat",
                    "Set the target temperature of the heating or cooling.",
                    json!({
                    "temperature": int("Degrees.", 5, 35), "mode": en("Heating mode.", &["heat", "cool", "auto"])}),
                    &["temperature"]
                ),
                tool(
                    "lock_door",
                    "Lock a door.",
                    json!({"door": s("Which door.")}),
                    &["door"]
                ),
                tool(
                    "unlock_door",
                    "Unlock a door.",
                    json!({"door": s("Which door.")}),
                    &["door"]
                ),
            ]),
            generate: smart_home,
        },
        Family {
            name: "music",
            tools: json!([
                tool(
                    "play_music",
                    "Play a song, album, artist or playlist.",
                    json!({
                    "query": s("What to play."), "shuffle": {"type": "boolean", "description": "Shuffle the tracks."}}),
                    &["query"]
                ),
                tool("pause_music", "Pause playback.", json!({}), &[]),
                tool(
                    "skip_track",
                    "Skip to a later track.",
                    json!({"count": int("How many tracks to skip.", 1, 50)}),
                    &[]
                ),
                tool(
                    "set_music_volume",
                    "Set the music volume.",
                    json!({"level": int("Volume in percent.", 0, 100)}),
                    &["level"]
                ),
            ]),
            generate: music,
        },
        Family {
            name: "calendar",
            tools: json!([
                tool(
                    "create_event",
                    "Add an event to the calendar.",
                    json!({
                    "title": s("Event title."), "date": s("The day, as said."), "time": s("The time, as said.")}),
                    &["title", "date"]
                ),
                tool(
                    "list_events",
                    "List the events on a day.",
                    json!({"date": s("The day, as said.")}),
                    &["date"]
                ),
                tool(
                    "cancel_event",
                    "Cancel an event.",
                    json!({"title": s("Event title.")}),
                    &["title"]
                ),
            ]),
            generate: calendar,
        },
        Family {
            name: "files",
            tools: json!([
                tool(
                    "move_file",
                    "Move a file into a folder.",
                    json!({"path": s("The file."), "folder": s("The destination folder.")}),
                    &["path", "folder"]
                ),
                tool(
                    "rename_file",
                    "Rename a file.",
                    json!({"path": s("The file."), "new_name": s("Its new name.")}),
                    &["path", "new_name"]
                ),
                tool(
                    "delete_file",
                    "Delete a file.",
                    json!({"path": s("The file.")}),
                    &["path"]
                ),
                tool(
                    "search_files",
                    "Search files by content.",
                    json!({
                    "query": s("What the files are about."), "kind": en("File kind.", &["document", "image", "audio", "any"])}),
                    &["query"]
                ),
            ]),
            generate: files,
        },
        Family {
            name: "commerce",
            tools: json!([
                tool(
                    "add_to_cart",
                    "Add a product to the shopping cart.",
                    json!({
                    "item": s("The product."), "quantity": int("How many.", 1, 99)}),
                    &["item"]
                ),
                tool(
                    "track_order",
                    "Show the delivery status of an order.",
                    json!({"order_id": s("The order number.")}),
                    &["order_id"]
                ),
                tool(
                    "cancel_order",
                    "Cancel an order.",
                    json!({"order_id": s("The order number.")}),
                    &["order_id"]
                ),
                tool(
                    "search_products",
                    "Search the shop.",
                    json!({
                    "query": s("What to look for."), "sort": en("Sort order.", &["price_low", "price_high", "rating", "newest"])}),
                    &["query"]
                ),
            ]),
            generate: commerce,
        },
        Family {
            name: "weather",
            tools: json!([
                tool(
                    "get_weather",
                    "Current weather in a city.",
                    json!({
                    "city": s("The city."), "unit": en("Temperature unit.", &["celsius", "fahrenheit"])}),
                    &["city"]
                ),
                tool(
                    "get_forecast",
                    "Weather forecast for the coming days.",
                    json!({
                    "city": s("The city."), "days": int("How many days.", 1, 14)}),
                    &["city", "days"]
                ),
            ]),
            generate: weather,
        },
        Family {
            name: "navigation",
            tools: json!([
                tool(
                    "get_directions",
                    "Route to a destination.",
                    json!({
                    "destination": s("Where to go."), "mode": en("How to travel.", &["driving", "walking", "transit", "cycling"])}),
                    &["destination"]
                ),
                tool(
                    "find_nearby",
                    "Find places of a kind near the user.",
                    json!({"category": s("Kind of place.")}),
                    &["category"]
                ),
            ]),
            generate: navigation,
        },
        Family {
            name: "messaging",
            tools: json!([
                tool(
                    "send_message",
                    "Send a text message.",
                    json!({"recipient": s("Who to send it to."), "body": s("The message.")}),
                    &["recipient", "body"]
                ),
                tool(
                    "call_contact",
                    "Start a phone call.",
                    json!({"name": s("Who to call.")}),
                    &["name"]
                ),
            ]),
            generate: messaging,
        },
        Family {
            name: "timers",
            tools: json!([
                tool(
                    "set_timer",
                    "Start a countdown timer.",
                    json!({"minutes": int("Duration in minutes.", 1, 600), "label": s("What it is for.")}),
                    &["minutes"]
                ),
                tool(
                    "set_alarm",
                    "Set an alarm.",
                    json!({"time": s("The time, as said.")}),
                    &["time"]
                ),
            ]),
            generate: timers,
        },
        Family {
            name: "todos",
            tools: json!([
                tool(
                    "add_todo",
                    "Add a task to a to-do list.",
                    json!({"task": s("The task."), "list": s("Which list.")}),
                    &["task"]
                ),
                tool(
                    "complete_todo",
                    "Mark a task as done.",
                    json!({"task": s("The task.")}),
                    &["task"]
                ),
            ]),
            generate: todos,
        },
    ]
}

/// `n` distinct synthetic requests across all families (round-robin by family), each with its
/// family's catalog in `tools` (OpenAI form). Every trace passes the DSL round trip and
/// copy-fidelity validation against that catalog.
pub fn synthetic_traces(n: usize, seed: u64) -> Result<Vec<Trace>, DataError> {
    let fams = families();
    let checks: Vec<(Catalog, PlanValidator)> = fams
        .iter()
        .map(|f| {
            let c = f.catalog();
            let v = PlanValidator::new(&c)?;
            Ok((c, v))
        })
        .collect::<Result<_, DataError>>()?;
    let mut rng = Rng::new(seed).fork(0xFA11);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut budget = crate::DrawBudget::new(n, "synthetic requests");
    while out.len() < n {
        budget.draw(out.len())?;
        let i = out.len() % fams.len();
        let draft = (fams[i].generate)(&mut rng);
        let r = gen::realize(&draft, &mut rng);
        if !seen.insert(r.request.to_lowercase()) {
            continue;
        }
        let (catalog, validator) = &checks[i];
        // Typed values (integers, booleans) come from the schema, as after DSL parsing.
        let what = format!("family {}", fams[i].name);
        out.push(checked_trace(
            validator, catalog, &r.plan, r.request, &what,
        )?);
    }
    Ok(out)
}

/// A synthetic trace carrying its own catalog, once its plan (typed from the schema, as after
/// DSL parsing) survives the DSL round trip and copy-fidelity validation; else a bug, named.
/// [`checked_trace`] for a request with its own catalog, given as OpenAI tool values.
pub(crate) fn trace_with_tools(
    tools: Vec<serde_json::Value>,
    calls: Vec<plansmith_core::Call>,
    request: String,
    what: &str,
) -> Result<Trace, DataError> {
    let catalog = Catalog::from_value(&serde_json::Value::Array(tools))?;
    let validator = PlanValidator::new(&catalog)?;
    checked_trace(
        &validator,
        &catalog,
        &plansmith_core::Plan::new(calls),
        request,
        what,
    )
}

pub(crate) fn checked_trace(
    validator: &PlanValidator,
    catalog: &Catalog,
    plan: &plansmith_core::Plan,
    request: String,
    what: &str,
) -> Result<Trace, DataError> {
    let plan = validator.type_values(plan);
    if !crate::pace::round_trips(validator, &Policy::copy_free_strings(), &plan, &request) {
        return Err(DataError::Invalid(format!(
            "{what}: {request:?} does not validate: {plan:?}"
        )));
    }
    Ok(Trace {
        request,
        calls: plan.calls,
        tools: Some(catalog.to_openai()),
        source: TraceSource::Synthetic,
        spoken_text: None,
    })
}

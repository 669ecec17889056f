//! Requests no Pace tool serves: things in the physical world, other devices, money, the
//! weather, watching something in the background. The right plan calls nothing (`done`), so
//! the planner learns that a catalog has edges instead of forcing the nearest verb.

use super::*;

/// (verb phrase, objects). Each pairing is something a desktop assistant cannot do.
const ERRANDS: &[(&str, &[&str])] = &[
    (
        "order",
        &[
            "some sushi",
            "a burrito",
            "groceries for the week",
            "a new phone charger",
            "flowers for my sister",
            "dinner for tonight",
            "more printer ink",
            "a large coffee",
        ],
    ),
    (
        "book",
        &[
            "a table for two at eight",
            "a flight to Denver",
            "a hotel room for Friday",
            "a haircut for Saturday",
            "a taxi to the airport",
            "a dentist appointment",
        ],
    ),
    (
        "turn on",
        &[
            "the porch light",
            "the kitchen lights",
            "the coffee maker",
            "the sprinklers",
            "the air conditioner",
            "the TV in the living room",
        ],
    ),
    (
        "turn off",
        &[
            "the oven",
            "the bedroom lights",
            "the heater downstairs",
            "the washing machine",
        ],
    ),
    (
        "lock",
        &["the back door", "the garage", "the car", "the side gate"],
    ),
    ("unlock", &["the car", "the garage door", "the back door"]),
    (
        "start",
        &["the dishwasher", "the car", "the robot vacuum", "the dryer"],
    ),
    (
        "pay",
        &[
            "my electric bill",
            "the rent",
            "my credit card",
            "the water bill",
            "back my friend",
        ],
    ),
    (
        "transfer",
        &[
            "200 dollars to savings",
            "money to my checking account",
            "fifty bucks to my brother",
        ],
    ),
    (
        "buy",
        &[
            "ten shares of Tesla",
            "a new laptop",
            "concert tickets",
            "a birthday present for Dad",
        ],
    ),
    (
        "keep an eye on",
        &[
            "my heart rate",
            "the stock market all day",
            "my bank account for big charges",
            "the baby while I shower",
        ],
    ),
    (
        "track",
        &[
            "my steps all day",
            "my sleep tonight",
            "my package",
            "my calories",
        ],
    ),
    ("feed", &["the cat", "the dog", "the fish"]),
    ("water", &["the plants", "the garden", "the lawn"]),
];

/// Whole requests of the same kind that do not split into a verb and an object.
const OUT_OF_REACH: &[&str] = &[
    "walk the dog",
    "take out the trash",
    "fold the laundry",
    "mow the lawn",
    "wash the dishes",
    "make me a sandwich",
    "brew some tea",
    "preheat the oven to 400",
    "set the thermostat downstairs to 70",
    "call an Uber",
    "get me a ride home",
    "start my car so it warms up",
    "vacuum the living room",
    "print my boarding pass",
    "fix my bike",
    "charge my phone",
];

/// Questions about the world outside the computer, which no Pace source holds.
const WORLD_QUESTIONS: &[&str] = &[
    "what's the weather like tomorrow",
    "will it rain this afternoon",
    "how cold is it outside",
    "do I need an umbrella today",
    "what's the temperature outside right now",
    "is it going to snow this weekend",
    "how's the traffic on the highway",
    "who won the game last night",
    "what's my heart rate",
    "how many steps have I walked today",
    "is the front gate closed",
    "are the kids home yet",
];

pub(super) fn out_of_scope(rng: &mut Rng) -> Draft {
    match rng.below(10) {
        0..=5 => {
            let mut d = Draft::new("none", Style::Imperative);
            let (verb, objects) = *rng.pick(ERRANDS);
            d.tpl = format!("{verb} {}", rng.pick(objects));
            d
        }
        6..=7 => {
            let mut d = Draft::new("none", Style::Imperative);
            d.tpl = rng.pick(OUT_OF_REACH).to_string();
            d
        }
        _ => {
            let mut d = Draft::new("none", Style::Question);
            d.tpl = rng.pick(WORLD_QUESTIONS).to_string();
            d
        }
    }
}

//! Shared by the integration tests: one tiny trained planner per test binary.

#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use plansmith_core::{Trace, TraceSource};
use plansmith_lm::{Progress, TinyGptConfig, TrainConfig};
use plansmith_planner::train::{train_planner, Splits, TrainSpec};
use plansmith_planner::{Planner, PlannerSettings};
use serde_json::{json, Value};

/// A tiny planner trained in a few seconds on generated Pace traces. Quality does not
/// matter here: validity is guaranteed by the constraint. The floor is as low as it goes, so
/// the model always answers (escalation is tested with a floor above every confidence).
pub fn planner() -> Arc<Planner> {
    static P: OnceLock<Arc<Planner>> = OnceLock::new();
    P.get_or_init(|| Arc::new(train_tiny(f32::MIN))).clone()
}

pub fn train_tiny(floor: f32) -> Planner {
    let data =
        plansmith_data::generate_pace(&plansmith_data::PaceConfig::with_n(300)).expect("pace data");
    let mut train = data.train;
    // Two-call plans (`a | b`), so the separator is in the codec's vocabulary, and one request
    // with every printable ASCII character, so any request a test sends can be copied from.
    let singles: Vec<Trace> = train
        .iter()
        .filter(|t| t.calls.len() == 1 && t.request.len() < 40)
        .cloned()
        .collect();
    for pair in singles.chunks(2).take(60) {
        if let [a, b] = pair {
            let mut t = a.clone();
            t.request = format!("{} and then {}", a.request, b.request);
            t.calls.extend(b.calls.clone());
            train.push(t);
        }
    }
    let ascii: String = (32u8..127).map(char::from).collect();
    train.push(Trace {
        request: ascii,
        calls: Vec::new(),
        tools: None,
        source: TraceSource::Synthetic,
        spoken_text: None,
    });
    let splits = Splits {
        train,
        calibration: Vec::new(),
        test: Vec::new(),
    };
    let spec = TrainSpec {
        model: TinyGptConfig {
            d_model: 32,
            n_layer: 1,
            n_head: 2,
            // Room for four calls whose values are whole request phrases: this toy model
            // repeats its call up to the limit.
            block: 512,
            ..TinyGptConfig::default()
        },
        // mixle's character codec: these toy-domain invariants were set on it.
        codec: plansmith_planner::train::CodecChoice::Char,
        train: TrainConfig {
            epochs: 3,
            batch_size: 32,
            lr: 3e-3,
            seed: 0,
            ..TrainConfig::default()
        },
        settings: PlannerSettings {
            conf_floor: floor,
            ..PlannerSettings::dsl()
        },
        floor: plansmith_planner::FloorRule::ZERO_WRONG,
        piece_dropout: 0.0,
        other_confidence: Vec::new(),
    };
    let mut p = train_planner(
        &splits,
        plansmith_data::pace_catalog(),
        &spec,
        Progress::Hidden,
        |_, _, _| {},
    )
    .expect("training the tiny planner")
    .planner;
    p.set_floor(floor);
    p
}

/// An OpenAI `tools` list unlike the planner's own catalog.
pub fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "City name, copied from the request."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "send_message", "description": "Send a text message.",
            "parameters": {"type": "object", "properties": {
                "to": {"type": "string"}, "text": {"type": "string"}},
            "required": ["to", "text"]}}}
    ])
}

pub fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

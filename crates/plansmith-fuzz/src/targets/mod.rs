//! The fuzz targets, one per parser or entry point, each seeded from real inputs.

mod formats;
mod gguf;
mod grammar;
mod http;
mod planner;
mod tokenizer;

use serde_json::{json, Value};

use crate::Target;

/// Every target's name and what it covers, in the order `all` runs them.
pub const TARGETS: &[(&str, &str)] = &[
    ("catalog", "catalog importers (OpenAI, MCP, Anthropic, BFCL, xLAM), the JSON Schema subset, $ref inlining, plan validation"),
    ("plan", "plan parsers: DSL, envelope, OpenAI message, JSON array; render/parse round trip"),
    ("traces", "trace JSONL lines and BFCL gold answers"),
    ("chat", "chat templates (ChatML and a native-tools template) with hostile catalogs and requests"),
    ("grammar", "catalog x options x request -> grammar: compiles or a typed error; random decodes parse and validate"),
    ("planner", "planner.json and weights of the embedded planner: load or a typed error, then plan"),
    ("gguf", "the GGUF reader and model loader: truncated, bit-flipped and size-lying files; a loaded model runs"),
    ("tokenizer", "tokenizer.json loading, and encode/decode of arbitrary text (round trip)"),
    ("http", "every HTTP route in process (the embedded planner): no 5xx from client input, errors OpenAI-shaped"),
];

/// Build a target by name.
pub fn make(name: &str) -> Result<Box<dyn Target>, String> {
    Ok(match name {
        "catalog" => Box::new(formats::CatalogTarget::new()),
        "plan" => Box::new(formats::PlanTarget::new()),
        "traces" => Box::new(formats::TracesTarget::new()),
        "chat" => Box::new(formats::ChatTarget::new()),
        "grammar" => Box::new(grammar::GrammarTarget::new()?),
        "planner" => Box::new(planner::PlannerTarget::new()),
        "gguf" => Box::new(gguf::GgufTarget::new()?),
        "tokenizer" => Box::new(tokenizer::TokenizerTarget::new()?),
        "http" => Box::new(http::HttpTarget::new()?),
        other => {
            return Err(format!(
                "unknown target `{other}`; targets: {}",
                TARGETS.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            ))
        }
    })
}

/// The Pace catalog as OpenAI tools (the seed every catalog format is made from).
pub fn pace_openai() -> Value {
    plansmith_data::pace_catalog().to_openai()
}

/// The Pace catalog in each format the importers detect, plus schemas with `$ref`.
pub fn catalog_seeds() -> Vec<Value> {
    let openai = pace_openai();
    let fns: Vec<Value> = openai
        .as_array()
        .map(|a| a.iter().map(|t| t["function"].clone()).collect())
        .unwrap_or_default();
    let mcp = json!({"tools": fns.iter().map(|f| json!({
        "name": f["name"], "description": f["description"], "inputSchema": f["parameters"]})).collect::<Vec<_>>()});
    let anthropic: Vec<Value> = fns
        .iter()
        .map(|f| json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}))
        .collect();
    let bfcl: Vec<Value> = fns
        .iter()
        .map(|f| {
            let mut p = f["parameters"].clone();
            p["type"] = json!("dict");
            json!({"name": f["name"], "description": f["description"], "parameters": p})
        })
        .collect();
    let xlam: Vec<Value> = fns
        .iter()
        .map(|f| {
            let props = f["parameters"]["properties"].as_object().cloned().unwrap_or_default();
            let params: serde_json::Map<String, Value> = props
                .into_iter()
                .map(|(k, v)| (k, json!({"type": v.get("type").cloned().unwrap_or(json!("str")), "description": "x"})))
                .collect();
            json!({"name": f["name"], "description": f["description"], "parameters": params})
        })
        .collect();
    let refs = json!([{"type": "function", "function": {"name": "book", "description": "Book a trip.",
        "parameters": {"type": "object", "$defs": {
            "place": {"type": "object", "properties": {"city": {"type": "string"}, "code": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["city"]},
            "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}},
          "properties": {"from": {"$ref": "#/$defs/place"}, "to": {"$ref": "#/$defs/place"},
            "on": {"$ref": "#/$defs/when"}, "seats": {"type": "integer", "minimum": 1, "maximum": 9},
            "class": {"enum": ["economy", "business"]}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
          "required": ["from", "to"]}}}]);
    let weather = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "copied from the request"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]);
    vec![
        openai,
        mcp,
        Value::Array(anthropic),
        Value::Array(bfcl),
        Value::Array(xlam),
        refs,
        weather,
    ]
}

//! Catalog importers on samples shaped like each format's public documentation.

use plansmith_core::{Catalog, CatalogFormat};
use serde_json::json;

const WEATHER_OPENAI: &str = r#"{"tools": [{"type": "function", "function": {
  "name": "get_weather", "description": "Get current temperature for a given location.",
  "parameters": {"type": "object", "properties": {
    "location": {"type": "string", "description": "City and country e.g. Bogotá, Colombia"},
    "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location"], "additionalProperties": false},
  "strict": true}}]}"#;

// The same tool as an MCP `tools/list` result and in Anthropic's form, keys reordered.
const WEATHER_MCP: &str = r#"{"tools": [{"name": "get_weather", "title": "Weather",
  "description": "Get current temperature for a given location.",
  "inputSchema": {"additionalProperties": false, "required": ["location"], "type": "object",
    "properties": {"units": {"enum": ["celsius", "fahrenheit"], "type": "string"},
      "location": {"description": "City and country e.g. Bogotá, Colombia", "type": "string"}}},
  "annotations": {"readOnlyHint": true}}]}"#;

const WEATHER_ANTHROPIC: &str = r#"[{"name": "get_weather",
  "description": "Get current temperature for a given location.",
  "input_schema": {"type": "object", "required": ["location"], "additionalProperties": false,
    "properties": {"location": {"type": "string", "description": "City and country e.g. Bogotá, Colombia"},
      "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}]"#;

// A function list from BFCL v4 simple_python (BFCL_v4_simple_python.json, id simple_python_0).
const BFCL_LINE: &str = r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "Find the area of a triangle with a base of 10 units and height of 5 units."}]], "function": [{"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given its base and height.", "parameters": {"type": "dict", "properties": {"base": {"type": "integer", "description": "The base of the triangle."}, "height": {"type": "integer", "description": "The height of the triangle."}, "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"}}, "required": ["base", "height"]}}]}"#;

// An xLAM-function-calling-60k record's `tools` field (a JSON string in the dataset).
const XLAM_TOOLS: &str = r#"[{"name": "live_giveaways_by_type", "description": "Retrieve live giveaways from the GamerPower API based on the specified type.", "parameters": {"type": {"description": "The type of giveaways to retrieve (e.g., game, loot, beta).", "type": "str", "default": "game"}}}, {"name": "get_prime_numbers", "description": "List primes.", "parameters": {"limit": {"description": "Upper bound.", "type": "int, optional", "default": ""}, "ids": {"description": "Ids.", "type": "List[int]", "default": ""}}}]"#;

#[test]
fn openai_mcp_anthropic_forms_hash_alike() {
    let openai = Catalog::from_json_str(WEATHER_OPENAI).unwrap();
    let mcp = Catalog::from_json_str(WEATHER_MCP).unwrap();
    let anthropic = Catalog::from_json_str(WEATHER_ANTHROPIC).unwrap();
    assert_eq!(openai.format, CatalogFormat::OpenAi);
    assert_eq!(mcp.format, CatalogFormat::Mcp);
    assert_eq!(anthropic.format, CatalogFormat::Anthropic);
    assert_eq!(openai.hash(), mcp.hash());
    assert_eq!(openai.hash(), anthropic.hash());
    assert_eq!(
        mcp.tools[0].annotations,
        Some(json!({"readOnlyHint": true}))
    );
    // Whitespace and a bare array do not matter either.
    let bare: serde_json::Value = serde_json::from_str(WEATHER_OPENAI).unwrap();
    let compact = serde_json::to_string(&bare["tools"]).unwrap();
    assert_eq!(
        Catalog::from_json_str(&compact).unwrap().hash(),
        openai.hash()
    );
}

#[test]
fn hash_changes_with_content() {
    let a = Catalog::from_json_str(WEATHER_OPENAI).unwrap();
    let b = Catalog::from_json_str(&WEATHER_OPENAI.replace("fahrenheit", "kelvin")).unwrap();
    assert_ne!(a.hash(), b.hash());
}

#[test]
fn bfcl_function_list() {
    let line: serde_json::Value = serde_json::from_str(BFCL_LINE).unwrap();
    let c = Catalog::from_value(&line["function"]).unwrap();
    assert_eq!(c.format, CatalogFormat::Bfcl);
    let p = &c.tools[0].parameters;
    assert_eq!(p["type"], "object");
    assert_eq!(p["properties"]["base"]["type"], "integer");
    let odd = json!([{"name": "spotify.play", "description": "", "parameters": {"type": "dict",
        "properties": {"ratio": {"type": "float"}, "pair": {"type": "tuple", "items": {"type": "float"}},
                       "anything": {"type": "any"}, "opts": {"type": "dict", "properties": {}}},
        "required": ["ratio"]}}]);
    let c = Catalog::from_value(&odd).unwrap();
    let p = &c.tools[0].parameters["properties"];
    assert_eq!(c.tools[0].name, "spotify.play");
    assert_eq!(p["ratio"], json!({"type": "number"}));
    assert_eq!(
        p["pair"],
        json!({"type": "array", "items": {"type": "number"}})
    );
    assert_eq!(p["anything"], json!({}));
    assert_eq!(p["opts"]["type"], "object");
}

#[test]
fn xlam_tools() {
    let c = Catalog::from_json_str(XLAM_TOOLS).unwrap();
    assert_eq!(c.format, CatalogFormat::Xlam);
    let p = &c.tools[0].parameters;
    assert_eq!(p["properties"]["type"]["type"], "string");
    assert_eq!(p["properties"]["type"]["default"], "game");
    assert_eq!(p["required"], json!(["type"]));
    let p = &c.tools[1].parameters;
    assert_eq!(p["properties"]["ids"]["items"], json!({"type": "integer"}));
    assert_eq!(p["required"], json!(["ids"]));
}

#[test]
fn pace_catalog_imports() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pace/tools.json"
    );
    let c = Catalog::from_file(path).unwrap();
    assert_eq!(c.len(), 10);
    assert_eq!(
        c.names().collect::<Vec<_>>(),
        [
            "perform",
            "set",
            "open",
            "query",
            "compose",
            "clarify",
            "say",
            "query_memory",
            "wait",
            "schedule"
        ]
    );
}

fn err(text: &str) -> String {
    Catalog::from_json_str(text).unwrap_err().to_string()
}

#[test]
fn bad_catalogs_are_named_with_their_path() {
    assert_eq!(
        err(r#"[{"name":"a","parameters":{}},{"name":"b"},{"name":"a"}]"#),
        "duplicate tool name `a` at $[2] (first defined at $[0])"
    );
    assert_eq!(err(r#"[{"name":""}]"#), "tool name is empty at $[0].name");
    assert!(err(r#"[{"name":"has space"}]"#).contains("at $[0].name"));
    assert!(err(
        r#"{"tools":[{"type":"function","function":{"name":"x","parameters":{"type":"string"}}}]}"#
    )
    .contains("parameters must be an object schema"));
    assert_eq!(
        err(
            r##"[{"name":"x","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/Nope"}}}}]"##
        ),
        "$ref `#/$defs/Nope` does not resolve at $[0].parameters.properties.a"
    );
    assert_eq!(
        err(
            r#"[{"name":"x","input_schema":{"type":"object","properties":{"a":{"type":"string","oneOf":[]}}}}]"#
        ),
        "unsupported schema feature `oneOf` at $[0].input_schema.properties.a"
    );
    assert!(err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"a=b":{"type":"string"}}}}]"#
    )
    .contains("parameter name `a=b`"));
    assert!(err("[1,").starts_with("catalog is not valid JSON"));
    assert!(err(r#"{"tools": 3}"#).contains("at $.tools"));
}

/// Found by `plansmith-fuzz grammar`: catalogs the importer accepted but the plan validator
/// could not compile (planning then failed), or whose arguments-object `const` the grammar
/// ignored. Both are refused at import now, naming the place.
#[test]
fn fuzz_regressions_schemas_the_validator_or_grammar_could_not_honour() {
    let e = err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"when":{"type":"string","description":0}}}}]"#,
    );
    assert!(
        e.contains("not valid JSON Schema")
            && e.contains("$[0].parameters.properties.when.description"),
        "{e}"
    );
    let e = err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"n":{"type":"integer","minimum":"one"}}}}]"#,
    );
    assert!(e.contains("$[0].parameters.properties.n.minimum"), "{e}");
    let e =
        err(r#"[{"name":"open","inputSchema":{"type":"object","properties":{},"const":"open"}}]"#);
    assert!(
        e.contains("`const` on the arguments object") && e.contains("$[0].inputSchema.const"),
        "{e}"
    );
    // A `pattern` that is not a regex (found by the long grammar run).
    let e = err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"code":{"type":"string","pattern":"["}}}}]"#,
    );
    assert!(
        e.contains("not valid JSON Schema") && e.contains("$[0].parameters"),
        "{e}"
    );
    // A `pattern` the validator compiles but ECMA-262 rejects, which the grammar read as 27
    // letters and the validator as nothing (found by the long grammar run).
    let e = err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}{3}{3}$"}}}}]"#,
    );
    assert!(
        e.contains("not an ECMA-262 regex")
            && e.contains("nothing to repeat")
            && e.contains("$[0].parameters.properties.code.pattern"),
        "{e}"
    );
    // A parameter name with a control character (found by the long grammar run: a NUL).
    let e = err(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"uni\u0000t":{"type":"string"}}}}]"#,
    );
    assert!(e.contains("has characters a plan cannot carry"), "{e}");
    // Every accepted catalog compiles into a validator.
    let ok = Catalog::from_json_str(
        r#"[{"name":"x","parameters":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}}]"#,
    )
    .unwrap();
    plansmith_core::validate::PlanValidator::new(&ok).unwrap();
}

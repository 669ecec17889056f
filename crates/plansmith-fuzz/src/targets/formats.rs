//! Pure parsers: catalogs, plans, traces, chat templates.

use plansmith_core::validate::PlanValidator;
use plansmith_core::{Catalog, Plan, Policy, Syntax};
use plansmith_llama::{ChatMessage, ChatTemplate};
use serde_json::Value;

use super::catalog_seeds;
use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

pub struct CatalogTarget {
    seeds: Vec<Value>,
}

impl CatalogTarget {
    pub fn new() -> Self {
        CatalogTarget {
            seeds: catalog_seeds(),
        }
    }
}

impl Target for CatalogTarget {
    fn name(&self) -> &'static str {
        "catalog"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let seed = rng.pick(&self.seeds).clone();
        let donor = rng.pick(&self.seeds).clone();
        mutate::json_bytes(rng, &seed, &donor)
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Ok(text) = std::str::from_utf8(input) else {
            return Ok(Verdict::Refused);
        };
        let catalog = match Catalog::from_json_str(text) {
            Ok(c) => c,
            Err(e) => {
                if e.to_string().is_empty() {
                    return Err("a catalog error with an empty message".into());
                }
                return Ok(Verdict::Refused);
            }
        };
        // An accepted catalog must survive its own round trip and back a validator.
        let again = Catalog::from_value(&catalog.to_openai()).map_err(|e| {
            format!("an accepted catalog does not re-import from its OpenAI form: {e}")
        })?;
        if again.hash() != catalog.hash() {
            return Err(
                "the OpenAI form of an accepted catalog imports as a different catalog".into(),
            );
        }
        let _ = catalog.compact_line();
        let _ = catalog.described_lines();
        if let Ok(v) = PlanValidator::new(&catalog) {
            if let Some(tool) = catalog.tools.first() {
                let plan = Plan {
                    calls: vec![plansmith_core::Call::new(
                        tool.name.clone(),
                        Default::default(),
                    )],
                    spoken_text: None,
                };
                let _ = v.validate(&plan, &Policy::default(), Some("open it"));
            }
        }
        Ok(Verdict::Accepted)
    }
}

pub struct PlanTarget {
    seeds: Vec<(Syntax, String)>,
}

impl PlanTarget {
    pub fn new() -> Self {
        let texts = [
            "open(target.type=app; target.label=safari)\n",
            "perform(action=click; target.label=Save) | set(target=volume; value=50)\n",
            "done\n",
        ];
        let mut seeds = Vec::new();
        for t in texts {
            let plan = Syntax::Dsl.parse(t).expect("seed plans parse");
            for syntax in [
                Syntax::Dsl,
                Syntax::Envelope,
                Syntax::OpenAi,
                Syntax::JsonArray,
            ] {
                seeds.push((syntax, syntax.render(&plan)));
            }
        }
        PlanTarget { seeds }
    }
}

impl Target for PlanTarget {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let (syntax, seed) = rng.pick(&self.seeds).clone();
        // First byte: which parser; the rest: the text, mutated as JSON or as text.
        let body = match (syntax, rng.chance(0.5)) {
            (Syntax::Dsl, _) | (_, false) => {
                let r = 1 + rng.below(4);
                mutate::text(rng, &seed, r)
            }
            (_, true) => {
                let v: Value = serde_json::from_str(&seed).unwrap_or(Value::Null);
                String::from_utf8_lossy(&mutate::json_bytes(rng, &v, &v)).into_owned()
            }
        };
        let mut out = vec![syntax as u8];
        out.extend_from_slice(body.as_bytes());
        out
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Some((&which, rest)) = input.split_first() else {
            return Ok(Verdict::Refused);
        };
        let text = String::from_utf8_lossy(rest);
        let syntax = [
            Syntax::Dsl,
            Syntax::Envelope,
            Syntax::OpenAi,
            Syntax::JsonArray,
        ][which as usize % 4];
        let plan = match syntax.parse(&text) {
            Ok(p) => p,
            Err(_) => return Ok(Verdict::Refused),
        };
        // What a syntax accepts, it must render and read back as the same plan (values as the
        // syntax carries them: the DSL has untyped strings).
        let rendered = syntax.render(&plan);
        let back = syntax.parse(&rendered).map_err(|e| {
            format!("{syntax:?}: a parsed plan renders to text it cannot parse ({e}): {rendered:?}")
        })?;
        if back != plan {
            return Err(format!(
                "{syntax:?}: render/parse changed the plan: {plan:?} -> {back:?}"
            ));
        }
        Ok(Verdict::Accepted)
    }
}

pub struct TracesTarget {
    seeds: Vec<Value>,
}

impl TracesTarget {
    pub fn new() -> Self {
        let seeds = vec![
            serde_json::json!({"request": "open safari", "calls": [{"name": "open", "arguments": {"target": {"type": "app", "label": "safari"}}}], "source": "teacher"}),
            serde_json::json!({"request": "hi", "calls": [], "tools": super::pace_openai(), "source": "harvest", "spoken_text": "hello"}),
            serde_json::json!({"ground_truth": [{"get_weather": {"city": ["Paris", "paris"], "unit": ["", "celsius"]}}]}),
        ];
        TracesTarget { seeds }
    }
}

impl Target for TracesTarget {
    fn name(&self) -> &'static str {
        "traces"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let seed = rng.pick(&self.seeds).clone();
        let donor = rng.pick(&self.seeds).clone();
        mutate::json_bytes(rng, &seed, &donor)
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Ok(v) = serde_json::from_slice::<Value>(input) else {
            return Ok(Verdict::Refused);
        };
        let mut accepted = false;
        if let Ok(t) = serde_json::from_value::<plansmith_core::Trace>(v.clone()) {
            let line = serde_json::to_string(&t).map_err(|e| e.to_string())?;
            let again: plansmith_core::Trace = serde_json::from_str(&line)
                .map_err(|e| format!("a written trace does not read back: {e}"))?;
            if again != t {
                return Err("a trace changed on its way through JSONL".into());
            }
            if let Some(tools) = &t.tools {
                let _ = Catalog::from_value(tools);
            }
            accepted = true;
        }
        if let Some(gt) = v.get("ground_truth") {
            if let Ok(calls) = plansmith_core::bfcl::GoldCall::parse_list(gt) {
                for c in calls {
                    let _ = c.to_bfcl();
                    let _ = c.first_accepted();
                }
                accepted = true;
            }
        }
        Ok(if accepted {
            Verdict::Accepted
        } else {
            Verdict::Refused
        })
    }
}

/// A template in the style of Qwen's and SmolLM2's: it renders `tools` itself.
const NATIVE_TOOLS_TEMPLATE: &str = "{%- if tools %}<|im_start|>system\nTools:\n{%- for t in tools %}\n{{ t | tojson }}{%- endfor %}<|im_end|>\n{%- endif %}{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

pub struct ChatTarget {
    seeds: Vec<Value>,
    templates: Vec<ChatTemplate>,
}

impl ChatTarget {
    pub fn new() -> Self {
        ChatTarget {
            seeds: catalog_seeds(),
            templates: vec![
                ChatTemplate::chatml(),
                ChatTemplate::new(NATIVE_TOOLS_TEMPLATE, "", "<|im_end|>")
                    .expect("the template compiles"),
            ],
        }
    }
}

impl Target for ChatTarget {
    fn name(&self) -> &'static str {
        "chat"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let seed = rng.pick(&self.seeds).clone();
        let donor = rng.pick(&self.seeds).clone();
        let r = rng.below(5);
        let request = mutate::text(rng, "open {{ tools }} safari", r);
        let mut v = serde_json::json!({"tools": seed, "request": request});
        let rounds = 1 + rng.below(3);
        mutate::json(rng, &mut v, rounds, &donor);
        serde_json::to_vec(&v).unwrap_or_default()
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Ok(v) = serde_json::from_slice::<Value>(input) else {
            return Ok(Verdict::Refused);
        };
        let tools = v.get("tools").cloned().unwrap_or(Value::Null);
        let request = v.get("request").and_then(Value::as_str).unwrap_or("");
        let mut accepted = false;
        for t in &self.templates {
            match t.tools_prompt(None, &tools, request) {
                Ok(p) => {
                    // The request and the catalog are data: they must not open a new turn.
                    if !p.full.starts_with(&p.prefix) {
                        return Err("the system message is not a prefix of the prompt".into());
                    }
                    accepted = true;
                }
                Err(e) if e.to_string().is_empty() => return Err("an empty template error".into()),
                Err(_) => {}
            }
            let _ = t.render(&[ChatMessage::new("user", request)], Some(&tools), true);
        }
        Ok(if accepted {
            Verdict::Accepted
        } else {
            Verdict::Refused
        })
    }
}

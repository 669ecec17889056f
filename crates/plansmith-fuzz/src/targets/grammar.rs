//! Catalog x options x request -> grammar. A catalog and options either compile or give a
//! typed error; what a random walk through the compiled grammar writes must parse in its
//! syntax and validate against the catalog and the policy (the grammar is never looser than
//! the validator).

use plansmith_core::validate::PlanValidator;
use plansmith_core::{Catalog, Policy, Syntax};
use plansmith_grammar::{Engine, GrammarError, Options, Request, TokEnv, ToolChoice};
use serde_json::{json, Value};

use super::catalog_seeds;
use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

pub struct GrammarTarget {
    seeds: Vec<Value>,
    engine: Engine,
    env: TokEnv,
    closers: Vec<bool>,
}

/// One token per byte (control characters included: a schema may name them) and EOS: every
/// output is reachable.
fn char_env() -> Result<TokEnv, String> {
    let mut toks: Vec<Vec<u8>> = (0u8..=0xff).map(|b| vec![b]).collect();
    toks.push(b"<eos>".to_vec());
    let eos = toks.len() as u32 - 1;
    TokEnv::from_token_bytes(toks, eos, &[], Some(264)).map_err(|e| e.to_string())
}

impl GrammarTarget {
    pub fn new() -> Result<Self, String> {
        let env = char_env()?;
        // A small cache: a fuzz run compiles many distinct catalogs.
        let engine = Engine::with_capacity(env.clone(), 16, 16 << 20).map_err(|e| e.to_string())?;
        let closers = (0..env.vocab_size() as u32)
            .map(|t| t == env.eos() || env.token_bytes(t).iter().any(|c| b"\"}])\n;|,".contains(c)))
            .collect();
        Ok(GrammarTarget {
            seeds: catalog_seeds(),
            engine,
            env,
            closers,
        })
    }
}

impl Target for GrammarTarget {
    fn name(&self) -> &'static str {
        "grammar"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let catalog = rng.pick(&self.seeds).clone();
        let syntax = *rng.pick(&[
            Syntax::Dsl,
            Syntax::Envelope,
            Syntax::OpenAi,
            Syntax::JsonArray,
        ]);
        let mut options = Options::new(syntax);
        options.max_calls = 1 + rng.below(4);
        options.tool_choice = match rng.below(5) {
            0 => ToolChoice::None,
            1 => ToolChoice::Required,
            2 => ToolChoice::Named(
                (*rng.pick(&["open", "perform", "get_weather", "book", "nope"])).into(),
            ),
            _ => ToolChoice::Auto,
        };
        if rng.chance(0.3) {
            options.policy = Policy::default();
        }
        let request = *rng.pick(&[
            "open safari",
            "what is the weather in Paris",
            "book a flight from Boston to NYC on 2025-01-02 for 2 seats",
            "((((((((((((",
            "",
        ]);
        let mut v = json!({"catalog": catalog, "options": options, "request": {"text": request,
            "entities": [{"type": "contact", "label": "Bob"}]}});
        let rounds = 1 + rng.below(3);
        let donor = rng.pick(&self.seeds).clone();
        mutate::json(rng, &mut v, rounds, &donor);
        // The last 8 bytes seed the walk through the grammar.
        let mut out = serde_json::to_vec(&v).unwrap_or_default();
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
        out
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        if input.len() < 8 {
            return Ok(Verdict::Refused);
        }
        let (body, walk) = input.split_at(input.len() - 8);
        let mut rng = Rng::new(u64::from_le_bytes(walk.try_into().unwrap_or_default()));
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return Ok(Verdict::Refused);
        };
        let Ok(catalog) = Catalog::from_value(&v["catalog"]) else {
            return Ok(Verdict::Refused);
        };
        let Ok(options) = serde_json::from_value::<Options>(v["options"].clone()) else {
            return Ok(Verdict::Refused);
        };
        let Ok(request) = serde_json::from_value::<Request>(v["request"].clone()) else {
            return Ok(Verdict::Refused);
        };
        let mut c = match self.engine.constraint(&catalog, &options, &request) {
            Ok(c) => c,
            Err(e) => {
                // llguidance refusing our grammar is a bug here unless the catalog carries a
                // user regex (`pattern`), which may be beyond its dialect.
                let has_pattern = String::from_utf8_lossy(body).contains("\"pattern\"");
                return match e {
                    GrammarError::Compile(m) if !has_pattern => {
                        Err(format!("generated grammar rejected by llguidance: {m}"))
                    }
                    _ => Ok(Verdict::Refused),
                };
            }
        };
        let validator = PlanValidator::new(&catalog)
            .map_err(|e| format!("a catalog that compiled has no validator: {e}"))?;
        let mut out = None;
        for _ in 0..400 {
            let forced = c.forced_tokens();
            if c.commit_all(&forced).is_err() {
                return Err(format!(
                    "forced tokens were refused after {:?}",
                    c.output_text()
                ));
            }
            if c.is_stopped() {
                out = Some(c.output_text());
                break;
            }
            let allowed = match c.mask() {
                Ok(m) => m.allowed(),
                Err(d) => return Err(format!("dead constraint after {:?}: {d}", c.output_text())),
            };
            if allowed.is_empty() {
                return Err(format!("empty mask after {:?}", c.output_text()));
            }
            let closing: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|&t| self.closers[t as usize])
                .collect();
            let t = if !closing.is_empty() && rng.chance(0.3) {
                *rng.pick(&closing)
            } else {
                *rng.pick(&allowed)
            };
            if c.commit(t).is_err() {
                return Err(format!(
                    "an allowed token was refused after {:?}",
                    c.output_text()
                ));
            }
            if t == self.env.eos() {
                out = Some(c.output_text());
                break;
            }
        }
        let Some(text) = out else {
            return Ok(Verdict::Accepted);
        };
        let plan = options.syntax.parse(&text).map_err(|e| {
            format!(
                "{:?} grammar wrote {text:?}, which does not parse: {e}",
                options.syntax
            )
        })?;
        let plan = if options.syntax.is_untyped() {
            validator.type_values(&plan)
        } else {
            plan
        };
        let violations = validator.validate(&plan, &options.policy, Some(&request.text));
        if !violations.is_empty() {
            return Err(format!(
                "the grammar wrote {text:?}, which breaks: {}",
                violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        let n = plan.calls.len();
        let choice_ok = n <= options.max_calls
            && match &options.tool_choice {
                ToolChoice::None => n == 0,
                ToolChoice::Auto => true,
                ToolChoice::Required => n >= 1,
                ToolChoice::Named(name) => n >= 1 && plan.calls.iter().all(|c| &c.name == name),
            };
        if !choice_ok {
            return Err(format!(
                "tool_choice {:?} / max {} broken by {text:?}",
                options.tool_choice, options.max_calls
            ));
        }
        Ok(Verdict::Accepted)
    }
}

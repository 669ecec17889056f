//! planner.json and model.safetensors of the embedded planner, mutated: loading gives a
//! planner or a typed error, and a loaded planner plans one request without panicking.

use std::path::Path;

use plansmith_planner::{PlanRequest, Planner};
use serde_json::Value;

use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

const MANIFEST: &[u8] = include_bytes!("../../../plansmith-planner/default/planner.json");
const WEIGHTS: &[u8] = include_bytes!("../../../plansmith-planner/default/model.safetensors");

pub struct PlannerTarget {
    manifest: Value,
}

impl PlannerTarget {
    pub fn new() -> Self {
        PlannerTarget {
            manifest: serde_json::from_slice(MANIFEST).expect("the embedded planner.json is JSON"),
        }
    }
}

impl Target for PlannerTarget {
    fn name(&self) -> &'static str {
        "planner"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        // First byte: 0 = mutate the manifest, 1 = mutate the weights' header.
        if rng.chance(0.8) {
            let mut out = vec![0u8];
            out.extend(mutate::json_bytes(rng, &self.manifest, &self.manifest));
            out
        } else {
            // The safetensors header (a length, then JSON) is where the parsing happens.
            let header =
                8 + u64::from_le_bytes(WEIGHTS[..8].try_into().unwrap_or_default()) as usize;
            let mut w = WEIGHTS[..header.min(WEIGHTS.len())].to_vec();
            let rounds = 1 + rng.below(3);
            let hot = w.len();
            mutate::bytes(rng, &mut w, rounds, hot);
            let mut out = vec![1u8];
            out.extend(w);
            out
        }
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Some((&which, rest)) = input.split_first() else {
            return Ok(Verdict::Refused);
        };
        let origin = Path::new("<fuzz>");
        let loaded = if which == 0 {
            Planner::from_bytes(rest, WEIGHTS, origin)
        } else {
            // The mutated header followed by the real tensor data.
            let header =
                8 + u64::from_le_bytes(WEIGHTS[..8].try_into().unwrap_or_default()) as usize;
            let mut w = rest.to_vec();
            w.extend_from_slice(&WEIGHTS[header.min(WEIGHTS.len())..]);
            Planner::from_bytes(MANIFEST, &w, origin)
        };
        let planner = match loaded {
            Ok(p) => p,
            Err(e) if e.to_string().is_empty() => return Err("an empty load error".into()),
            Err(_) => return Ok(Verdict::Refused),
        };
        let mut req = PlanRequest::new("open safari");
        req.max_tokens = Some(256);
        req.deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(1));
        match planner.plan_request(&req) {
            Ok(_) => Ok(Verdict::Accepted),
            Err(_) => Ok(Verdict::Refused),
        }
    }
}

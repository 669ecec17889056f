//! A cascade file: an ordered list of hops (planner directories, the embedded planner, GGUF or
//! Hugging Face models with an optional adapter), each with its floor, then an optional teacher
//! and harvest file. Loading it gives one [`Planner`] whose escalations go hop by hop
//! ([`Planner::with_next_hop`]); the last hop's escalations go to the teacher and are harvested.
//!
//! ```json
//! {
//!   "hops": [
//!     {"name": "tiny", "embedded": true},
//!     {"name": "smollm2", "gguf": "assets/smollm2.gguf", "lora": "planner/adapter",
//!      "calibration": "data/calibration.jsonl", "max_wrong": 0.01, "certainty": 0.95}
//!   ],
//!   "teacher": "openai:http://127.0.0.1:8000/v1#gpt-4o-mini",
//!   "harvest": "harvest.jsonl"
//! }
//! ```
//!
//! `"confirmed_by_next": true` on a hop lets its accepted plans leave only when the next hop
//! would accept them too (scoring the plan, not decoding it); the others go on to that hop.
//!
//! A hop's floor is its planner's own (as calibrated), a number (`floor`), or refitted at load
//! under the guaranteed rule on `calibration` (`max_wrong`, `certainty`). The verdicts of a
//! refit are kept beside the calibration file (`CAL.HOP.journal.jsonl`, [`crate::journal`]), so
//! the next load of the same hop refits from them instead of decoding every request again (a
//! pretrained hop takes tens of minutes on a thousand). Relative paths are
//! read from the cascade file's directory. Every hop plans against the first hop's catalog
//! (or the request's): a hop that cannot read that catalog is refused at load.

use std::path::{Path, PathBuf};
use std::time::Duration;

use plansmith_core::trace::read_traces;
use serde::Deserialize;

use crate::error::PlannerError;
use crate::guarantee::{FloorFit, FloorRule};
use crate::journal::{self, Journal};
use crate::planner::Planner;
use crate::remote::{BackendSpec, RemoteEngine};
use crate::settings::PlannerSettings;
use crate::train::{calibrate_and_test_journaled, prepare_for_calibration, Splits};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CascadeFile {
    pub hops: Vec<HopSpec>,
    /// A teacher spec, as `--teacher` takes it.
    #[serde(default)]
    pub teacher: Option<String>,
    #[serde(default = "default_teacher_timeout")]
    pub teacher_timeout_s: u64,
    /// Append every escalation the teacher answered to this JSONL file (fsynced).
    #[serde(default)]
    pub harvest: Option<PathBuf>,
}

fn default_teacher_timeout() -> u64 {
    30
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopSpec {
    /// Shown in outcomes and metrics (default: `hop1`, `hop2`, ...).
    #[serde(default)]
    pub name: Option<String>,
    /// The planner embedded in this binary.
    #[serde(default)]
    pub embedded: bool,
    /// A planner directory (tiny or LoRA-tuned).
    #[serde(default)]
    pub planner: Option<PathBuf>,
    /// A pretrained model (`.gguf` or Hugging Face directory), with an optional PEFT adapter.
    #[serde(default)]
    pub gguf: Option<PathBuf>,
    #[serde(default)]
    pub lora: Option<PathBuf>,
    /// A model on an inference engine, as `--backend` takes it (`vllm:URL#MODEL`, ...). When
    /// the engine fails (unreachable, an error, too slow), the request escalates to the next
    /// hop with that reason instead of failing.
    #[serde(default)]
    pub backend: Option<String>,
    /// Seconds the `backend` engine may take (default 30).
    #[serde(default)]
    pub backend_timeout_s: Option<u64>,
    /// A fixed floor instead of the planner's own.
    #[serde(default)]
    pub floor: Option<f32>,
    /// Refit the floor at load on these traces under the guaranteed rule.
    #[serde(default)]
    pub calibration: Option<PathBuf>,
    #[serde(default)]
    pub max_wrong: Option<f64>,
    #[serde(default)]
    pub certainty: Option<f64>,
    /// A plan this hop accepts leaves only if the next hop would accept it too (it scores
    /// the plan at or above its floor); otherwise the request goes on to the next hop.
    #[serde(default)]
    pub confirmed_by_next: bool,
}

/// A loaded cascade: the first hop (the others chained behind it), and what each refitted
/// floor certifies.
pub struct Cascade {
    pub planner: Planner,
    pub fits: Vec<(String, FloorFit)>,
    /// What a user should know about the load that is not an error: a refit that could not
    /// keep its verdicts, how many it read back.
    pub notes: Vec<String>,
}

/// Read and check a cascade file, load every hop, and chain them.
pub fn load(path: &Path) -> Result<Cascade, PlannerError> {
    load_with_progress(path, |_, _, _| {})
}

/// [`load`], telling `progress` (hop name, requests judged, requests) as a hop's floor is
/// refitted on its calibration traces.
pub fn load_with_progress(
    path: &Path,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<Cascade, PlannerError> {
    let bad = |message: String| PlannerError::Cascade {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let file: CascadeFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let resolve = |p: &PathBuf| {
        if p.is_absolute() {
            p.clone()
        } else {
            base.join(p)
        }
    };
    if file.hops.is_empty() {
        return Err(bad(
            "`hops` is empty: a cascade needs at least one hop".into()
        ));
    }
    // Every setting is checked before any model loads.
    for (i, hop) in file.hops.iter().enumerate() {
        let at = |m: &str| bad(format!("hops[{i}]: {m}"));
        let sources = hop.embedded as usize
            + hop.planner.is_some() as usize
            + hop.gguf.is_some() as usize
            + hop.backend.is_some() as usize;
        if sources != 1 {
            return Err(at(
                "give exactly one of `embedded`, `planner`, `gguf`, `backend`",
            ));
        }
        if let Some(spec) = &hop.backend {
            BackendSpec::parse(spec).map_err(|e| at(&e.to_string()))?;
        } else if hop.backend_timeout_s.is_some() {
            return Err(at("`backend_timeout_s` needs `backend`"));
        }
        if hop.lora.is_some() && hop.gguf.is_none() {
            return Err(at("`lora` needs `gguf`"));
        }
        if hop.floor.is_some() && hop.calibration.is_some() {
            return Err(at("give `floor` or `calibration`, not both"));
        }
        if (hop.max_wrong.is_some() || hop.certainty.is_some()) && hop.calibration.is_none() {
            return Err(at(
                "`max_wrong` and `certainty` need `calibration` to refit the floor on",
            ));
        }
        if let Some(name) = &hop.name {
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !ok || name == "teacher" {
                return Err(at(&format!(
                    "name `{name}`: use 1-64 letters, digits, `_`, `.` or `-` (and not `teacher`)"
                )));
            }
            if file.hops[..i].iter().any(|h| h.name.as_ref() == Some(name)) {
                return Err(at(&format!("name `{name}` is used by an earlier hop")));
            }
        }
        if let Some(f) = hop.floor {
            if f.is_nan() {
                return Err(at("`floor` is not a number"));
            }
        }
        hop_rule(hop).check().map_err(|e| at(&e))?;
        if hop.confirmed_by_next {
            match file.hops.get(i + 1) {
                None => return Err(at("`confirmed_by_next` needs a hop after this one")),
                Some(next) if next.backend.is_some() => {
                    return Err(at(
                        "`confirmed_by_next`: the next hop runs on an engine, which gives no \
                         logits to score a plan with",
                    ))
                }
                Some(_) => {}
            }
        }
        for p in [&hop.planner, &hop.gguf, &hop.lora, &hop.calibration]
            .into_iter()
            .flatten()
        {
            if !resolve(p).exists() {
                return Err(at(&format!("{} does not exist", resolve(p).display())));
            }
        }
    }
    let mut planners = Vec::new();
    let mut fits = Vec::new();
    let mut notes = Vec::new();
    for (i, hop) in file.hops.iter().enumerate() {
        let name = hop.name.clone().unwrap_or_else(|| format!("hop{}", i + 1));
        let at = |m: String| bad(format!("hops[{i}] ({name}): {m}"));
        let first: Option<&Planner> = planners.first();
        let mut planner = if hop.embedded {
            crate::dir::default_planner()?
        } else if let Some(dir) = &hop.planner {
            Planner::load(&resolve(dir))?
        } else if let Some(spec) = &hop.backend {
            let catalog = match first {
                Some(p) => p.catalog.as_ref().clone(),
                None => crate::dir::default_planner()?.catalog.as_ref().clone(),
            };
            let engine = RemoteEngine::new(
                BackendSpec::parse(spec)?,
                std::env::var("PLANSMITH_BACKEND_API_KEY").ok(),
                Duration::from_secs(hop.backend_timeout_s.unwrap_or(30)),
            );
            Planner::remote(engine, catalog, PlannerSettings::chat())?
        } else {
            let catalog = match first {
                Some(p) => p.catalog.as_ref().clone(),
                None => crate::dir::default_planner()?.catalog.as_ref().clone(),
            };
            let model = resolve(hop.gguf.as_ref().expect("checked above"));
            let adapter = hop.lora.as_ref().map(resolve);
            Planner::pretrained(&model, adapter.as_deref(), catalog, PlannerSettings::chat())?
        };
        if let Some(first) = first {
            if !planner.settings.tools_in_prompt && planner.catalog.hash() != first.catalog.hash() {
                return Err(at(format!(
                    "its planner knows only its own catalog ({} tools), not the first hop's ({} tools); \
                     use a tools-in-prompt planner or one trained on the same catalog",
                    planner.catalog.tools.len(),
                    first.catalog.tools.len()
                )));
            }
            planner
                .check_catalog(Some(&first.catalog))
                .map_err(|e| at(e.to_string()))?;
        }
        if let Some(f) = hop.floor {
            planner.set_floor(f);
        }
        if let Some(cal) = &hop.calibration {
            let splits = Splits {
                train: Vec::new(),
                calibration: read_traces(resolve(cal))?,
                test: Vec::new(),
            };
            prepare_for_calibration(&mut planner);
            let journal_path = journal_beside(&resolve(cal), &name);
            let mut journal = match Journal::open(&journal_path, &journal::fingerprint(&planner)?) {
                Ok(j) => Some(j),
                Err(e) => {
                    notes.push(format!(
                        "hop {name}: its calibration verdicts are not kept ({e}); the next load judges every request again"
                    ));
                    None
                }
            };
            let mode = planner.settings.confidence;
            calibrate_and_test_journaled(
                &mut planner,
                &splits,
                hop_rule(hop),
                &[mode],
                journal.as_mut(),
                |_, done, total| progress(&name, done, total),
            )?;
            if let Some(j) = journal.as_ref().filter(|j| j.reused() > 0) {
                notes.push(format!(
                    "hop {name}: {} calibration verdicts read back from {}",
                    j.reused(),
                    j.path().display()
                ));
            }
            if let Some(fit) = planner.meta.floor_fit.clone() {
                fits.push((name.clone(), fit));
            }
        }
        let planner = planner.named_hop(name);
        planners.push(if hop.confirmed_by_next {
            planner.confirmed_by_next()
        } else {
            planner
        });
    }
    let mut chain = planners.pop().expect("at least one hop");
    if let Some(spec) = &file.teacher {
        // A trace-file teacher's file is read from the cascade file's directory too.
        let spec = match spec.strip_prefix("traces:") {
            Some(p) => format!("traces:{}", resolve(&PathBuf::from(p)).display()),
            None => spec.clone(),
        };
        chain = chain.with_teacher(crate::teacher::from_spec(
            &spec,
            Duration::from_secs(file.teacher_timeout_s),
        )?);
    }
    if let Some(h) = &file.harvest {
        chain = chain.with_harvest(&resolve(h))?;
    }
    while let Some(hop) = planners.pop() {
        chain = hop.with_next_hop(chain);
    }
    Ok(Cascade {
        planner: chain,
        fits,
        notes,
    })
}

/// Where a hop's calibration verdicts are kept: beside its calibration file, named by the hop.
fn journal_beside(calibration: &Path, hop: &str) -> PathBuf {
    let name = calibration
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    calibration.with_file_name(format!("{name}.{hop}.journal.jsonl"))
}

fn hop_rule(hop: &HopSpec) -> FloorRule {
    FloorRule::guaranteed(hop.max_wrong.unwrap_or(0.01), hop.certainty.unwrap_or(0.95))
}

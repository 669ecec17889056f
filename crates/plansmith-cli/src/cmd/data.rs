use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use plansmith_core::trace::{read_traces, write_atomic};
use plansmith_data::{AugmentConfig, PaceConfig};

use crate::Outcome;

#[derive(Subcommand)]
pub enum DataCommand {
    /// Generate the Pace voice-companion dataset: train/calibration/test splits, an optional
    /// held-out verb, and stats.json.
    Pace {
        #[arg(long)]
        out: PathBuf,
        /// Training traces (test gets 2N/15). 60,000 by default: with `train`'s defaults
        /// (five passes) a planner right on ~0.95 of generated test requests, in ~15-25
        /// minutes on 2 cores; 6,000 gave 0.71 under the old training defaults.
        #[arg(long, default_value_t = 60000)]
        n: usize,
        /// Calibration traces (default: N/10, and at least 2,000 — what the default floor
        /// rule needs to certify at most 1% wrong plans with 95% confidence, with room for a
        /// planner that is not yet perfect).
        #[arg(long, value_name = "N")]
        calibration: Option<usize>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A verb kept out of train/calibration/test and written to heldout_verb.jsonl.
        #[arg(long)]
        holdout_verb: Option<String>,
        /// Also add an ALL-CAPS copy of this share of the training traces (requests and copied
        /// values upper-cased; calibration and test keep the natural 4%). Small models rarely
        /// see shouted requests otherwise; the default planner trains with 0.15.
        #[arg(long, default_value_t = 0.0)]
        upper_train: f64,
    },
    /// Tools-in-prompt augmentation: renamed tools and parameters, shuffled catalogs,
    /// distractors, removed tools, plus synthetic tool families.
    Augment {
        /// Input traces (JSONL).
        #[arg(long)]
        data: PathBuf,
        /// Catalog for traces without their own `tools`.
        #[arg(long)]
        tools: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Augmented variants per input trace.
        #[arg(long, default_value_t = 1)]
        copies: usize,
        /// Synthetic traces from non-Pace tool families to add.
        #[arg(long, default_value_t = 0)]
        synthetic: usize,
        /// Traces calling tools invented per request (made-up verb, description and
        /// parameters), added to the whole `--tools` catalog or among other invented and
        /// synthetic-family tools: what teaches a tools-in-prompt planner to call a tool it
        /// never saw in training.
        #[arg(long, default_value_t = 0)]
        novel: usize,
        /// With --novel: about half the invented tools' descriptions list two or three verbs
        /// ("Archive, shelve or put away a note.") and requests say any of them; for planners
        /// that read descriptions.
        #[arg(long, requires = "novel")]
        novel_alternatives: bool,
        /// With --novel: made-up verbs use every common English onset and coda (`whaist`,
        /// `chu`), so invented names begin with as many different pieces as real new tools'
        /// names do. The default planner's recipe (scripts/train-default.sh) turns it on; off
        /// by default so that earlier recipes regenerate their data byte for byte.
        #[arg(long, requires = "novel")]
        novel_wide_spelling: bool,
        /// With --novel: a fifth of the requests for a tool with one required string
        /// parameter give only a duration ("snooze for 20 minutes" -> `snooze(moment=20
        /// minutes)`, and a limit counted in the same unit gets the number too). Off by
        /// default, as --novel-wide-spelling.
        #[arg(long, requires = "novel")]
        novel_durations: bool,
        /// With --novel: string parameters have a kind (a person, a time, a place, a thing, an
        /// event, words to say, a topic) with a name and description that say what they hold,
        /// and requests give them values of that kind ("for Maria", "when the bus arrives"),
        /// so two string parameters are told apart by meaning rather than order. Off by
        /// default, as --novel-wide-spelling.
        #[arg(long, requires = "novel")]
        novel_typed: bool,
        /// Pace-shaped requests whose verb is new ("blicket the volume to 40") calling a tool
        /// named after it that stands in for the `--tools` tool (`blicket(target, value)`
        /// for `set`): teaches a planner to match the request's verb to a tool's name rather
        /// than map Pace-shaped requests to Pace's tools.
        #[arg(long, default_value_t = 0)]
        swapped: usize,
        /// Requests for benchmark-style APIs written for this project (calculators, lookups,
        /// bookings) with typed arguments: floats, lists, booleans, enums, optional parameters
        /// left to their defaults. Catalogs of two to four APIs, half beside the `--tools`
        /// catalog; ~10% ask for an API the catalog lacks (no call), ~18% for two calls.
        #[arg(long, default_value_t = 0)]
        apis: usize,
        /// Traces per augmented catalog: each run of this many consecutive traces of one
        /// catalog gets the same renaming, order, distractors and removed tool, and each
        /// invented tool (`--novel`) gets this many requests. For LoRA on a pretrained model,
        /// use the batch size (32): a batch then shares its catalog prompt, which it runs once,
        /// so a changed-catalog mix trains about as fast as one catalog (~10x faster than a
        /// catalog per trace). 1 (the default) draws a catalog per trace.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        group: u64,
        /// Keep the original traces too.
        #[arg(long)]
        keep_original: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Import xLAM, OpenAI chat fine-tuning or BFCL files as traces (JSONL on stdout or --out).
    Import {
        /// xlam, openai or bfcl.
        #[arg(long)]
        format: plansmith_data::ImportFormat,
        file: PathBuf,
        /// BFCL possible-answer file.
        #[arg(long)]
        answers: Option<PathBuf>,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Fail on the first malformed record instead of skipping it.
        #[arg(long)]
        strict: bool,
    },
    /// Export traces as OpenAI chat fine-tuning JSONL, TRL SFT records, or xLAM records.
    Export {
        /// openai, trl, trl-planner or xlam. trl-planner: TRL prompt-completion records in the
        /// prompt plansmith's pretrained planner reads, for LoRA on GPUs whose adapter
        /// `--gguf BASE --lora DIR` then loads (docs/guide/training-gpu.md).
        #[arg(long)]
        format: plansmith_data::ExportFormat,
        #[arg(long)]
        data: PathBuf,
        /// Catalog for traces without their own `tools`.
        #[arg(long)]
        tools: Option<PathBuf>,
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn emit(out: Option<PathBuf>, text: &str) -> anyhow::Result<()> {
    match out {
        Some(path) => write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

pub fn run(command: DataCommand) -> anyhow::Result<Outcome> {
    match command {
        DataCommand::Pace {
            out,
            n,
            calibration,
            seed,
            holdout_verb,
            upper_train,
        } => {
            if !(0.0..=1.0).contains(&upper_train) {
                anyhow::bail!("--upper-train must be between 0 and 1, got {upper_train}");
            }
            let mut cfg = PaceConfig::with_n(n);
            cfg.n_calibration = calibration.unwrap_or((n / 10).max(2000));
            cfg.seed = seed;
            cfg.holdout_verb = holdout_verb;
            cfg.upper_train = upper_train;
            let stats = plansmith_data::run_pace(&out, &cfg)?;
            let stats = serde_json::to_value(&stats)?;
            println!(
                "wrote {} (train/calibration/test/heldout_verb.jsonl, stats.json)",
                out.display()
            );
            for key in [
                "splits",
                "per_verb",
                "unique_templates",
                "unique_skeletons",
                "upper_train_added",
            ] {
                if let Some(v) = stats.get(key) {
                    println!("{key}: {v}");
                }
            }
        }
        DataCommand::Augment {
            data,
            tools,
            out,
            copies,
            synthetic,
            novel,
            novel_alternatives,
            novel_wide_spelling,
            novel_durations,
            novel_typed,
            swapped,
            apis,
            group,
            keep_original,
            seed,
        } => {
            let group = group as usize;
            let catalog = super::catalog::load(&tools)?;
            let traces = read_traces(&data)?;
            let cfg = AugmentConfig {
                seed,
                copies,
                group,
                ..AugmentConfig::default()
            };
            // Each part goes to JSONL text as soon as it is made: a trace with its own catalog
            // is tens of KB parsed but ~3 KB as a line (the default recipe's 235k augmented
            // traces: 8 GB at peak instead of 11).
            let (augmented, stats) = plansmith_data::augment_traces(&traces, Some(&catalog), &cfg)?;
            let mut written = augmented.len();
            let mut jsonl = plansmith_data::pace::traces_to_jsonl(&augmented);
            drop(augmented);
            if synthetic > 0 {
                let part = plansmith_data::synthetic_traces(synthetic, seed)?;
                written += part.len();
                jsonl.push_str(&plansmith_data::pace::traces_to_jsonl(&part));
            }
            if novel > 0 {
                let mut pool = catalog.tools.clone();
                for family in plansmith_data::families() {
                    pool.extend(family.catalog().tools);
                }
                let part = plansmith_data::novel_traces_with(
                    novel,
                    seed,
                    &catalog.tools,
                    &pool,
                    plansmith_data::NovelOptions {
                        alternatives: novel_alternatives,
                        wide_spelling: novel_wide_spelling,
                        durations: novel_durations,
                        typed: novel_typed,
                        group,
                    },
                )?;
                written += part.len();
                jsonl.push_str(&plansmith_data::pace::traces_to_jsonl(&part));
            }
            if swapped > 0 {
                let part = plansmith_data::swapped_verb_traces(swapped, seed, &catalog)?;
                written += part.len();
                jsonl.push_str(&plansmith_data::pace::traces_to_jsonl(&part));
            }
            if apis > 0 {
                let part = plansmith_data::api_traces(apis, seed, &catalog.tools, group)?;
                written += part.len();
                jsonl.push_str(&plansmith_data::pace::traces_to_jsonl(&part));
            }
            if keep_original {
                written += traces.len();
                jsonl.push_str(&plansmith_data::pace::traces_to_jsonl(&traces));
            }
            emit(Some(out.clone()), &jsonl)?;
            eprintln!(
                "wrote {written} traces to {} ({})",
                out.display(),
                serde_json::to_string(&stats)?
            );
        }
        DataCommand::Import {
            format,
            file,
            answers,
            out,
            strict,
        } => {
            let imported =
                plansmith_data::import_traces(format, &file, answers.as_deref(), strict)?;
            for e in &imported.skipped {
                eprintln!("skipped {e}");
            }
            eprintln!(
                "imported {} traces, skipped {} malformed records",
                imported.items.len(),
                imported.skipped_count()
            );
            emit(out, &plansmith_data::pace::traces_to_jsonl(&imported.items))?;
        }
        DataCommand::Export {
            format,
            data,
            tools,
            out,
        } => {
            let catalog = tools.as_ref().map(super::catalog::load).transpose()?;
            let traces = read_traces(&data)?;
            let text = if format == plansmith_data::ExportFormat::TrlPlanner {
                plansmith_data::export_trl_planner(&traces, catalog.as_ref(), &|c| {
                    plansmith_llama::chat::tools_system_text(None, &c.to_openai())
                        .map_err(|e| e.to_string())
                })?
            } else {
                plansmith_data::export_traces(format, &traces, catalog.as_ref(), None)?
            };
            emit(out, &text)?;
        }
    }
    Ok(Outcome::Ok)
}

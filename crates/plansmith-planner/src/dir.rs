//! The planner directory, saved atomically, and the default planner embedded in the binary.
//!
//! * tiny GPT: `planner.json` + `model.safetensors`;
//! * pretrained (`family: "llama"`): `planner.json` naming the base model file (GGUF or
//!   Hugging Face directory) + an optional PEFT adapter in `adapter/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::Device;
use plansmith_core::{Catalog, Syntax, Tool};
use plansmith_lm::{AnyCodec, TinyGpt, TinyGptConfig};
use serde::{Deserialize, Serialize};

use crate::backend::Persisted;
use crate::error::PlannerError;
use crate::llama::{LlamaLm, LlamaSource};
use crate::planner::Planner;
use crate::settings::{PlannerMeta, PlannerSettings};

pub const FORMAT_VERSION: u32 = 1;
pub const MANIFEST: &str = "planner.json";
pub const WEIGHTS: &str = "model.safetensors";
/// Where a pretrained planner keeps its LoRA adapter.
pub const ADAPTER: &str = "adapter";

#[derive(Serialize, Deserialize)]
struct Manifest {
    format_version: u32,
    family: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<TinyGptConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    codec: Option<AnyCodec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    llama: Option<LlamaSource>,
    #[serde(flatten)]
    settings: PlannerSettings,
    catalog: Vec<Tool>,
    #[serde(flatten)]
    meta: PlannerMeta,
}

fn dir_err(path: &Path, message: impl Into<String>) -> PlannerError {
    PlannerError::Dir {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// The base model's path as `planner.json` stores it: relative to the planner directory when
/// both lie under the working directory `cwd` (a planner trained in a project, next to the
/// project's `assets/`, then moves and is committed with it, and names no machine path);
/// absolute otherwise.
fn portable_base(base: &Path, dir: &Path, cwd: &Path) -> PathBuf {
    use std::path::Component;
    // `..` resolved by name: a planner loaded from `target/q1` holds its base as
    // `target/q1/../../assets/m.gguf`, and saving it elsewhere must find the project path again.
    let abs = |p: &Path| {
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir
                    if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
                {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        out
    };
    let (abs_base, abs_dir) = (abs(base), abs(dir));
    let plain = |p: &Path| p.components().all(|c| matches!(c, Component::Normal(_)));
    match (abs_base.strip_prefix(cwd), abs_dir.strip_prefix(cwd)) {
        (Ok(b), Ok(d)) if plain(b) && plain(d) => {
            let mut rel = PathBuf::new();
            for _ in d.components() {
                rel.push("..");
            }
            rel.join(b)
        }
        _ => abs_base,
    }
}

impl Planner {
    /// Save atomically: everything is written to a sibling temp directory, fsynced, and
    /// renamed over `dir`; a crash leaves either the old planner or the new one.
    pub fn save(&self, dir: &Path) -> Result<(), PlannerError> {
        let (family, model, codec, llama) = match self.lm.persisted() {
            Persisted::Tiny { model, codec } => (
                "tiny_gpt",
                Some(model.config().clone()),
                Some(codec.clone()),
                None,
            ),
            Persisted::Pretrained { base, adapter } => (
                "llama",
                None,
                None,
                Some(LlamaSource {
                    base: match std::env::current_dir() {
                        Ok(cwd) => portable_base(base, dir, &cwd),
                        Err(_) => base.to_path_buf(),
                    },
                    adapter: adapter.map(|_| ADAPTER.into()),
                }),
            ),
            Persisted::Remote { describe } => {
                return Err(dir_err(
                    dir,
                    format!("a planner on a remote engine ({describe}) has no model to save"),
                ))
            }
        };
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            family: family.into(),
            model,
            codec,
            llama,
            settings: self.settings.clone(),
            catalog: self.catalog.tools.clone(),
            meta: self.meta.clone(),
        };
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| dir_err(parent, e.to_string()))?;
        let name = dir
            .file_name()
            .ok_or_else(|| dir_err(dir, "not a directory name"))?
            .to_string_lossy();
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| dir_err(&tmp, e.to_string()))?;
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| dir_err(dir, e.to_string()))?;
        plansmith_core::trace::write_atomic(tmp.join(MANIFEST), &json)
            .map_err(|e| dir_err(&tmp, e.to_string()))?;
        match self.lm.persisted() {
            Persisted::Tiny { model, .. } => model.save_safetensors(&tmp.join(WEIGHTS))?,
            Persisted::Pretrained { adapter, .. } => {
                if let Some(adapter) = adapter {
                    copy_dir(adapter, &tmp.join(ADAPTER))?;
                }
            }
            Persisted::Remote { .. } => {}
        }
        let old = parent.join(format!(".{name}.old-{}", std::process::id()));
        if dir.exists() {
            std::fs::rename(dir, &old).map_err(|e| dir_err(dir, e.to_string()))?;
        }
        std::fs::rename(&tmp, dir).map_err(|e| dir_err(dir, e.to_string()))?;
        let _ = std::fs::remove_dir_all(&old);
        std::fs::File::open(parent)
            .and_then(|f| f.sync_all())
            .map_err(|e| dir_err(parent, e.to_string()))
    }

    pub fn load(dir: &Path) -> Result<Planner, PlannerError> {
        let manifest_path = dir.join(MANIFEST);
        let bytes =
            std::fs::read(&manifest_path).map_err(|e| dir_err(&manifest_path, e.to_string()))?;
        if let Some(planner) = Planner::load_pretrained(&bytes, dir)? {
            return Ok(planner);
        }
        let weights_path = dir.join(WEIGHTS);
        let weights =
            std::fs::read(&weights_path).map_err(|e| dir_err(&weights_path, e.to_string()))?;
        Planner::from_bytes(&bytes, &weights, dir)
    }

    /// Load from the two files' contents (`origin` names them in errors).
    pub fn from_bytes(
        manifest: &[u8],
        weights: &[u8],
        origin: &Path,
    ) -> Result<Planner, PlannerError> {
        let m: Manifest = serde_json::from_slice(manifest)
            .map_err(|e| dir_err(&origin.join(MANIFEST), format!("invalid manifest: {e}")))?;
        if m.format_version != FORMAT_VERSION {
            return Err(dir_err(
                origin,
                format!(
                    "format version {} is not supported (expected {FORMAT_VERSION})",
                    m.format_version
                ),
            ));
        }
        if m.family != "tiny_gpt" {
            return Err(dir_err(
                origin,
                format!("model family `{}` is not supported here", m.family),
            ));
        }
        let (Some(config), Some(codec)) = (m.model, m.codec) else {
            return Err(dir_err(
                &origin.join(MANIFEST),
                "a tiny_gpt planner needs `model` and `codec`",
            ));
        };
        // The weights file bounds the model: a manifest describing more parameters than
        // model.safetensors holds (f32, 4 bytes each) is refused before any allocation.
        config
            .validate()
            .map_err(|e| dir_err(&origin.join(MANIFEST), e.to_string()))?;
        let params = config.param_count().unwrap_or(usize::MAX);
        if params.saturating_mul(4) > weights.len() {
            return Err(dir_err(
                &origin.join(MANIFEST),
                format!(
                    "`model` describes {params} parameters but {WEIGHTS} holds {} bytes",
                    weights.len()
                ),
            ));
        }
        let device = Device::Cpu;
        let tensors: HashMap<String, candle_core::Tensor> =
            candle_core::safetensors::load_buffer(weights, &device)
                .map_err(|e| dir_err(&origin.join(WEIGHTS), format!("unreadable weights: {e}")))?;
        let model = TinyGpt::new(config, 0, &device)?;
        model.set_weights(&tensors, &origin.join(WEIGHTS))?;
        let catalog = Catalog::from_tools(m.catalog)?;
        Planner::new(model, codec, catalog, m.settings, m.meta)
    }

    /// A pretrained planner from its manifest (None when the manifest is a tiny one).
    fn load_pretrained(manifest: &[u8], dir: &Path) -> Result<Option<Planner>, PlannerError> {
        let m: Manifest = serde_json::from_slice(manifest)
            .map_err(|e| dir_err(&dir.join(MANIFEST), format!("invalid manifest: {e}")))?;
        if m.family != "llama" {
            return Ok(None);
        }
        if m.format_version != FORMAT_VERSION {
            return Err(dir_err(
                dir,
                format!(
                    "format version {} is not supported (expected {FORMAT_VERSION})",
                    m.format_version
                ),
            ));
        }
        let source = m
            .llama
            .ok_or_else(|| dir_err(&dir.join(MANIFEST), "a llama planner needs `llama.base`"))?;
        let resolved = source.resolved(dir);
        if !resolved.base.exists() {
            // A committed planner ships without its base weights: say which file it wants
            // and where that path came from, not only an i/o error.
            return Err(dir_err(
                &dir.join(MANIFEST),
                format!(
                    "its base model {} is not there (`llama.base` = {}, read from the planner \
                     directory); fetch it (this repository's planners: scripts/assets.sh) or \
                     point `llama.base` at a copy",
                    resolved.base.display(),
                    source.base.display()
                ),
            ));
        }
        let mut lm = LlamaLm::load(resolved)?;
        lm.use_syntax(m.settings.syntax)?;
        lm.use_tool_list(m.settings.tool_list);
        let catalog = Catalog::from_tools(m.catalog)?;
        Ok(Some(Planner::with_lm(
            Box::new(lm),
            catalog,
            m.settings,
            m.meta,
        )?))
    }

    /// [`Planner::pretrained`] with the reply format this model does best (measured in
    /// docs/results/model-families.md): the `<tool_call>` tags where its chat template teaches
    /// them (Qwen2.5, Qwen3), else a JSON array.
    pub fn pretrained_native(
        base: &Path,
        adapter: Option<&Path>,
        catalog: Catalog,
        mut settings: PlannerSettings,
    ) -> Result<Planner, PlannerError> {
        let lm = load_pretrained(base, adapter)?;
        settings.syntax = if lm.bundle.template.has_tool_call_tags() {
            Syntax::ToolCall
        } else {
            Syntax::JsonArray
        };
        Self::over_pretrained(lm, catalog, settings)
    }

    /// A pretrained planner over a GGUF file or Hugging Face directory (`adapter`: a PEFT LoRA
    /// directory applied at load), planning against `catalog` with chat-model settings.
    pub fn pretrained(
        base: &Path,
        adapter: Option<&Path>,
        catalog: Catalog,
        settings: PlannerSettings,
    ) -> Result<Planner, PlannerError> {
        Self::over_pretrained(load_pretrained(base, adapter)?, catalog, settings)
    }

    fn over_pretrained(
        mut lm: LlamaLm,
        catalog: Catalog,
        settings: PlannerSettings,
    ) -> Result<Planner, PlannerError> {
        lm.use_syntax(settings.syntax)?;
        lm.use_tool_list(settings.tool_list);
        Planner::with_lm(Box::new(lm), catalog, settings, PlannerMeta::default())
    }
}

/// Load a pretrained model (paths made absolute: the planner directory may persist them).
fn load_pretrained(base: &Path, adapter: Option<&Path>) -> Result<LlamaLm, PlannerError> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    LlamaLm::load(LlamaSource {
        base: abs(base),
        adapter: adapter.map(abs),
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), PlannerError> {
    std::fs::create_dir_all(to).map_err(|e| dir_err(to, e.to_string()))?;
    let entries = std::fs::read_dir(from).map_err(|e| dir_err(from, e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| dir_err(from, e.to_string()))?;
        let path = entry.path();
        if path.is_file() {
            let bytes = std::fs::read(&path).map_err(|e| dir_err(&path, e.to_string()))?;
            plansmith_core::trace::write_atomic(to.join(entry.file_name()), &bytes)
                .map_err(|e| dir_err(to, e.to_string()))?;
        }
    }
    Ok(())
}

/// The default planner shipped inside the binary (see `planners/default/`), used when no
/// `--planner` is given.
pub fn default_planner() -> Result<Planner, PlannerError> {
    match embedded::PLANNER {
        Some((manifest, weights)) => {
            Planner::from_bytes(manifest, weights, Path::new("<embedded default planner>"))
        }
        None => Err(PlannerError::Dir {
            path: "<embedded default planner>".into(),
            message: "this build has no embedded planner; pass --planner DIR".into(),
        }),
    }
}

mod embedded {
    /// Re-trained by `scripts/train-default.sh`.
    pub const PLANNER: Option<(&[u8], &[u8])> = Some((
        include_bytes!("../default/planner.json"),
        include_bytes!("../default/model.safetensors"),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_inside_the_project_is_stored_relative_to_the_planner() {
        let cwd = Path::new("/home/u/project");
        let rel = portable_base(
            Path::new("/home/u/project/assets/smollm2.gguf"),
            Path::new("planners/generalist"),
            cwd,
        );
        assert_eq!(rel, Path::new("../../assets/smollm2.gguf"));
        // resolving it against the planner directory finds the base again
        let back = LlamaSource {
            base: rel,
            adapter: None,
        }
        .resolved(&cwd.join("planners/generalist"));
        assert_eq!(
            back.base,
            Path::new("/home/u/project/planners/generalist/../../assets/smollm2.gguf")
        );
        // a relative base path counts from the working directory too
        assert_eq!(
            portable_base(Path::new("assets/m.gguf"), Path::new("out"), cwd),
            Path::new("../assets/m.gguf")
        );
        // outside the project, or through `..`: absolute
        assert_eq!(
            portable_base(Path::new("/models/m.gguf"), Path::new("out"), cwd),
            Path::new("/models/m.gguf")
        );
        assert_eq!(
            portable_base(Path::new("../m.gguf"), Path::new("out"), cwd),
            Path::new("/home/u/m.gguf")
        );
        // a loaded planner's base (its directory, then `..`) saved into another directory of
        // the project is relative again, never the machine path it was resolved to
        assert_eq!(
            portable_base(
                Path::new("/home/u/project/target/q1/../../assets/m.gguf"),
                Path::new("planners/generalist"),
                cwd
            ),
            Path::new("../../assets/m.gguf")
        );
    }
}
